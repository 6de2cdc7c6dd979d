"""The files fix mode writes: ``fix_log.json`` (GAIA's shape), ``fixer.json`` per iteration and
``fix/fix.json`` for the whole loop. Pydantic owns each of them."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

FixerKind = Literal["command", "claude-code", "openai"]
Scope = Literal["agent", "gaia"]


class FixNote(BaseModel):
    """What a fixer says about one change (``$TRIALBOX_FIX_NOTES``, a JSON list of these)."""

    model_config = ConfigDict(extra="ignore")

    file: str = Field(description="the changed file, relative to /workspace")
    change_summary: str = Field(default="", description="what was changed, in one sentence")
    rationale: str = Field(default="", description="why the change should make the scenarios pass")
    targets_scenario: list[str] = Field(default_factory=list, description="scenario ids the change is for")


class FixLogEntry(BaseModel):
    """One entry of GAIA's ``fix_log.json`` (a list of these), one per changed file."""

    fix_id: int = Field(description="1-based number of the change within the iteration")
    file: str = Field(description="the changed file, relative to the agent directory")
    change_summary: str = Field(description="what changed: the fixer's words, else the diff's counts")
    targets_scenario: list[str] = Field(description="the failing scenario ids the change targets")
    rationale: str = Field(description="why: the fixer's words, or that it gave none")
    lines_changed: int = Field(description="lines added plus lines removed in this file")


class Problem(str, Enum):
    """Why an iteration's patch was not re-run (or was, with a warning)."""

    NO_CHANGE = "no_change"  # the fixer changed nothing in /workspace
    WROTE_OUTSIDE = "wrote_outside_workspace"  # the container's filesystem changed elsewhere
    IMPORT_BROKEN = "import_broken"  # a changed agent.py no longer imports under GAIA
    FIXER_FAILED = "fixer_failed"  # non-zero exit or timeout
    UNSAFE_ENTRY = "unsafe_entry"  # a symlink/device/absolute path in /workspace, not taken


class FixerRun(BaseModel):
    """What one fixer run in the fix sandbox did (``fix/iter-N/fixer.json``)."""

    fixer: FixerKind = Field(description="which fixer ran")
    command: list[str] = Field(description="the exact argv run inside the sandbox")
    exit_code: int | None = Field(description="the fixer's exit code; None when it was killed")
    timed_out: bool = Field(default=False, description="killed at the iteration's time budget")
    wall_s: float = Field(description="seconds from start to exit")
    changed_files: list[str] = Field(default_factory=list, description="files the iteration changed")
    gaia_changed_files: list[str] = Field(
        default_factory=list, description="--scope gaia: GAIA source files the iteration changed")
    outside_writes: list[str] = Field(
        default_factory=list, description="paths changed outside /workspace (and the fixer's scratch)")
    skipped_entries: list[str] = Field(
        default_factory=list, description="workspace entries not taken back (symlinks, devices)")
    import_errors: dict[str, str] = Field(
        default_factory=dict, description="agent file → why it no longer imports")
    problems: list[Problem] = Field(default_factory=list, description="what went wrong, if anything")
    proxy_refusals: int = Field(default=0, description="requests the egress proxy refused")


class IterationRecord(BaseModel):
    """One pass of B fix → C re-run → D compare."""

    iteration: int = Field(description="1-based; iteration 0 is phase A (or --from)")
    run_dir: str | None = Field(default=None, description="the re-run's results folder (None: not re-run)")
    rerun_ids: list[str] = Field(default_factory=list, description="the scenarios re-run")
    pass_rate: float | None = Field(
        default=None, description="passing / decided over every scenario, each with its latest outcome")
    improved: list[str] = Field(default_factory=list, description="not passing before, passing now")
    regressed: list[str] = Field(default_factory=list, description="passing before, not now")
    still_failing: list[str] = Field(default_factory=list, description="failing before and now")
    fixer: FixerRun | None = Field(default=None, description="what the fixer did")
    patch_lines: int = Field(default=0, description="lines in patch.diff (cumulative vs the agent dir)")
    phase_s: dict[str, float] = Field(default_factory=dict, description="wall seconds per phase (fix, rerun)")


class FixReport(BaseModel):
    """The whole loop (``fix/fix.json``)."""

    run_dir: str = Field(description="the phase-A run (or --from) this loop started from")
    agent_dir: str = Field(description="the user's agent directory (never written)")
    scope: Scope = Field(description="agent: the agent directory; gaia: also GAIA's package source")
    fixer: FixerKind = Field(description="which fixer")
    fixer_target: str | None = Field(default=None, description="the one host:port the fixer may reach")
    max_iterations: int = Field(description="--max-iterations")
    target_pass_rate: float = Field(description="--target-pass-rate")
    baseline_pass_rate: float | None = Field(description="iteration 0's decided pass rate")
    baseline_failing: list[str] = Field(description="iteration 0's failing scenario ids")
    iterations: list[IterationRecord] = Field(default_factory=list, description="every iteration")
    stop_reason: str = Field(default="", description="target reached, nothing fails, or N iterations")
    best_iteration: int | None = Field(default=None, description="the iteration whose patch is final")
    host_tree_sha256_before: str = Field(description="hash of the agent directory before the loop")
    host_tree_sha256_after: str = Field(description="hash of the agent directory after the loop")
    phase_s: dict[str, float] = Field(default_factory=dict, description="total wall seconds per phase A-D")
