"""GAIA's scoring rules and Goa-AI's gates, pinned to worked examples."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from runner.records.judgments import (
    ClaimJudgment,
    ClaimLabel,
    DimensionScores,
    JudgeUsage,
    Judgments,
    ScenarioVerdict,
    TurnJudgment,
)
from runner.records.outcomes import CheckResult
from runner.records.status import Status
from runner.verdict.gate import decided_pass_rate
from runner.verdict.prices import judge_cost_usd
from runner.verdict.scoring import (
    WEIGHTS,
    QualityGates,
    recompute,
    scenario_status,
    turn_passes,
    turn_score,
)
from runner.verdict.summary import summarize


def dims(**overrides: float) -> DimensionScores:
    values = dict.fromkeys(WEIGHTS, 8.0)
    values.update(overrides)
    return DimensionScores(**values)


def judged(*turns: DimensionScores, verdict: str = "PASS", claims=(), reported=None) -> Judgments:
    return Judgments(
        judge_model="claude-sonnet-4-6",
        turns=[
            TurnJudgment(turn=i, scores=s, reasoning="r", reported_score=reported)
            for i, s in enumerate(turns, 1)
        ],
        claims=list(claims),
        verdict=ScenarioVerdict(verdict=verdict),
    )


def claim(label: ClaimLabel, turn: int | None = 1) -> ClaimJudgment:
    return ClaimJudgment(turn=turn, name="total", claim="x", label=label, rationale="because")


PASSING_CHECK = CheckResult(type="tool_called", turn=1, passed=True)
FAILING_CHECK = CheckResult(type="answer_contains", turn=1, passed=False, diagnostic="no 412,000")


# --- turn rules ---------------------------------------------------------------------------


def test_weights_are_gaias_and_sum_to_one():
    assert dict(WEIGHTS) == {
        "correctness": 0.25,
        "tool_selection": 0.20,
        "context_retention": 0.20,
        "completeness": 0.15,
        "efficiency": 0.10,
        "personality": 0.05,
        "error_recovery": 0.05,
    }
    assert sum(WEIGHTS.values()) == pytest.approx(1.0)


def test_turn_score_worked_example():
    scores = DimensionScores(
        correctness=8,
        tool_selection=7,
        context_retention=9,
        completeness=6,
        efficiency=5,
        personality=10,
        error_recovery=0,
    )
    # 2.0 + 1.4 + 1.8 + 0.9 + 0.5 + 0.5 + 0.0
    assert turn_score(scores) == 7.1


def test_turn_score_clamps_each_dimension_to_0_10():
    assert turn_score(dims(correctness=14)) == turn_score(dims(correctness=10))
    assert turn_score(dims(efficiency=-3)) == turn_score(dims(efficiency=0))
    assert turn_score(DimensionScores(**dict.fromkeys(WEIGHTS, 99))) == 10.0


def test_all_sixes_is_exactly_the_pass_line_despite_float_noise():
    sixes = DimensionScores(**dict.fromkeys(WEIGHTS, 6))
    assert turn_score(sixes) == 6.0
    assert turn_passes(sixes)


def test_correctness_3_with_score_8_fails_the_turn():
    scores = dims(
        correctness=3,
        tool_selection=10,
        context_retention=10,
        completeness=10,
        efficiency=10,
        personality=10,
        error_recovery=5,
    )
    assert turn_score(scores) == 8.0
    assert not turn_passes(scores)


def test_score_below_6_fails_the_turn_even_with_good_correctness():
    scores = DimensionScores(**dict.fromkeys(WEIGHTS, 5.9))
    assert not turn_passes(scores)


# --- recompute ----------------------------------------------------------------------------


def _judgment(reported: float | None) -> TurnJudgment:
    scores = DimensionScores(
        correctness=8,
        tool_selection=7,
        context_retention=9,
        completeness=6,
        efficiency=5,
        personality=10,
        error_recovery=0,
    )
    return TurnJudgment(turn=2, scores=scores, reasoning="", reported_score=reported)


@pytest.mark.parametrize("reported", [None, 7.1, 7.3, 6.85])
def test_recompute_within_tolerance_has_no_note(reported):
    assert recompute(_judgment(reported)) == (7.1, None)


def test_recompute_judge_total_that_disagrees_is_overwritten_with_a_note():
    score, note = recompute(_judgment(9.0))
    assert score == 7.1
    assert note is not None and "turn 2" in note and "9.00" in note and "7.10" in note


def test_a_disagreeing_judge_total_cannot_change_the_status():
    # The judge claims 9.5 but its own dimensions only add up to 5.0: FAIL.
    low = DimensionScores(**dict.fromkeys(WEIGHTS, 5))
    outcome = scenario_status(judged(low, reported=9.5), [PASSING_CHECK])
    assert outcome.status is Status.FAIL
    assert outcome.score == 5.0
    assert any("judge reported 9.50" in n for n in outcome.notes)


# --- scenario status ----------------------------------------------------------------------


def test_scenario_passes_when_rubric_checks_and_claims_pass():
    outcome = scenario_status(
        judged(dims(), dims(correctness=9), claims=[claim(ClaimLabel.ENTAILED)]),
        [PASSING_CHECK],
        conversation_turns=[1, 2],
    )
    assert outcome.status is Status.PASS
    assert outcome.gates == QualityGates(
        rubric_ok=True, checks_ok=True, claims_ok=True, checks_run=1
    )
    assert outcome.decided_by == "judge"
    assert outcome.score == pytest.approx((8.0 + 8.25) / 2)
    assert [t.turn for t in outcome.turns] == [1, 2]


def test_scenario_score_is_the_mean_of_recomputed_turn_scores():
    outcome = scenario_status(judged(dims(), DimensionScores(**dict.fromkeys(WEIGHTS, 5))), [])
    assert outcome.score == 6.5
    assert outcome.status is Status.PASS  # mean ≥ 6 and every correctness ≥ 4 (GAIA's rule)


def test_one_turn_with_correctness_3_fails_the_scenario_whatever_the_mean():
    good = DimensionScores(**dict.fromkeys(WEIGHTS, 10))
    bad = dims(
        correctness=3,
        tool_selection=10,
        context_retention=10,
        completeness=10,
        efficiency=10,
        personality=10,
        error_recovery=5,
    )
    outcome = scenario_status(judged(good, bad), [])
    assert outcome.score == 9.0
    assert outcome.status is Status.FAIL
    assert outcome.gates.failed() == ["rubric"]
    assert any("turn 2 correctness 3" in n for n in outcome.notes)


def test_a_failed_check_fails_an_otherwise_perfect_scenario():
    outcome = scenario_status(judged(dims(correctness=10)), [PASSING_CHECK, FAILING_CHECK])
    assert outcome.status is Status.FAIL
    assert outcome.gates.failed() == ["checks"]
    assert any("no 412,000" in n for n in outcome.notes)


@pytest.mark.parametrize(
    "label", [ClaimLabel.CONTRADICTED, ClaimLabel.NOT_ADDRESSED, ClaimLabel.INDETERMINATE]
)
def test_only_entailed_claims_pass(label):
    outcome = scenario_status(judged(dims(), claims=[claim(ClaimLabel.ENTAILED), claim(label)]), [])
    assert outcome.status is Status.FAIL
    assert outcome.gates.failed() == ["claims"]


def test_the_judge_saying_fail_is_corrected_to_pass_when_every_gate_passes():
    assert scenario_status(judged(dims(), verdict="FAIL"), []).status is Status.PASS


def test_blocked_by_architecture_is_never_upgraded_to_pass():
    outcome = scenario_status(judged(dims(correctness=10), verdict="BLOCKED_BY_ARCHITECTURE"), [])
    assert outcome.gates.all_passed
    assert outcome.status is Status.BLOCKED_BY_ARCHITECTURE
    assert any("never upgraded" in n for n in outcome.notes)


def test_a_turn_the_judge_skipped_fails_the_rubric():
    outcome = scenario_status(judged(dims()), [], conversation_turns=[1, 2])
    assert outcome.status is Status.FAIL
    assert outcome.gates.rubric_ok is False
    assert any("[2]" in n and "not judged" in n for n in outcome.notes)


# --- no judge: the exact checks decide what they can ------------------------------------


def test_no_judge_and_a_failed_check_is_a_fail_without_a_score():
    outcome = scenario_status(None, [PASSING_CHECK, FAILING_CHECK])
    assert outcome.status is Status.FAIL
    assert outcome.decided_by == "checks"
    assert outcome.score is None  # nothing was scored: no number is invented
    assert outcome.gates == QualityGates(
        rubric_ok=None, checks_ok=False, claims_ok=None, checks_run=2
    )
    assert outcome.gates.failed() == ["checks"]
    assert outcome.notes == [
        "failed: checks (1 of 2 exact checks failed; no judge ran)",
        "check answer_contains (turn 1) failed: no 412,000",
    ]


def test_a_failed_derived_check_is_named_as_derived_in_the_notes():
    derived = CheckResult(
        type="answer_number", turn=2, passed=False, derived=True, diagnostic="expected 24.6"
    )
    outcome = scenario_status(None, [derived])
    assert outcome.status is Status.FAIL
    assert outcome.notes[1] == "check answer_number (derived, turn 2) failed: expected 24.6"


def test_no_judge_and_every_check_passed_stays_not_judged_counted_apart():
    outcome = scenario_status(None, [PASSING_CHECK, PASSING_CHECK])
    assert outcome.status is Status.NOT_JUDGED and outcome.score is None
    assert outcome.decided_by is None
    assert outcome.gates.checks_ok and outcome.gates.checks_run == 2
    assert outcome.notes == ["checks passed, not judged: all 2 exact checks passed; no judge ran"]


def test_no_judge_and_no_check_is_plain_not_judged():
    outcome = scenario_status(None, [])
    assert outcome.status is Status.NOT_JUDGED and outcome.score is None
    assert outcome.gates.checks_run == 0
    assert outcome.notes == ["no judge configured and no exact check: verdicts are NOT_JUDGED"]


def test_an_infrastructure_status_wins_over_failed_checks_without_a_judge():
    # Checks of turns a TIMEOUT never reached fail by construction; the run is not quality.
    outcome = scenario_status(None, [FAILING_CHECK], infra=Status.TIMEOUT)
    assert outcome.status is Status.TIMEOUT and outcome.decided_by is None
    assert outcome.gates.checks_ok is False


def test_with_a_judge_a_failed_check_is_a_judged_fail_with_its_score():
    outcome = scenario_status(judged(dims(correctness=10)), [FAILING_CHECK])
    assert (outcome.status, outcome.decided_by, outcome.score) == (Status.FAIL, "judge", 8.5)


@pytest.mark.parametrize("infra", [Status.TIMEOUT, Status.INFRA_ERROR, Status.SETUP_ERROR])
def test_infrastructure_statuses_pass_through(infra):
    assert scenario_status(None, [], infra=infra).status is infra
    # even when some turns were judged before the failure
    outcome = scenario_status(judged(dims()), [], infra=infra)
    assert outcome.status is infra
    assert outcome.score == 8.0


def test_infra_must_not_be_a_verdict():
    with pytest.raises(ValueError, match="only scoring derives"):
        scenario_status(None, [], infra=Status.PASS)


# --- summary ------------------------------------------------------------------------------


@dataclass
class Sent:
    user_message_source: str | None
    simulator_model: str | None = None


@dataclass
class Row:
    category: str
    status: Status
    score: float | None = None
    gates: QualityGates = field(default_factory=QualityGates)
    decided_by: str | None = None
    turns: list[Sent] = field(default_factory=list)
    judge_unavailable: bool = False


def checks_fail(category: str = "rag") -> Row:
    return Row(category, Status.FAIL, None, QualityGates(checks_ok=False, checks_run=2), "checks")


def checks_pass(category: str = "rag") -> Row:
    return Row(category, Status.NOT_JUDGED, None, QualityGates(checks_run=3))


def test_summary_caps_fail_at_5_99_in_the_average():
    summary = summarize([Row("rag", Status.PASS, 8.01), Row("rag", Status.FAIL, 9.0)])
    assert summary.avg_score == 7.0  # (8.01 + 5.99) / 2, not (8.01 + 9.0) / 2
    assert summary.by_category["rag"].avg_score == 7.0


def test_summary_counts_every_bucket_and_keeps_infra_out_of_quality():
    rows = [
        Row("rag", Status.PASS, 9.0),
        Row("rag", Status.FAIL, 4.0),
        Row("rag", Status.BLOCKED_BY_ARCHITECTURE, 7.0),
        Row("memory", Status.TIMEOUT, None),
        Row("memory", Status.BUDGET_EXCEEDED),
        Row("memory", Status.INFRA_ERROR),
        Row("memory", Status.SETUP_ERROR),
        Row("memory", Status.SKIPPED_NO_DOCUMENT),
        Row("memory", Status.SKIPPED_NO_MODEL),
        Row("memory", Status.NOT_RUN),
        Row("memory", Status.ERRORED),
        Row("memory", Status.NOT_JUDGED),
    ]
    s = summarize(rows)
    assert (s.total_scenarios, s.passed, s.failed, s.blocked) == (12, 1, 1, 1)
    assert (s.timeout, s.budget_exceeded, s.infra_error, s.errored) == (1, 1, 2, 1)
    assert (s.skipped, s.not_run, s.not_judged) == (2, 1, 1)
    assert (s.judged, s.infrastructure) == (3, 9)
    assert s.pass_rate == pytest.approx(1 / 12)
    assert s.judged_pass_rate == pytest.approx(1 / 3)
    assert s.avg_score == pytest.approx((9.0 + 4.0 + 7.0) / 3, abs=0.005)
    assert s.by_category["memory"].avg_score is None
    assert s.by_category["memory"].total == 9
    assert s.by_category["rag"].judged_pass_rate == pytest.approx(1 / 3)


def test_summary_of_an_unjudged_run_has_no_score():
    s = summarize([Row("rag", Status.NOT_JUDGED), Row("rag", Status.NOT_JUDGED)])
    assert s.avg_score is None and s.judged_pass_rate is None and s.pass_rate == 0.0


def test_checks_decided_fails_count_as_failed_but_not_as_judged():
    # The fresh-machine run: no judge; 3 scenarios failed a check, 1 passed every check,
    # 1 had no check, 1 timed out.
    rows = [checks_fail(), checks_fail(), checks_fail("memory"), checks_pass("memory")]
    rows += [Row("memory", Status.NOT_JUDGED), Row("memory", Status.TIMEOUT)]
    s = summarize(rows)
    assert (s.failed, s.checks_failed, s.judged, s.infrastructure) == (3, 3, 0, 3)
    assert (s.not_judged, s.checks_passed_not_judged) == (2, 1)
    assert (s.checked, s.checks_all_passed) == (4, 1)
    assert s.checks_pass_rate == pytest.approx(1 / 4)
    assert s.judged_pass_rate is None and s.avg_score is None
    assert s.by_category["rag"].checks_pass_rate == 0.0
    assert s.by_category["memory"].checks_pass_rate == pytest.approx(1 / 2)
    assert s.by_category["memory"].checks_failed == 1


def test_a_checks_decided_fail_never_enters_the_average_score():
    s = summarize([Row("rag", Status.PASS, 8.0), checks_fail()])
    assert s.avg_score == 8.0
    assert s.judged == 1 and s.judged_pass_rate == 1.0


def test_infrastructure_results_are_left_out_of_the_checks_pass_rate():
    timeout = Row("rag", Status.TIMEOUT, None, QualityGates(checks_ok=False, checks_run=4))
    s = summarize([timeout, checks_pass()])
    assert (s.checked, s.checks_all_passed, s.checks_pass_rate) == (1, 1, 1.0)


def test_decided_pass_rate_is_the_judged_rate_when_a_judge_decided():
    s = summarize([Row("rag", Status.PASS, 9.0), Row("rag", Status.FAIL, 4.0), checks_pass()])
    assert decided_pass_rate(s) == (0.5, "judged pass rate")


def test_decided_pass_rate_falls_back_to_the_checks_pass_rate_without_a_judge():
    s = summarize([checks_fail(), checks_pass(), checks_pass(), checks_pass()])
    assert decided_pass_rate(s) == (0.75, "checks pass rate")


def test_decided_pass_rate_is_none_when_nothing_was_decided():
    s = summarize([Row("rag", Status.NOT_JUDGED), Row("rag", Status.INFRA_ERROR)])
    rate, name = decided_pass_rate(s)
    assert rate is None and "no pass rate" in name
    assert decided_pass_rate(summarize([]))[0] is None


def test_summary_of_nothing():
    s = summarize([])
    assert s.total_scenarios == 0 and s.pass_rate == 0.0 and s.by_category == {}


# --- cost ---------------------------------------------------------------------------------


def test_sonnet_cost_per_million_tokens():
    usage = JudgeUsage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert judge_cost_usd(usage, "claude-sonnet-4-6") == pytest.approx(18.0)


def test_cache_tokens_are_priced_from_the_input_price():
    usage = JudgeUsage(cache_read_tokens=1_000_000, cache_write_tokens=1_000_000)
    assert judge_cost_usd(usage, "claude-sonnet-4-6") == pytest.approx(0.30 + 3.75)


def test_family_prices_differ():
    usage = JudgeUsage(input_tokens=2_000, output_tokens=500)
    haiku = judge_cost_usd(usage, "claude-haiku-4-5")
    sonnet = judge_cost_usd(usage, "claude-sonnet-4-5")
    opus = judge_cost_usd(usage, "claude-opus-4-1")
    assert haiku == pytest.approx((2_000 * 1 + 500 * 5) / 1e6)
    assert haiku < sonnet < opus


def test_local_models_cost_nothing():
    usage = JudgeUsage(input_tokens=10**7, output_tokens=10**7)
    assert judge_cost_usd(usage, "SmolLM2-135M-Instruct") == 0.0


def test_summary_counts_user_messages_by_source_and_simulator_model():
    # Two trials of one scenario: every turn that was sent counts, in every trial.
    first = [Sent("verbatim"), Sent("extracted"), Sent("simulated", "SmolLM2-135M")]
    second = [Sent("verbatim"), Sent("simulated", "SmolLM2-135M"), Sent("simulated", "Qwen3")]
    gaia_row = [Sent(None), Sent(None)]  # read from a GAIA scorecard: source not recorded
    orphan = [Sent("simulated")]  # simulated, model not recorded
    s = summarize([
        Row("rag", Status.NOT_JUDGED, turns=first),
        Row("rag", Status.FAIL, turns=second, decided_by="checks"),
        Row("memory", Status.PASS, 8.0, turns=gaia_row),
        Row("memory", Status.PASS, 8.0, turns=orphan),
    ])
    m = s.user_messages
    assert (m.verbatim, m.extracted, m.simulated, m.not_recorded) == (2, 1, 4, 2)
    assert m.simulated_by == {"Qwen3": 1, "SmolLM2-135M": 2, "unknown": 1}
    assert m.total == 9


def test_summary_of_no_turns_counts_no_user_messages():
    m = summarize([Row("rag", Status.INFRA_ERROR)]).user_messages
    assert m.total == 0 and m.simulated_by == {}
