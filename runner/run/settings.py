"""The settings of one run, saved as ``run.json`` so ``--resume`` repeats them exactly."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, Field

from runner.records.quantities import Dollars, Rate, Seconds
from runner.system.bounded_read import SETTINGS_BYTES
from runner.system.json_input import read_versioned_model
from runner.system.writes import atomic_write

SETTINGS_VERSION = 1
"""run.json's format version: a newer one is refused on --resume, never read as this one."""


class Backend(str, Enum):
    DOCKER = "docker"  # one container pair per scenario (the default)
    LOCAL = "local"  # host processes, for development and fast tests


class Selection(BaseModel):
    """Which scenarios to run; empty lists mean 'no filter'."""

    ids: list[str] = Field(default_factory=list, description="scenario ids (-s)")
    categories: list[str] = Field(default_factory=list, description="categories (--category)")
    lane: str | None = Field(default=None, description=(
        "GAIA's CI lane (--lane): the categories eval/ci_lanes.json beside the tree gives it"))
    tags: list[str] = Field(default_factory=list, description="scenarios with any of these tags")
    exclude_tags: list[str] = Field(
        default_factory=list, description="scenarios with any of these tags are left out"
    )


class RunSettings(BaseModel):
    """Everything that decides what a run does. API keys are never part of it."""

    schema_version: int = Field(default=SETTINGS_VERSION, description="version of this format")
    run_id: str = Field(description="the run's id (UTC timestamp plus four hex digits)")
    suite_paths: list[Path] = Field(description="scenario files or folders, as given")
    corpus_root: Path = Field(description="the corpus folder (manifest.json and documents)")
    fixtures_root: Path | None = Field(default=None, description=(
        "the fixture tree (--fixtures; default: a GAIA checkout's tests/fixtures/gaia beside "
        "the scenarios) whose folders scenarios stage at ~/gaia-eval/<folder>/; None: none"))
    results_root: Path = Field(default=Path("results"), description="results/<run_id> goes here")
    selection: Selection = Field(default_factory=Selection, description="which scenarios run")
    backend: Backend = Field(default=Backend.DOCKER, description="docker | local")
    device: str = Field(
        default="cpu",
        description="the device GAIA sessions are switched to (what is really present)",
    )
    device_reason: str = Field(default="", description="why --device auto picked it")
    stack_device: str | None = Field(
        default=None, description="the stack device asked for (cpu | rocm | npu | vulkan), which "
        "the served-on check holds the server to; None: the one `device` stands for (gpu → rocm)")
    llm_url: str = Field(default="http://127.0.0.1:13305", description="the LLM server's origin")
    llm_container: str | None = Field(
        default=None, description="docker backend: the running LLM server's container"
    )
    concurrency: int = Field(default=1, ge=1, le=16, description="sandboxes at the same time")
    warm_pool: bool = Field(default=True, description=(
        "prepare sandboxes ahead (up to concurrency + 1) while scenarios run; each is still "
        "used once and destroyed"))
    trials: int = Field(default=1, ge=1, le=50, description="runs of each scenario")
    rejudge: int = Field(default=1, ge=1, le=20, description="judgments of each transcript")
    timeout_s: Seconds | None = Field(
        default=None, description="overrides GAIA's per-scenario timeout formula when set"
    )
    budget_usd: Dollars | None = Field(
        default=None, description="judge spend allowed per scenario, US dollars"
    )
    min_pass_rate: Rate | None = Field(
        default=None, description="exit 1 below this decided pass rate (0-1)"
    )
    allow_incomplete: bool = Field(
        default=False,
        description="--min-pass-rate leaves out scenarios without a verdict (TIMEOUT, ERRORED, "
        "INFRA_ERROR, ...); by default (--require-complete) they count as not passed",
    )
    integrity: bool = Field(default=False, description=(
        "GAIA main's integrity gate: exit 1 when a --baseline scenario has no row or a row has "
        "no measurement (TIMEOUT, ERRORED, INFRA_ERROR, SETUP_ERROR, BUDGET_EXCEEDED, "
        "SKIPPED_*, BLOCKED_BY_ARCHITECTURE, NOT_RUN)"))
    not_measured: dict[str, str] = Field(default_factory=dict, description=(
        "--not-measured ID=REASON: scenario id or category -> why this machine cannot measure "
        "it; its unmeasured or missing rows are reported with the reason, not counted"))
    judge_provider: str = Field(default="none", description="anthropic | openai | none")
    judge_model: str | None = Field(default=None, description="the judge's model")
    judge_url: str | None = Field(default=None, description="the judge's endpoint (openai)")
    simulator_mode: str = Field(
        default="scripted", description="scripted (offline user turns) | llm (hosted)"
    )
    simulator_model: str | None = Field(default=None, description="the hosted simulator's model")
    simulator_url: str | None = Field(default=None, description="the hosted simulator's endpoint")
    max_identical_infra_errors: int = Field(
        default=3, description="stop the run after this many identical infrastructure errors"
    )
    # The agent under test (a GAIA user's own agents and Agent UI).
    agent_dirs: list[Path] = Field(
        default_factory=list, description="folders of <id>/agent.py, mounted read-only"
    )
    agent: str | None = Field(default=None, description="agent id for scenarios without agent_type")
    agent_map: dict[str, str] = Field(
        default_factory=dict, description="GAIA agent_type -> agent id (--agent-map)"
    )
    agent_model: str | None = Field(
        default=None, description="the chat model the Agent UI asks the LLM server for"
    )
    gaia_spec: str | None = Field(
        default=None, description="amd-gaia version, wheel or source dir for the Agent UI image"
    )
    target_url: str | None = Field(
        default=None, description="attach to a running Agent UI (its MCP bridge URL): no sandbox"
    )
    strict: bool = Field(
        default=False, description="any rejected scenario file stops the run before it starts"
    )
    derived_checks: bool = Field(
        default=True, description="exact checks derived from numeric/short expected answers"
    )
    retry_errors: bool = Field(
        default=False, description="--resume also re-runs infrastructure statuses"
    )
    allow_device_fallback: bool = Field(
        default=False, description=(
            "run although the LLM server reports serving on another device than --device asked "
            "for, or cannot open the device nodes (the summary headline then says so)"))
    allow_model_change: bool = Field(
        default=False, description=(
            "--resume goes on although the LLM server serves another model than the run "
            "started with (the scorecard then mixes two models and says so)"))
    repeatable_decoding: bool = Field(
        default=False, description=(
            "the LLM's front door forced greedy decoding and a fixed seed on every sandbox's chat "
            "requests (a speed comparison: trials repeat the same conversation); False: the "
            "agent's own sampling settings passed as sent"))
    baseline: Path | None = Field(
        default=None, description="compare against this scorecard at the end of the run"
    )
    save_baseline: Path | None = Field(
        default=None, description="copy the finished scorecard (+ meta.json) here"
    )

    @property
    def run_dir(self) -> Path:
        return self.results_root / self.run_id

    def save(self, run_dir: Path) -> None:
        atomic_write(run_dir / "run.json", self.model_dump_json(indent=2))

    @classmethod
    def load(cls, run_dir: Path) -> RunSettings:
        """run.json read as any file from elsewhere (runner/system/json_input: bounded, finite
        numbers, its schema_version): an InputError or ValidationError (both ValueErrors),
        naming the field, when refused. A run.json may come from another machine."""
        return read_versioned_model(run_dir / "run.json", cls, SETTINGS_VERSION, SETTINGS_BYTES,
                                    "start a new run instead of resuming this one")


#: What `--resume` may change: how fast the rest runs, and what is done with the results at the
#: end. Every other setting decides what a result means, so the resumed run keeps its own.
RESUME_MAY_CHANGE = frozenset({
    "concurrency", "warm_pool", "retry_errors", "min_pass_rate", "allow_incomplete",
    "baseline", "save_baseline", "integrity", "not_measured",
})


def new_run_id(now: datetime | None = None) -> str:
    """Sortable and unique: a UTC timestamp plus four random hex digits."""
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"
