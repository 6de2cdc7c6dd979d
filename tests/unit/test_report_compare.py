"""compare(baseline, current): GAIA's buckets, our stricter rules and exit codes."""

from __future__ import annotations

import pytest
from test_report import JUDGE, card

from runner.records.status import Status
from runner.report import (
    EXIT_MODELS_DIFFER,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_UNREADABLE,
    ScenarioResult,
    compare,
)


def row(sid: str, status: Status, score: float | None, wall: float | None = 10.0) -> ScenarioResult:
    return ScenarioResult(id=sid, category="rag", status=status, score=score, wall_s=wall)


P, F = Status.PASS, Status.FAIL


def test_every_bucket():
    baseline = card(
        [
            row("better", F, 5.0),
            row("worse", P, 8.0),
            row("dropped", P, 9.5),
            row("slower", P, 8.0, wall=10.0),
            row("same", P, 8.0),
            row("fail_dropped", F, 5.5),
            row("broke_infra", P, 8.0),
            row("was_skipped", Status.SKIPPED_NO_DOCUMENT, None),
            row("gone", P, 8.0),
        ]
    )
    current = card(
        [
            row("better", P, 7.0),
            row("worse", F, 5.0),
            row("dropped", P, 7.5),
            row("slower", P, 8.0, wall=20.1),
            row("same", P, 7.0),
            row("fail_dropped", F, 3.5),
            row("broke_infra", Status.TIMEOUT, None),
            row("was_skipped", P, 8.0),
            row("new", P, 8.0),
        ]
    )
    result = compare(baseline, current)
    def keys(bucket: list) -> list[str]:
        return [e.key for e in bucket]

    assert keys(result.improved) == ["better"]
    # Stricter than GAIA: a PASS lost to TIMEOUT, or not run at all, is a regression.
    assert keys(result.regressed) == ["broke_infra", "worse", "gone"]
    assert result.regressed[-1].current_status is None
    assert keys(result.score_regressed) == ["dropped", "fail_dropped"]
    assert keys(result.time_regressed) == ["slower"]
    assert keys(result.unchanged) == ["same"]
    assert keys(result.unmeasured) == ["was_skipped"]
    assert result.only_in_baseline == ["gone"] and result.only_in_current == ["new"]
    assert result.score_regressed[0].delta == -2.0
    assert result.exit_code == EXIT_REGRESSION


def test_exactly_twice_as_slow_is_not_a_time_regression():
    result = compare(card([row("s", P, 8.0, wall=10.0)]), card([row("s", P, 8.0, wall=20.0)]))
    assert [e.key for e in result.unchanged] == ["s"] and result.exit_code == EXIT_OK


def test_a_drop_just_under_two_points_is_unchanged():
    result = compare(card([row("s", P, 9.0)]), card([row("s", P, 7.01)]))
    assert [e.key for e in result.unchanged] == ["s"] and result.exit_code == EXIT_OK


def test_no_regression_exits_0():
    result = compare(card([row("s", F, 4.0)]), card([row("s", P, 8.0)]))
    assert result.exit_code == EXIT_OK and not result.has_regression


def test_different_models_exit_3():
    other_judge = JUDGE.model_copy(update={"judge_model": "claude-haiku-4-5"})
    result = compare(card([row("s", P, 8.0)]), card([row("s", P, 8.0)], other_judge))
    assert result.exit_code == EXIT_MODELS_DIFFER
    assert result.model_mismatch == ["judge model: claude-sonnet-4-6 → claude-haiku-4-5"]
    other_agent = JUDGE.model_copy(update={"agent_model": "Gemma-4-E4B-it-GGUF"})
    assert compare(card([]), card([], other_agent)).exit_code == EXIT_MODELS_DIFFER


def test_trials_compare_trial_by_trial():
    old = row("s", P, 8.0)
    old.trial = 1
    new = row("s", F, 4.0)
    new.trial = 1
    result = compare(card([old]), card([new]))
    assert [e.key for e in result.regressed] == ["s__trial1"]


def test_render_reads_worst_news_first():
    baseline = card([row("worse", P, 8.0), row("better", F, 4.0), row("gone", P, 8.0)])
    current = card([row("worse", F, 5.5, wall=12.0), row("better", P, 7.0)])
    text = compare(baseline, current).render()
    lines = text.splitlines()
    assert lines[0] == "regressed (2):"
    assert "worse: PASS 8.00 10.0s → FAIL 5.50 12.0s (Δ -2.50)" in text
    assert "gone: PASS 8.00 10.0s → missing" in text
    assert "only_in_baseline (1): gone" in text
    assert lines[-1] == "result: REGRESSION (exit 1)"


def test_exit_codes_are_ours_not_gaias():
    # GAIA exits 2 on a regression; trialbox keeps 2 for unreadable input/usage everywhere.
    assert (EXIT_OK, EXIT_REGRESSION, EXIT_UNREADABLE, EXIT_MODELS_DIFFER) == (0, 1, 2, 3)


@pytest.mark.parametrize(
    "lost",
    [
        Status.TIMEOUT,
        Status.ERRORED,
        Status.INFRA_ERROR,
        Status.SETUP_ERROR,
        Status.BUDGET_EXCEEDED,
        Status.NOT_RUN,
    ],
)
def test_a_pass_lost_to_infrastructure_is_a_regression(lost):
    result = compare(card([row("s", P, 8.0)]), card([row("s", lost, None)]))
    assert [e.key for e in result.regressed] == ["s"] and result.exit_code == EXIT_REGRESSION


@pytest.mark.parametrize("status", [Status.SKIPPED_NO_DOCUMENT, Status.NOT_JUDGED])
def test_a_pass_that_was_skipped_or_not_judged_is_unmeasured_not_regressed(status):
    result = compare(card([row("s", P, 8.0)]), card([row("s", status, None)]))
    assert [e.key for e in result.unmeasured] == ["s"] and result.exit_code == EXIT_OK
    assert "--require-complete fails on them" in result.render()


@pytest.mark.parametrize(
    "before", [Status.INFRA_ERROR, Status.SETUP_ERROR, Status.TIMEOUT, Status.NOT_JUDGED, Status.ERRORED]
)
@pytest.mark.parametrize("after", [P, F])
def test_a_baseline_without_a_verdict_is_unmeasured_whatever_the_run_says(before, after):
    # A baseline that never reached a verdict cannot be improved on, regressed from or out-run.
    result = compare(card([row("s", before, None, wall=1.0)]), card([row("s", after, 8.0, wall=30.0)]))
    assert [e.key for e in result.unmeasured] == ["s"] and result.exit_code == EXIT_OK
    assert not (result.improved or result.regressed or result.time_regressed or result.unchanged)


def test_a_failing_scenario_missing_from_the_run_is_only_listed():
    result = compare(card([row("s", F, 4.0), row("t", P, 8.0)]), card([row("t", P, 8.0)]))
    assert result.only_in_baseline == ["s"] and not result.regressed
    assert result.exit_code == EXIT_OK


def test_require_complete_fails_on_missing_and_unmeasured_scenarios():
    baseline = card([row("fails", F, 4.0), row("ok", P, 8.0), row("skip", P, 8.0)])
    current = card(
        [
            row("ok", P, 8.0),
            row("skip", Status.SKIPPED_NO_DOCUMENT, None),
            row("blocked", Status.BLOCKED_BY_ARCHITECTURE, 3.0),
        ]
    )
    assert compare(baseline, current).exit_code == EXIT_OK
    strict = compare(baseline, current, require_complete=True)
    assert strict.exit_code == EXIT_REGRESSION and strict.has_regression
    assert strict.incomplete == [
        "fails: in the baseline, missing from this run",
        "skip: SKIPPED_NO_DOCUMENT, no quality measurement",
        "blocked: BLOCKED_BY_ARCHITECTURE, no quality measurement",
    ]
    assert "incomplete (3):" in strict.render()


def test_require_complete_passes_a_complete_run():
    result = compare(card([row("s", P, 8.0)]), card([row("s", P, 8.5)]), require_complete=True)
    assert result.exit_code == EXIT_OK and result.incomplete == []


def test_a_targeted_run_is_judged_only_on_its_selection():
    targeted = JUDGE.model_copy(update={"scenario_filter": ["a", "c"]})
    baseline = card([row("a", P, 8.0), row("b", P, 8.0)])
    result = compare(baseline, card([row("a", P, 8.0)], targeted), require_complete=True)
    # b was never selected: not run, not a regression; c was selected and never ran.
    assert result.not_run == ["b"] and not result.regressed
    assert result.incomplete == ["c: selected for this run, no result"]
    assert result.exit_code == EXIT_REGRESSION


def test_trials_fold_to_the_worst_trial_when_only_one_side_has_trials():
    trials = [row("s", P, 9.0), row("s", F, 4.0), row("s", P, 8.0)]
    for index, result_row in enumerate(trials, start=1):
        result_row.trial = index
    result = compare(card([row("s", P, 8.0)]), card(trials))
    assert [e.key for e in result.regressed] == ["s"] and result.regressed[0].current_score == 4.0
    assert not result.only_in_baseline and not result.only_in_current


def test_served_model_decides_and_a_bare_name_matches_its_checkpoint():
    lemonade = JUDGE.model_copy(
        update={
            "agent_model": "Gemma-4-E4B-it-GGUF",
            "served_model": "Gemma-4-E4B-it-GGUF (unsloth/gemma-4-E4B-it-GGUF:Q4_K_M) by "
            "Lemonade Server 9.1.4",
        }
    )
    newer = lemonade.model_copy(
        update={"served_model": lemonade.served_model.replace("9.1.4", "9.2.0")}
    )
    gaia_side = JUDGE.model_copy(update={"agent_model": "Gemma-4-E4B-it-GGUF"})
    same = [row("s", P, 8.0)]
    # Another Lemonade build serving the same model: comparable (that is a driver comparison).
    assert compare(card(same, lemonade), card(same, newer)).exit_code == EXIT_OK
    # GAIA records the bare name; it is the same model.
    assert compare(card(same, gaia_side), card(same, lemonade)).exit_code == EXIT_OK
    # trialbox llm-cpu answers Gemma's name with SmolLM2: a different model.
    cpu = JUDGE.model_copy(
        update={
            "agent_model": "Gemma-4-E4B-it-GGUF",
            "served_model": "SmolLM2-135M-Instruct Q4_1 by trialbox llm-cpu",
        }
    )
    result = compare(card(same, gaia_side), card(same, cpu))
    assert result.exit_code == EXIT_MODELS_DIFFER
    assert result.model_mismatch == [
        "agent model: Gemma-4-E4B-it-GGUF → SmolLM2-135M-Instruct Q4_1"
    ]


def trials(sid: str, walls: list[float], status: Status = F) -> list[ScenarioResult]:
    rows = [row(sid, status, 4.0, wall=wall) for wall in walls]
    for index, result_row in enumerate(rows, start=1):
        result_row.trial = index
    return rows


def test_trials_that_vary_around_the_same_median_are_not_a_time_regression():
    # Null: each trial alone moves 2.5× (trial 1: 8 s → 20 s) but the median stays 10 s.
    # Trial-by-trial, GAIA's rule would call two of these rows time regressions.
    baseline = card(trials("s", [8.0, 10.0, 25.0]))
    current = card(trials("s", [20.0, 10.0, 4.0]))
    result = compare(baseline, current)
    assert not result.time_regressed and result.exit_code == EXIT_OK
    assert [e.key for e in result.unchanged] == ["s__trial1", "s__trial2", "s__trial3"]
    first = result.unchanged[0]
    assert (first.baseline_median_wall_s, first.current_median_wall_s) == (10.0, 10.0)


def test_every_trial_three_times_slower_is_a_time_regression():
    # Planted: the same trials, every one 3× slower → median 10 s → 30 s.
    baseline = card(trials("s", [8.0, 10.0, 25.0]) + trials("same", [10.0, 10.0, 10.0]))
    current = card(trials("s", [24.0, 30.0, 75.0]) + trials("same", [10.0, 10.0, 10.0]))
    result = compare(baseline, current)
    assert [e.key for e in result.time_regressed] == ["s__trial1", "s__trial2", "s__trial3"]
    assert [e.key for e in result.unchanged] == ["same__trial1", "same__trial2", "same__trial3"]
    assert result.exit_code == EXIT_REGRESSION
    assert "s__trial1: FAIL 4.00 8.0s → FAIL 4.00 24.0s (Δ +0.00) (median 10.0s → 30.0s)" in result.render()


def test_a_median_exactly_twice_as_slow_is_not_a_time_regression():
    result = compare(card(trials("s", [5.0, 10.0, 30.0])), card(trials("s", [1.0, 20.0, 21.0])))
    assert not result.time_regressed and result.exit_code == EXIT_OK


def test_single_trial_runs_keep_gaias_row_by_row_rule():
    # GAIA interop: without trials each row is its own time; 2.5× slower is a regression.
    result = compare(card([row("s", F, 4.0, wall=8.0)]), card([row("s", F, 4.0, wall=20.0)]))
    assert [e.key for e in result.time_regressed] == ["s"] and result.exit_code == EXIT_REGRESSION
    assert result.time_regressed[0].baseline_median_wall_s is None
    assert "(median" not in result.render()


@pytest.mark.parametrize(("before", "after", "side"), [
    (9.0, None, "current"), (None, 9.0, "baseline")])
def test_a_score_missing_on_one_side_is_not_comparable(before, after, side):
    # Issue 34: baseline PASS 9.0 against current PASS with no score read "unchanged".
    from runner.report import ScorecardError

    baseline = card([row("same", P, 8.0), row("orchard", P, before)])
    current = card([row("same", P, 8.0), row("orchard", P, after)])
    with pytest.raises(ScorecardError) as caught:
        compare(baseline, current)
    message = str(caught.value)
    assert "not comparable" in message and "orchard" in message, message
    assert f"{side} row is PASS with no score" in message, message
    assert "same" not in message.split("(", 1)[1], message


def test_no_score_on_either_side_still_compares_on_the_verdict():
    result = compare(card([row("a", P, None)]), card([row("a", P, None)]))
    assert [e.key for e in result.unchanged] == ["a"] and result.exit_code == EXIT_OK
