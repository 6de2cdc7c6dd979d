"""compare(baseline, current): GAIA's buckets and exit codes."""

from __future__ import annotations

from test_report import JUDGE, card

from runner.report import EXIT_MODELS_DIFFER, EXIT_OK, EXIT_REGRESSION, ScenarioResult, compare
from runner.status import Status


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
    keys = lambda bucket: [e.key for e in bucket]
    assert keys(result.improved) == ["better"]
    assert keys(result.regressed) == ["worse"]
    assert keys(result.score_regressed) == ["dropped", "fail_dropped"]
    assert keys(result.time_regressed) == ["slower"]
    assert keys(result.unchanged) == ["same"]
    assert keys(result.unmeasured) == ["broke_infra", "was_skipped"]
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
    assert lines[0] == "regressed (1):"
    assert "worse: PASS 8.00 10.0s → FAIL 5.50 12.0s (Δ -2.50)" in text
    assert "only_in_baseline (1): gone" in text
    assert lines[-1] == "result: REGRESSION (exit 2)"
