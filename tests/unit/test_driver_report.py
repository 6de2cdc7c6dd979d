"""Driver-build report: the statistics (worked by hand) and planted runs with known deltas."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from runner.outcomes import CheckResult
from runner.report import (
    Change,
    RunConfig,
    ScenarioResult,
    Scorecard,
    Trace,
    TurnResult,
    build_scorecard,
    driver_report,
    render_driver_html,
    render_driver_md,
)
from runner.report._stats import (
    Interval,
    binomial_tail,
    bootstrap_interval,
    mcnemar_exact,
    mean_difference,
    relative_change,
    smallest_p,
)
from runner.status import Status
from runner.transcript import IndexedDocument, Transcript, TurnPerformance

WHEN = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)

# --- statistics, worked by hand --------------------------------------------------------------


def test_relative_change_and_mean_difference():
    assert relative_change(2.0, 3.0) == 0.5
    assert relative_change(4.0, 3.0) == -0.25
    assert mean_difference(2.0, 5.0) == 3.0
    with pytest.raises(ValueError, match="positive baseline mean"):
        relative_change(0.0, 1.0)


def test_bootstrap_of_constant_samples_is_the_exact_value():
    got = bootstrap_interval([[1.0, 1.0, 1.0]], [[2.0, 2.0, 2.0]], relative_change)
    assert got == Interval(1.0, 1.0, 1.0) and got.excludes(0.0)


def test_bootstrap_interval_worked_by_hand():
    # B = {1, 3}: a resample of two values has mean 1, 2 or 3 with probability 1/4, 1/2, 1/4,
    # so against a constant A = 1 the change is 0, +100 % or +200 %. A 95 % percentile
    # interval cuts 2.5 % from each tail, inside the 25 % masses at either end: [0, 2].
    got = bootstrap_interval([[1.0, 1.0, 1.0]], [[1.0, 3.0]], relative_change, seed=7)
    assert got == Interval(1.0, 0.0, 2.0)
    assert not got.excludes(0.0)  # 0 is inside: no detectable change


def test_bootstrap_resamples_within_each_stratum():
    # Each scenario is constant within itself; only resampling *across* scenarios could move
    # the mean. Stratified, nothing moves.
    groups = [[1.0, 1.0], [10.0, 10.0]]
    assert bootstrap_interval(groups, groups, mean_difference) == Interval(0.0, 0.0, 0.0)


def test_bootstrap_is_deterministic_for_a_seed():
    a, b = [[1.0, 2.0, 3.0, 4.0]], [[2.0, 3.0, 5.0, 8.0]]
    first = bootstrap_interval(a, b, relative_change, seed=3)
    assert first == bootstrap_interval(a, b, relative_change, seed=3)
    assert first.low < first.estimate < first.high


def test_bootstrap_rejects_bad_arguments():
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_interval([[1.0]], [[1.0]], mean_difference, confidence=1.0)
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_interval([[1.0]], [[1.0]], mean_difference, resamples=0)
    with pytest.raises(ValueError, match="at least one value on each side"):
        bootstrap_interval([[]], [[1.0]], mean_difference)


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (0, 0, 1.0),  # nothing flipped
        (3, 3, 1.0),  # flips balanced
        (0, 6, 2 / 64),  # all six one way: 2 · (1/2)^6
        (1, 9, 2 * 11 / 1024),  # 2 · (C(10,0) + C(10,1)) / 2^10
        (2, 8, 2 * 56 / 1024),  # 2 · (1 + 10 + 45) / 2^10
        (8, 2, 2 * 56 / 1024),  # symmetric
    ],
)
def test_mcnemar_exact_worked_values(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p, abs=1e-12)


def test_binomial_tail_and_smallest_p():
    assert binomial_tail(1, 10) == 11 / 1024
    assert binomial_tail(10, 10) == 1.0
    assert smallest_p(5) == 0.0625 and smallest_p(6) == 0.03125 and smallest_p(0) == 1.0
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)
    with pytest.raises(ValueError):
        binomial_tail(-1, 2)


# --- planted runs ----------------------------------------------------------------------------

SCENARIOS = [(f"scenario_{i}", "rag_quality" if i < 4 else "memory") for i in range(8)]
TRIALS = 3


def jitter(i: int) -> float:
    """A fixed, repeatable spread (no RNG in the fixture): 0.00 … 0.04."""
    return 0.01 * ((i * 7) % 5)


def config(driver: str, trials: int = TRIALS) -> RunConfig:
    return RunConfig(
        judge_provider="anthropic",
        judge_model="claude-sonnet-4-6",
        agent_model="Qwen3-4B-Instruct-2507-GGUF",
        device="rocm",
        trials=trials,
        hardware={"cpu_model": "AMD Ryzen AI 9 HX 370", "amdgpu_driver": driver},
        images={"llm": f"sha256:{driver}"},
        llm_server={"version": "9.1.4"},
    )


def planted(
    run_id: str,
    *,
    driver: str,
    ttft_factor: float = 1.0,
    failing: set[tuple[str, int]] = frozenset(),
    index_s: float = 1.0,
    scenarios: list[tuple[str, str]] = SCENARIOS,
    trials: int = TRIALS,
    turns: int = 2,
) -> tuple[Scorecard, list[Trace]]:
    """A judged run: per turn TTFT 0.5 s (× factor) with jitter, 40 tok/s, wall 2 s."""
    rows, traces, n = [], [], 0
    for sid, category in scenarios:
        for trial in range(1, trials + 1):
            fails = (sid, trial) in failing
            turn_rows = []
            for t in range(1, turns + 1):
                n += 1
                turn_rows.append(
                    TurnResult(
                        turn=t,
                        score=4.0 if fails else 8.0,
                        passed=not fails,
                        checks=[CheckResult(type="answer_contains", turn=t, passed=not fails)],
                        performance=TurnPerformance(
                            wall_s=2.0 + jitter(n),
                            time_to_first_token_s=(0.5 + jitter(n)) * ttft_factor,
                            tokens_per_s=40.0 + 10 * jitter(n + 1),
                        ),
                    )
                )
            row = ScenarioResult(
                id=sid,
                category=category,
                status=Status.FAIL if fails else Status.PASS,
                score=4.0 if fails else 8.0,
                turns=turn_rows,
                wall_s=4.0,
                trial=trial if trials > 1 else None,
            )
            rows.append(row)
            docs = [IndexedDocument(path=f"{sid}.md", chunks=4, duration_s=index_s + jitter(n))]
            traces.append(
                Trace(
                    run_id=run_id,
                    result=row,
                    transcript=Transcript(scenario_id=sid, indexed=docs, gaia_version="0.25.1"),
                )
            )
    card = build_scorecard(
        run_id=run_id,
        timestamp=WHEN,
        config=config(driver, trials),
        results=rows,
        finished=True,
    )
    return card, traces


#: B fails 10 of the 24 (scenario, trial) pairs that pass on A.
BROKEN = {(sid, trial) for sid, _ in SCENARIOS[:5] for trial in (1, 2)}


def metric(report, key: str, scope: str = "all", name: str = "all"):
    return next(
        d for d in report.speed + report.scores
        if d.metric == key and d.scope == scope and d.name == name
    )


def outcome(report, key: str, name: str = "all"):
    return next(o for o in report.outcomes if o.outcome == key and o.name == name)


def test_a_known_speed_and_quality_difference_are_both_found():
    a, traces_a = planted("build-a", driver="6.10.5")
    b, traces_b = planted(
        "build-b", driver="6.12.0", ttft_factor=1.5, failing=BROKEN, index_s=0.5
    )
    report = driver_report(a, b, traces_a, traces_b)

    ttft = metric(report, "ttft_s")
    assert ttft.verdict is Change.SLOWER and ttft.n_a == ttft.n_b == 48
    assert ttft.change == pytest.approx(0.5) and ttft.ci_low > 0.4 and ttft.ci_high < 0.6
    assert metric(report, "ttft_s", "category", "memory").verdict is Change.SLOWER
    assert metric(report, "tokens_per_s").verdict is Change.NO_CHANGE
    assert metric(report, "turn_wall_s").verdict is Change.NO_CHANGE
    index = metric(report, "index_s")
    assert index.verdict is Change.FASTER and index.change < -0.4

    passed = outcome(report, "passed")
    assert (passed.pairs, passed.a_only, passed.b_only) == (24, 10, 0)
    assert passed.p_value == pytest.approx(2 / 1024) and passed.verdict is Change.WORSE
    assert outcome(report, "checks_passed").verdict is Change.WORSE
    assert outcome(report, "completed").verdict is Change.NO_CHANGE
    assert metric(report, "score").verdict is Change.WORSE

    first = next(s for s in report.scenarios if s.scenario_id == "scenario_0")
    assert (first.k, first.pass_hat_k_a, first.pass_hat_k_b) == (3, 1.0, 0.0)
    assert report.pass_k == 3 and report.pass_hat_k_a == 1.0
    assert report.pass_hat_k_b == pytest.approx(3 / 8)  # 3 untouched scenarios of 8

    assert report.fingerprint[0].differs and report.fingerprint[0].key in (
        "hardware.amdgpu_driver",
        "images.llm",
    )
    differing = {r.key for r in report.fingerprint if r.differs}
    assert differing == {"hardware.amdgpu_driver", "images.llm"}
    assert any(r.key == "agent.gaia_version" and not r.differs for r in report.fingerprint)

    found = "\n".join(report.beyond_noise)
    assert "time to first token (all scenarios): B slower +50.0%" in found
    assert "time to first token: B slower in 8 of 8 scenario(s): scenario_0, " in found
    assert "passed (all scenarios): B worse, 10 pair(s) lost and 0 gained of 24" in found
    assert "decode speed" not in found and "(scenario " not in found


def test_an_identical_pair_shows_no_detectable_change():
    a, traces = planted("build-a", driver="6.10.5")
    report = driver_report(a, a, traces, traces)
    assert report.beyond_noise == []
    assert all(d.verdict is Change.NO_CHANGE for d in report.speed + report.scores)
    assert all(o.verdict is Change.NO_CHANGE for o in report.outcomes)
    assert not any(r.differs for r in report.fingerprint)
    text = render_driver_md(report)
    assert "- no detectable change: every difference is within the noise" in text


def test_a_tiny_run_says_n_is_too_small():
    one = [("only_scenario", "rag_quality")]
    a, _ = planted("a", driver="x", scenarios=one, trials=1, turns=1)
    b, _ = planted("b", driver="y", scenarios=one, trials=1, turns=1, ttft_factor=3.0,
                   failing={("only_scenario", 1)})
    report = driver_report(a, b)
    ttft = metric(report, "ttft_s")
    assert ttft.verdict is Change.TOO_FEW and "at least 3 a side" in ttft.note
    passed = outcome(report, "passed")
    assert passed.verdict is Change.TOO_FEW and "run more scenarios or trials" in passed.note
    assert report.beyond_noise == []
    assert any("one trial per scenario" in n for n in report.notes)
    assert any("index time" in n and "traces" in n for n in report.notes)
    page = render_driver_html(report)
    assert "too few samples" in page and "<svg" in page


def test_gaia_scorecards_compare_on_quality_and_say_why_speed_is_missing():
    from pathlib import Path

    from runner.report import read_any_scorecard

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "gaia_scorecards"
    a = read_any_scorecard(fixtures / "baseline" / "baseline.json")
    b = read_any_scorecard(fixtures / "run_eval-20261120-140200")
    report = driver_report(a, b)
    assert any("is a GAIA scorecard" in n for n in report.notes)
    assert report.speed == [] and report.only_in_b == ["oddly_labelled"]
    completed = outcome(report, "completed")
    assert (completed.pairs, completed.a_only) == (4, 1)  # the TIMEOUT; skipped rows excluded
    assert completed.verdict is Change.TOO_FEW
    assert any(r.key == "llm_server.version" for r in report.fingerprint)


def test_few_flips_among_many_pairs_is_no_detectable_change_with_a_note():
    a, _ = planted("a", driver="x")
    b, _ = planted("b", driver="x", failing={("scenario_0", 1), ("scenario_1", 1)})
    passed = outcome(driver_report(a, b), "passed")
    assert passed.verdict is Change.NO_CHANGE and passed.p_value == 0.5
    assert "only 2 pair(s) flipped" in passed.note


def test_scenarios_on_one_side_only_are_listed_not_compared():
    a, _ = planted("a", driver="x")
    b, _ = planted("b", driver="x", scenarios=SCENARIOS[:6])
    report = driver_report(a, b)
    assert report.only_in_a == ["scenario_6", "scenario_7"] and report.only_in_b == []
    assert outcome(report, "passed").pairs == 18


def test_the_report_is_deterministic():
    a, ta = planted("a", driver="x")
    b, tb = planted("b", driver="y", ttft_factor=1.1)
    assert driver_report(a, b, ta, tb) == driver_report(a, b, ta, tb)
    assert driver_report(a, b, ta, tb, seed=1) != driver_report(a, b, ta, tb, seed=2)


def test_markdown_report_has_every_section():
    a, ta = planted("build-a", driver="6.10.5")
    b, tb = planted("build-b", driver="6.12.0", ttft_factor=1.5, failing=BROKEN)
    text = render_driver_md(driver_report(a, b, ta, tb))
    for heading in ("# Driver-build comparison: A `build-a` vs B `build-b`", "## Beyond noise",
                    "## Setup (differences first)", "## Speed: B vs A, 95% bootstrap",
                    "### Per scenario", "## Quality: paired outcomes", "## Notes"):
        assert heading in text
    assert "| **hardware.amdgpu_driver** (differs) | 6.10.5 | 6.12.0 |" in text
    assert "| time to first token | all scenarios | 48 | 48 |" in text
    assert "pass^3 (every one of 3 tries passes), mean over scenarios: A 1.00, B 0.38" in text


def test_html_report_is_self_contained_with_a_chart_per_metric_and_escapes():
    a, ta = planted("build<a>", driver="6.10.5")
    b, tb = planted("build-b", driver="6.12.0 & <rc1>", ttft_factor=1.5, failing=BROKEN)
    page = render_driver_html(driver_report(a, b, ta, tb))
    assert page.startswith("<!doctype html>") and "<script" not in page
    assert not re.search(r"\b(src|href)=", page)
    assert page.count("<svg") == 5  # four speed metrics and the judged score
    assert "build&lt;a&gt;" in page and "6.12.0 &amp; &lt;rc1&gt;" in page
    assert "<a>" not in page and "<rc1>" not in page
    assert 'class=differs' in page
    # The slower TTFT is drawn in the "worse" colour, right of the zero line.
    assert "#cf222e" in page and "+50.0% slower" in page
