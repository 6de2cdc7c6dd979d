"""The settings of one run, saved as ``run.json`` so ``--resume`` repeats them exactly."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, Field


class Backend(str, Enum):
    DOCKER = "docker"  # one container pair per scenario (the default)
    LOCAL = "local"  # host processes, for development and fast tests


class Selection(BaseModel):
    """Which scenarios to run; empty lists mean 'no filter'."""

    ids: list[str] = Field(default_factory=list)
    categories: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    exclude_tags: list[str] = Field(default_factory=list)


class RunSettings(BaseModel):
    """Everything that decides what a run does. API keys are never part of it."""

    run_id: str
    suite_paths: list[Path]
    corpus_root: Path
    results_root: Path = Path("results")
    selection: Selection = Field(default_factory=Selection)
    backend: Backend = Backend.DOCKER
    device: str = "cpu"  # the device GAIA sessions are switched to (what is really present)
    device_reason: str = ""
    llm_url: str = "http://127.0.0.1:13305"
    llm_container: str | None = None  # docker backend: the running LLM server's container
    concurrency: int = Field(default=1, ge=1, le=16)
    trials: int = Field(default=1, ge=1, le=50)
    rejudge: int = Field(default=1, ge=1, le=20)
    timeout_s: float | None = None  # overrides GAIA's per-scenario formula when set
    budget_usd: float | None = None  # judge spend allowed per scenario
    min_pass_rate: float | None = None
    judge_provider: str = "none"
    judge_model: str | None = None
    judge_url: str | None = None
    simulator_mode: str = "scripted"
    simulator_model: str | None = None
    simulator_url: str | None = None
    max_identical_infra_errors: int = 3
    # The agent under test (a GAIA user's own agents and Agent UI).
    agent_dirs: list[Path] = Field(default_factory=list)  # folders of <id>/agent.py, mounted read-only
    agent: str | None = None  # agent id for scenarios without agent_type
    agent_map: dict[str, str] = Field(default_factory=dict)  # GAIA agent_type -> agent id
    agent_model: str | None = None  # the chat model the Agent UI asks the LLM server for
    gaia_spec: str | None = None  # amd-gaia version, wheel or source dir for the Agent UI image
    target_url: str | None = None  # attach to a running Agent UI (its MCP bridge URL): no sandbox
    strict: bool = False  # any rejected scenario file stops the run before it starts
    derived_checks: bool = True  # exact checks derived from numeric/short expected answers
    retry_errors: bool = False  # --resume also re-runs infrastructure statuses
    baseline: Path | None = None  # compare against this scorecard at the end of the run
    save_baseline: Path | None = None  # copy the finished scorecard (+ meta.json) here

    @property
    def run_dir(self) -> Path:
        return self.results_root / self.run_id

    def save(self, run_dir: Path) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        tmp = run_dir / "run.json.tmp"
        tmp.write_text(self.model_dump_json(indent=2))
        tmp.replace(run_dir / "run.json")

    @classmethod
    def load(cls, run_dir: Path) -> RunSettings:
        return cls.model_validate_json((run_dir / "run.json").read_text())


def new_run_id(now: datetime | None = None) -> str:
    """Sortable and unique: a UTC timestamp plus four random hex digits."""
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"
