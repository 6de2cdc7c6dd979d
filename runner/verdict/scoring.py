"""GAIA's scoring rules plus Goa-AI's gates, as pure functions (no I/O, no clock).

Why pure: the judge's arithmetic is never trusted (DESIGN 1.5), so every number in a scorecard
must be reproducible from the dimension scores, check results and claim labels alone. The
engine feeds judgments in; the report writes what comes out.

Rules (DESIGN 2.1):
- turn score = Σ clamp(dimension, 0, 10) · weight; a turn passes when correctness ≥ 4 and its
  score ≥ 6.0;
- scenario score = mean of turn scores; the rubric passes when that mean is ≥ 6.0, every turn
  has correctness ≥ 4 and every turn of the conversation was judged;
- PASS needs the rubric AND every exact check AND every claim `entailed`; otherwise FAIL;
- a judge verdict of BLOCKED_BY_ARCHITECTURE stands (never upgraded to PASS);
- no judge: a failed exact check still FAILs the scenario (a check is evidence, not opinion;
  no score is given); every check passed → NOT_JUDGED, counted as "checks passed, not judged";
  no check at all → plain NOT_JUDGED (no score is invented);
- infrastructure statuses pass through; a finished transcript can itself show one (a failed
  turn; GAIA's rule: a setup document indexed into 0 chunks), see `transcript_problem`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from runner.records.judgments import (
    DIMENSIONS,
    ClaimJudgment,
    ClaimLabel,
    DimensionScores,
    Judgments,
    TurnJudgment,
)
from runner.records.outcomes import CheckResult
from runner.records.status import JUDGED, Status
from runner.records.transcript import Transcript
from runner.scenarios import Manifest, Scenario

# Judge cost: the one price table (exact model ids) is runner/verdict/prices.py; re-exported because the
# engine's budget check and the report ask scoring for a scenario's cost.
from runner.verdict.prices import judge_cost_usd as judge_cost_usd
from runner.verdict.prices import judgings_cost_usd as judgings_cost_usd

WEIGHTS: Mapping[str, float] = MappingProxyType(
    {
        "correctness": 0.25,
        "tool_selection": 0.20,
        "context_retention": 0.20,
        "completeness": 0.15,
        "efficiency": 0.10,
        "personality": 0.05,
        "error_recovery": 0.05,
    }
)
assert tuple(WEIGHTS) == DIMENSIONS, "WEIGHTS must name exactly the rubric's dimensions"

PASS_SCORE = 6.0
MIN_CORRECTNESS = 4.0
FAIL_SCORE_CAP = 5.99  # a FAIL never lifts an average above the pass line (GAIA)
RECOMPUTE_TOLERANCE = 0.25  # a judge total further off than this is reported
SCORE_DECIMALS = 4  # float noise must not decide the 6.0 boundary (6 · Σw = 6.000000000000001)

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


def clamp(value: float, low: float = 0.0, high: float = 10.0) -> float:
    return max(low, min(high, value))


def turn_score(scores: DimensionScores) -> float:
    """The weighted sum of the seven dimensions, each clamped to 0–10."""
    total = sum(clamp(getattr(scores, name)) * weight for name, weight in WEIGHTS.items())
    return round(total, SCORE_DECIMALS)


def turn_passes(scores: DimensionScores) -> bool:
    return clamp(scores.correctness) >= MIN_CORRECTNESS and turn_score(scores) >= PASS_SCORE


def recompute(judgment: TurnJudgment) -> tuple[float, str | None]:
    """Our score for a judged turn, and a note when the judge's own total disagrees.

    Our value always wins; the note exists so a reader can see the judge miscounted.
    """
    ours = turn_score(judgment.scores)
    reported = judgment.reported_score
    if reported is None or abs(reported - ours) <= RECOMPUTE_TOLERANCE:
        return ours, None
    note = (
        f"turn {judgment.turn}: judge reported {reported:.2f}, recomputed {ours:.2f} "
        f"from the dimension scores; the recomputed value is used"
    )
    return ours, note


def mean_score(scores: Sequence[float]) -> float | None:
    """Scenario score = mean of its turn scores; None when no turn was scored."""
    if not scores:
        return None
    return round(sum(scores) / len(scores), SCORE_DECIMALS)


def capped_score(status: Status, score: float) -> float:
    """The score as it enters an average: a FAIL counts at most 5.99."""
    return min(score, FAIL_SCORE_CAP) if status is Status.FAIL else score


class _Record(BaseModel):
    # These records are written into scorecard.json: a misspelt field must be an error.
    model_config = ConfigDict(extra="forbid")


class QualityGates(_Record):
    """The three things a PASS needs. None = that gate could not be evaluated (no judge)."""

    rubric_ok: bool | None = Field(
        default=None,
        description="GAIA's rubric: mean ≥ 6.0 and every turn correctness ≥ 4; None unjudged",
    )
    checks_ok: bool = Field(
        default=True, description="every exact check passed (vacuously true with no checks)"
    )
    claims_ok: bool | None = Field(
        default=None, description="every claim judged `entailed`; None when not judged"
    )
    checks_run: int = Field(
        default=0,
        description="how many exact checks were decided (declared, expected_tools and derived); "
        "0 means checks_ok is vacuous",
    )

    def failed(self) -> list[str]:
        """Names of the gates that failed, in a fixed order (for messages and reports)."""
        gates = {"rubric": self.rubric_ok, "checks": self.checks_ok, "claims": self.claims_ok}
        return [name for name, ok in gates.items() if ok is False]

    @property
    def all_passed(self) -> bool:
        return self.rubric_ok is True and self.checks_ok and self.claims_ok is True


Decider = Literal["judge", "checks"]
"""What decided a PASS/FAIL/BLOCKED: the judge (with the checks as one gate), or the exact
checks alone when no judge ran (they can only FAIL a scenario, never PASS it)."""


class ScoredTurn(_Record):
    """One judged turn as scoring recomputed it."""

    turn: int = Field(description="1-based turn number")
    score: float = Field(description="weighted sum of the clamped dimensions, 0-10")
    passed: bool = Field(description="correctness ≥ 4 and score ≥ 6.0")
    mismatch_note: str | None = Field(
        default=None, description="set when the judge's own total was off by more than 0.25"
    )


class ScenarioOutcome(_Record):
    """What scoring decided about one scenario run, and why."""

    status: Status = Field(description="the scenario's status")
    score: float | None = Field(
        default=None, description="mean of the turn scores; None when nothing was judged"
    )
    gates: QualityGates = Field(description="the three things a PASS needs")
    turns: list[ScoredTurn] = Field(default_factory=list, description="judged turns, in order")
    notes: list[str] = Field(
        default_factory=list, description="why the status is what it is, one line each"
    )
    decided_by: Decider | None = Field(
        default=None, description="judge | checks for PASS/FAIL/BLOCKED; None for other statuses"
    )


def claims_entailed(claims: Iterable[ClaimJudgment]) -> bool:
    return all(claim.label is ClaimLabel.ENTAILED for claim in claims)


def checks_passed(checks: Iterable[CheckResult]) -> bool:
    return all(check.passed for check in checks)


def score_turns(judgments: Judgments) -> list[ScoredTurn]:
    scored = []
    for judgment in sorted(judgments.turns, key=lambda j: j.turn):
        score, note = recompute(judgment)
        scored.append(
            ScoredTurn(
                turn=judgment.turn,
                score=score,
                passed=turn_passes(judgment.scores),
                mismatch_note=note,
            )
        )
    return scored


def rubric_failures(
    judgments: Judgments, score: float | None, conversation_turns: Sequence[int] | None
) -> list[str]:
    """Why GAIA's rubric fails (empty when it passes)."""
    reasons = []
    judged = {j.turn for j in judgments.turns}
    expected = set(conversation_turns) if conversation_turns is not None else judged
    if not judged:
        reasons.append("the judge scored no turn")
    missing = sorted(expected - judged)
    if missing:
        reasons.append(f"turns {missing} were not judged")
    for judgment in sorted(judgments.turns, key=lambda j: j.turn):
        if clamp(judgment.scores.correctness) < MIN_CORRECTNESS:
            reasons.append(
                f"turn {judgment.turn} correctness {judgment.scores.correctness:g} < "
                f"{MIN_CORRECTNESS:g}"
            )
    if score is not None and score < PASS_SCORE:
        reasons.append(f"score {score:.2f} < {PASS_SCORE:.1f}")
    return reasons


def _judge_says_blocked(judgments: Judgments) -> bool:
    verdict = judgments.verdict.verdict if judgments.verdict else ""
    return verdict.strip().upper() == Status.BLOCKED_BY_ARCHITECTURE.value


def check_note(check: CheckResult) -> str:
    """`check answer_number (derived, turn 2) failed: expected …` — which check, and why."""
    where = ", ".join(
        part
        for part in (
            "derived" if check.derived else "",
            f"turn {check.turn}" if check.turn is not None else "",
        )
        if part
    )
    label = f"{check.type} ({where})" if where else check.type
    return f"check {label} failed: {check.diagnostic}".rstrip(": ")


CHECKS_FAILED = "failed: checks"
CHECKS_PASSED_NOT_JUDGED = "checks passed, not judged"


def _unjudged(
    checks: Sequence[CheckResult], infra: Status | None, check_notes: list[str]
) -> ScenarioOutcome:
    """No judgments: an infrastructure status passes through; otherwise the checks decide
    what they can. A failed check is evidence the answer or trajectory was wrong, so the
    scenario FAILs (no score: nothing was scored); all checks passing proves only what the
    checks test, so the scenario stays NOT_JUDGED and is counted apart."""
    gates = QualityGates(checks_ok=checks_passed(checks), checks_run=len(checks))
    if infra is not None:
        return ScenarioOutcome(status=infra, gates=gates, notes=check_notes)
    if not gates.checks_ok:
        failed = sum(1 for c in checks if not c.passed)
        head = f"{CHECKS_FAILED} ({failed} of {len(checks)} exact checks failed; no judge ran)"
        return ScenarioOutcome(
            status=Status.FAIL, gates=gates, notes=[head, *check_notes], decided_by="checks"
        )
    if checks:
        note = f"{CHECKS_PASSED_NOT_JUDGED}: all {len(checks)} exact checks passed; no judge ran"
    else:
        note = "no judge configured and no exact check: verdicts are NOT_JUDGED"
    return ScenarioOutcome(status=Status.NOT_JUDGED, gates=gates, notes=[note])


def transcript_problem(
    scenario: Scenario, transcript: Transcript, manifest: Manifest | None
) -> tuple[Status, str] | None:
    """The infrastructure status a finished transcript shows, with why; None when it shows none.

    A failed turn is INFRA_ERROR. GAIA's rule: a setup document indexed into 0 chunks is a
    SETUP_ERROR — unless the scenario is adversarial or the document is one of the manifest's
    adversarial documents (empty, corrupt: 0 chunks is what they are for)."""
    failed_turns = [t for t in transcript.turns if t.error]
    if failed_turns:
        first = failed_turns[0]
        return Status.INFRA_ERROR, f"turn {first.turn}: {first.error}"
    empty = [d for d in transcript.indexed if d.chunks == 0
             and not (manifest and d.corpus_doc and manifest.is_adversarial(d.corpus_doc))]
    if empty and scenario.category != "adversarial":
        doc = empty[0]
        why = f": {doc.error}" if doc.error else ""
        return Status.SETUP_ERROR, f"setup document {doc.path} indexed 0 chunks{why}"
    return None


def scenario_status(
    judgments: Judgments | None,
    checks: Sequence[CheckResult],
    *,
    infra: Status | None = None,
    conversation_turns: Sequence[int] | None = None,
) -> ScenarioOutcome:
    """Derive a scenario's status, score and quality gates.

    `infra` is the harness's own status when it could not complete the run (TIMEOUT, ...);
    it passes through unchanged. `conversation_turns` are the turn numbers that actually ran:
    a turn the judge skipped fails the rubric rather than silently raising the mean.
    """
    if infra is not None and infra in JUDGED:
        raise ValueError(
            f"infra={infra.value} is a quality verdict; only scoring derives PASS/FAIL/BLOCKED"
        )
    checks_ok = checks_passed(checks)
    check_notes = [check_note(c) for c in checks if not c.passed]

    if judgments is None:
        return _unjudged(checks, infra, check_notes)

    turns = score_turns(judgments)
    score = mean_score([t.score for t in turns])
    rubric_notes = rubric_failures(judgments, score, conversation_turns)
    claims_ok = claims_entailed(judgments.claims)
    gates = QualityGates(
        rubric_ok=not rubric_notes,
        checks_ok=checks_ok,
        claims_ok=claims_ok,
        checks_run=len(checks),
    )
    notes = [t.mismatch_note for t in turns if t.mismatch_note]
    notes += [f"rubric: {reason}" for reason in rubric_notes] + check_notes
    notes += [
        f"claim {c.name!r} is {c.label.value}: {c.rationale}".rstrip(": ")
        for c in judgments.claims
        if c.label is not ClaimLabel.ENTAILED
    ]

    if infra is not None:
        status = infra
    elif _judge_says_blocked(judgments):
        status = Status.BLOCKED_BY_ARCHITECTURE
        if gates.all_passed:
            notes.append(
                "judge reported BLOCKED_BY_ARCHITECTURE although every gate passed; "
                "kept as BLOCKED (never upgraded to PASS), review the verdict"
            )
    elif gates.all_passed:
        status = Status.PASS
    else:
        status = Status.FAIL
    return ScenarioOutcome(
        status=status,
        score=score,
        gates=gates,
        turns=turns,
        notes=notes,
        decided_by="judge" if status in JUDGED else None,
    )


# --- run summary -------------------------------------------------------------------------


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
    judged_pass_rate: float | None = Field(
        default=None, description="passed / judged; None when nothing was judged"
    )
    checks_pass_rate: float | None = Field(
        default=None, description="checks_all_passed / checked; None when no check ran"
    )
    avg_score: float | None = Field(
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
    pass_rate: float = Field(default=0.0, description="passed / total_scenarios")
    by_category: dict[str, CategorySummary] = Field(
        default_factory=dict, description="the same counters per category"
    )
    user_messages: UserMessageCounts = Field(
        default_factory=UserMessageCounts,
        description="turns by where their user message came from: verbatim, extracted from "
        "the objective, or simulated (and by which model)",
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
        }
    )


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


def unmeasured_count(summary: Summary) -> int:
    """Rows that produced no verdict (UNMEASURED), from the summary's counters."""
    return (summary.timeout + summary.infra_error + summary.errored + summary.budget_exceeded
            + summary.skipped + summary.not_run)


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
