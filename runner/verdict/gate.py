"""The quality gate: the pass rate `--min-pass-rate` is held to, unmeasured rows counted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from pydantic import Field

from runner.records.status import Status
from runner.verdict.scoring import _Record
from runner.verdict.summary import StatusCounts, Summary


def decided_pass_rate(summary: Summary) -> tuple[float | None, str]:
    """The pass rate a quality gate (`--min-pass-rate`) applies to, and its name.

    The judged pass rate when a judge decided any scenario; else the checks pass rate (a run
    without a judge is still gated on what code verified); None when nothing was decided
    (no judge and no check ran) — the caller must not read that as 0% or 100%.
    """
    if summary.judged and summary.judged_pass_rate is not None:
        return summary.judged_pass_rate, "judged pass rate"
    if summary.checked and summary.checks_pass_rate is not None:
        return summary.checks_pass_rate, "checks pass rate"
    return None, "no pass rate (no judge decided a scenario and no exact check ran)"


# Statuses with no verdict because the run did not measure the scenario (the harness, the clock,
# the budget or a stop got in the way). NOT_JUDGED is not one: its conversation completed, and
# without a judge its exact checks are what decides (see gate_pass_rate).
UNMEASURED = frozenset({
    Status.TIMEOUT, Status.INFRA_ERROR, Status.SETUP_ERROR, Status.ERRORED,
    Status.BUDGET_EXCEEDED, Status.SKIPPED_NO_DOCUMENT, Status.SKIPPED_NO_MODEL, Status.NOT_RUN,
})


def unmeasured_count(counts: StatusCounts) -> int:
    """Rows that produced no verdict (UNMEASURED), from a run's or a category's counters."""
    return (counts.timeout + counts.infra_error + counts.errored + counts.budget_exceeded
            + counts.skipped + counts.not_run)


class GateRate(_Record):
    """The rate `--min-pass-rate` is held against, and what it was made of."""

    rate: float | None = Field(
        description="passed / (decided + unmeasured), or passed / decided with "
        "--allow-incomplete; None when there is nothing to divide by")
    name: str = Field(description="which rate: judged pass rate or checks pass rate")
    passed: int = Field(description="the numerator: PASSes (judge) or all-checks-passed (no judge)")
    decided: int = Field(description="scenarios the rate's own base holds (judged, or checked)")
    unmeasured: int = Field(
        description="scenarios with no verdict (TIMEOUT, INFRA_ERROR, SETUP_ERROR, ERRORED, "
        "BUDGET_EXCEEDED, SKIPPED_*, NOT_RUN)")
    counted_unmeasured: bool = Field(
        description="whether the unmeasured scenarios count against the rate (the default; "
        "--allow-incomplete leaves them out)")


def gate_pass_rate(summary: Summary, *, allow_incomplete: bool = False) -> GateRate:
    """The rate a quality gate applies: `decided_pass_rate`'s, with every unmeasured scenario
    counted as not passed unless `allow_incomplete`.

    Why: a gate that divides by verdicts alone passes a run of one PASS and nine TIMEOUTs at
    100%; a scenario the run did not measure is not evidence that the agent works. A NOT_JUDGED
    scenario without any exact check (no judge, nothing to verify) is in neither base: its
    conversation completed, and judging it was switched off on purpose.
    """
    _, name = decided_pass_rate(summary)
    if summary.judged:
        passed, decided = summary.passed, summary.judged
    elif summary.checked:
        passed, decided = summary.checks_all_passed, summary.checked
    else:
        passed, decided = 0, 0
    unmeasured = unmeasured_count(summary)
    base = decided if allow_incomplete else decided + unmeasured
    if not decided and base:
        name = "pass rate (nothing was decided; every scenario unmeasured)"
    return GateRate(rate=passed / base if base else None, name=name, passed=passed, decided=decided,
                    unmeasured=unmeasured, counted_unmeasured=not allow_incomplete)


# --- the integrity gate (--integrity): was everything measured? ------------------------------

# What GAIA main's integrity gate counts as "no measurement" (gaia.eval.integrity_gate: the
# infra_error, errored, timeout, blocked, budget_exceeded and skipped counters): the rows
# without a verdict, and BLOCKED_BY_ARCHITECTURE — a verdict, but no measure of the task.
NO_MEASUREMENT = UNMEASURED | {Status.BLOCKED_BY_ARCHITECTURE}


class Row(Protocol):
    """What the integrity gate reads of a scorecard row (report.ScenarioResult has these)."""

    @property
    def id(self) -> str: ...

    @property
    def category(self) -> str: ...

    @property
    def status(self) -> Status: ...


class Integrity(_Record):
    """Whether a run measured what it claims to: GAIA main's integrity gate, on our rows."""

    rows: int = Field(description="rows of the run (trials count)")
    baseline_scenarios: int | None = Field(
        description="scenarios of the baseline the run is held to; None: no baseline, so "
        "coverage was not checked")
    missing: list[str] = Field(
        default_factory=list, description="baseline scenarios with no row in the run")
    unmeasured: list[str] = Field(
        default_factory=list, description="rows without a measurement, as 'id (STATUS)'")
    excused: list[str] = Field(
        default_factory=list,
        description="missing or unmeasured rows a --not-measured ID=REASON names, with why: "
        "reported, not counted against the gate")
    unused: list[str] = Field(
        default_factory=list,
        description="--not-measured names whose every row was measured after all")

    @property
    def complete(self) -> bool:
        return not self.missing and not self.unmeasured


def integrity(rows: Sequence[Row], *, baseline: Sequence[Row] | None,
              not_measured: Mapping[str, str]) -> Integrity:
    """Missing baseline scenarios and unmeasured rows; a `not_measured` name (a scenario id or
    a category) excuses its rows with the reason given, which the report shows."""
    def excuse(row: Row) -> str | None:
        return not_measured.get(row.id) or not_measured.get(row.category)

    used: set[str] = set()
    missing, unmeasured, excused = [], [], []
    ran = {row.id for row in rows}
    findings = [(row, "missing") for row in baseline or [] if row.id not in ran]
    findings += [(row, row.status.value) for row in rows if row.status in NO_MEASUREMENT]
    for row, what in findings:
        reason = excuse(row)
        if reason is not None:
            used |= {row.id, row.category} & set(not_measured)
            excused.append(f"{row.id} ({what}): {reason}")
        elif what == "missing":
            missing.append(row.id)
        else:
            unmeasured.append(f"{row.id} ({what})")
    return Integrity(
        rows=len(rows), baseline_scenarios=len({row.id for row in baseline}) if baseline else None,
        missing=sorted(set(missing)), unmeasured=unmeasured, excused=excused,
        unused=sorted(set(not_measured) - used))
