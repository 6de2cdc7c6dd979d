"""The verdict rules: a scenario's status, score and gates from its checks and judgments.

GAIA's scoring rules plus Goa-AI's gates, as pure functions (no I/O, no clock). Why pure: the
judge's arithmetic is never trusted (DESIGN 1.5), so every number in a scorecard must be
reproducible from the dimension scores, check results and claim labels alone. The engine feeds
judgments in; the report writes what comes out.

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
  turn; GAIA's rule: a setup document indexed into 0 chunks), see runner/verdict/classify.py.

The run summary is runner/verdict/summary.py, the quality gate runner/verdict/gate.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Literal

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
from runner.verdict.check_context import is_undecided

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
    """No check failed: an undecided check is no failure — it leaves the turn to the judge
    (and without a judge the scenario stays NOT_JUDGED)."""
    return all(check.passed or is_undecided(check) for check in checks)


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
    outcome = "left to the judge" if is_undecided(check) else "failed"
    return f"check {label} {outcome}: {check.diagnostic}".rstrip(": ")


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
        failed = sum(1 for c in checks if not c.passed and not is_undecided(c))
        head = f"{CHECKS_FAILED} ({failed} of {len(checks)} exact checks failed; no judge ran)"
        return ScenarioOutcome(
            status=Status.FAIL, gates=gates, notes=[head, *check_notes], decided_by="checks"
        )
    undecided = sum(1 for c in checks if is_undecided(c))
    if undecided:
        note = (f"{CHECKS_PASSED_NOT_JUDGED}: {len(checks) - undecided} of {len(checks)} exact "
                f"checks passed, {undecided} undecided (the judge's to decide); no judge ran")
    elif checks:
        note = f"{CHECKS_PASSED_NOT_JUDGED}: all {len(checks)} exact checks passed; no judge ran"
    else:
        note = "no judge configured and no exact check: verdicts are NOT_JUDGED"
    return ScenarioOutcome(status=Status.NOT_JUDGED, gates=gates, notes=[note])


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
