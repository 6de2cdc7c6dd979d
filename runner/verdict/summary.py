"""The run summary: GAIA's counters, rates and averages over a run's results, by category."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from pydantic import Field

from runner.records.quantities import Rate, Score
from runner.records.status import JUDGED, Status
from runner.verdict.scoring import Decider, QualityGates, _Record, capped_score

INFRA_BUCKETS: Mapping[Status, str] = MappingProxyType(
    {
        Status.TIMEOUT: "timeout",
        Status.BUDGET_EXCEEDED: "budget_exceeded",
        Status.INFRA_ERROR: "infra_error",
        Status.SETUP_ERROR: "infra_error",  # GAIA counts setup failures as infra errors
        Status.SKIPPED_NO_DOCUMENT: "skipped",
        Status.SKIPPED_NO_MODEL: "skipped",
        Status.NOT_RUN: "not_run",
        Status.NOT_JUDGED: "not_judged",
        Status.ERRORED: "errored",
    }
)
"""Which summary counter each non-judged status increments."""


class SourcedTurn(Protocol):
    """What the user-message counts need from a turn (report.TurnResult has these)."""

    @property
    def user_message_source(self) -> str | None: ...

    @property
    def simulator_model(self) -> str | None: ...


class Scored(Protocol):
    """What summarize() needs from a scenario result (report.ScenarioResult has these)."""

    @property
    def turns(self) -> Sequence[SourcedTurn]: ...

    @property
    def category(self) -> str: ...

    @property
    def status(self) -> Status: ...

    @property
    def score(self) -> float | None: ...

    @property
    def gates(self) -> QualityGates: ...

    @property
    def decided_by(self) -> Decider | None: ...

    @property
    def judge_unavailable(self) -> bool: ...


class StatusCounts(_Record):
    """GAIA's counters, plus ours (not_judged). Every scenario is in exactly one of them."""

    passed: int = Field(default=0, description="PASS")
    failed: int = Field(
        default=0, description="every FAIL, judged or decided by checks (see checks_failed)"
    )
    blocked: int = Field(default=0, description="BLOCKED_BY_ARCHITECTURE")
    timeout: int = Field(default=0, description="TIMEOUT")
    budget_exceeded: int = Field(default=0, description="BUDGET_EXCEEDED")
    infra_error: int = Field(default=0, description="INFRA_ERROR and SETUP_ERROR (as GAIA)")
    skipped: int = Field(default=0, description="SKIPPED_NO_DOCUMENT and SKIPPED_NO_MODEL")
    not_run: int = Field(default=0, description="NOT_RUN (a stopped or interrupted run)")
    errored: int = Field(default=0, description="ERRORED")
    not_judged: int = Field(
        default=0, description="every NOT_JUDGED (see checks_passed_not_judged)"
    )


class Totals(StatusCounts):
    """Counts and rates shared by the whole run and each category."""

    judged: int = Field(
        default=0, description="PASS + FAIL + BLOCKED decided by a judge: judged_pass_rate's base"
    )
    checks_failed: int = Field(
        default=0, description="FAILs decided by exact checks alone, no judge (inside `failed`)"
    )
    checks_passed_not_judged: int = Field(
        default=0,
        description="NOT_JUDGED scenarios whose exact checks (at least one) all passed "
        "(inside `not_judged`)",
    )
    checked: int = Field(
        default=0,
        description="scenarios whose conversation completed and had at least one exact check: "
        "checks_pass_rate's base (infrastructure statuses are left out)",
    )
    checks_all_passed: int = Field(
        default=0, description="of `checked`, the scenarios whose exact checks all passed"
    )
    judged_pass_rate: Rate | None = Field(
        default=None, description="passed / judged; None when nothing was judged"
    )
    checks_pass_rate: Rate | None = Field(
        default=None, description="checks_all_passed / checked; None when no check ran"
    )
    avg_score: Score | None = Field(
        default=None, description="mean score of judge-scored scenarios, FAIL capped at 5.99"
    )


class CategorySummary(Totals):
    """The counters and rates of one category."""

    total: int = Field(default=0, description="rows in this category (trials count)")


class UserMessageCounts(_Record):
    """Where the user turns of a run came from (offline runs have no hosted simulator)."""

    verbatim: int = Field(default=0, description="turns sent as the scenario's user_message")
    extracted: int = Field(
        default=0, description="turns sent as the one question quoted in the turn's objective"
    )
    simulated: int = Field(
        default=0, description="turns a simulator model wrote from the objective and persona"
    )
    not_recorded: int = Field(
        default=0,
        description="turns whose source is not recorded (a GAIA scorecard, an older scorecard)",
    )
    simulated_by: dict[str, int] = Field(
        default_factory=dict,
        description="simulated turns per simulator model ('unknown' when none was recorded)",
    )

    @property
    def total(self) -> int:
        return self.verbatim + self.extracted + self.simulated + self.not_recorded


UNKNOWN_SIMULATOR = "unknown"


def count_user_messages(results: Iterable[Scored]) -> UserMessageCounts:
    """Count every turn of every result (every trial) by where its user message came from."""
    counts = UserMessageCounts()
    by_model: dict[str, int] = {}
    for result in results:
        for turn in result.turns:
            source = turn.user_message_source
            if source == "verbatim":
                counts.verbatim += 1
            elif source == "extracted":
                counts.extracted += 1
            elif source == "simulated":
                counts.simulated += 1
                model = turn.simulator_model or UNKNOWN_SIMULATOR
                by_model[model] = by_model.get(model, 0) + 1
            else:
                counts.not_recorded += 1
    counts.simulated_by = dict(sorted(by_model.items()))
    return counts


class Summary(Totals):
    """GAIA's summary fields (scorecard.json `summary`) plus judged/checks/infrastructure totals."""

    total_scenarios: int = Field(default=0, description="rows in the scorecard (trials count)")
    infrastructure: int = Field(
        default=0, description="every status that is not PASS/FAIL/BLOCKED: never quality"
    )
    pass_rate: Rate = Field(default=0.0, description="passed / total_scenarios")
    by_category: dict[str, CategorySummary] = Field(
        default_factory=dict, description="the same counters per category"
    )
    user_messages: UserMessageCounts = Field(
        default_factory=UserMessageCounts,
        description="turns by where their user message came from: verbatim, extracted from "
        "the objective, or simulated (and by which model)",
    )
    judge_unavailable: int = Field(
        default=0,
        description="rows kept unjudged because the judge was unavailable (rescore judges them)",
    )


_JUDGED_BUCKETS = {Status.PASS: "passed", Status.FAIL: "failed"}
_JUDGED_BUCKETS[Status.BLOCKED_BY_ARCHITECTURE] = "blocked"
_CONVERSATION_COMPLETED = JUDGED | {Status.NOT_JUDGED}


def bucket_of(status: Status) -> str:
    return _JUDGED_BUCKETS.get(status) or INFRA_BUCKETS[status]


def decided_by_checks(result: Scored) -> bool:
    """A FAIL that exact checks decided without a judge."""
    return result.status is Status.FAIL and result.decided_by == "checks"


def checks_passed_not_judged(result: Scored) -> bool:
    return (
        result.status is Status.NOT_JUDGED
        and result.gates.checks_run > 0
        and result.gates.checks_ok
    )


@dataclass
class _Tally:
    counts: dict[str, int]
    scores: list[float]
    total: int = 0
    judged: int = 0
    checks_failed: int = 0
    checks_passed_not_judged: int = 0
    checked: int = 0
    checks_all_passed: int = 0

    @classmethod
    def empty(cls) -> _Tally:
        return cls(counts={name: 0 for name in StatusCounts.model_fields}, scores=[])

    def add(self, result: Scored) -> None:
        self.total += 1
        self.counts[bucket_of(result.status)] += 1
        if decided_by_checks(result):
            self.checks_failed += 1
        elif result.status in JUDGED:
            # A result from before `decided_by` existed (None) was judged: nothing else
            # could give PASS/FAIL/BLOCKED then.
            self.judged += 1
            if result.score is not None:
                self.scores.append(capped_score(result.status, result.score))
        if checks_passed_not_judged(result):
            self.checks_passed_not_judged += 1
        if result.status in _CONVERSATION_COMPLETED and result.gates.checks_run > 0:
            self.checked += 1
            self.checks_all_passed += result.gates.checks_ok

    def totals(self) -> dict[str, object]:
        return dict(
            **self.counts,
            judged=self.judged,
            checks_failed=self.checks_failed,
            checks_passed_not_judged=self.checks_passed_not_judged,
            checked=self.checked,
            checks_all_passed=self.checks_all_passed,
            judged_pass_rate=self.counts["passed"] / self.judged if self.judged else None,
            checks_pass_rate=self.checks_all_passed / self.checked if self.checked else None,
            avg_score=round(sum(self.scores) / len(self.scores), 2) if self.scores else None,
        )


def summarize(results: Iterable[Scored]) -> Summary:
    """GAIA's summary over a run: counts per status bucket, rates, averages, by category."""
    results = list(results)  # read twice: the tallies and the user-message counts
    overall = _Tally.empty()
    categories: dict[str, _Tally] = {}
    for result in results:
        overall.add(result)
        categories.setdefault(result.category, _Tally.empty()).add(result)
    by_category = {
        name: CategorySummary.model_validate({**tally.totals(), "total": tally.total})
        for name, tally in sorted(categories.items())
    }
    quality = overall.counts["passed"] + overall.counts["failed"] + overall.counts["blocked"]
    return Summary.model_validate(
        {
            **overall.totals(),
            "total_scenarios": overall.total,
            "infrastructure": overall.total - quality,
            "pass_rate": overall.counts["passed"] / overall.total if overall.total else 0.0,
            "by_category": by_category,
            "user_messages": count_user_messages(results),
            "judge_unavailable": sum(result.judge_unavailable for result in results),
        }
    )
