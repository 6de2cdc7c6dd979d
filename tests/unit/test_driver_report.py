"""Driver-build report: the statistics (worked by hand) and planted runs with known deltas."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from runner.records.outcomes import CheckResult
from runner.records.status import Status
from runner.records.transcript import IndexedDocument, Transcript, TurnPerformance
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
from runner.report._driver_models import DeviceMismatchError
from runner.report._stats import (
    adjust_bh,
    mcnemar_exact,
    paired_cluster_bootstrap,
    relative_change,
    residual_null_ps,
    scenario_differences,
    sign_flip_p,
    smallest_p,
    trial_permutation_p,
    trimmed_mean,
    turn_paired_difference,
)

WHEN = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)

# --- statistics, worked by hand --------------------------------------------------------------


def test_relative_change_and_mean_difference():
    assert relative_change(2.0, 3.0) == 0.5
    assert relative_change(4.0, 3.0) == -0.25
    with pytest.raises(ValueError, match="positive baseline mean"):
        relative_change(0.0, 1.0)


def test_bootstrap_of_identical_differences_is_the_exact_value():
    # Every scenario moved by exactly +1: no resample can differ, and the change is certain.
    got = paired_cluster_bootstrap([1.0, 1.0, 1.0, 1.0, 1.0], resamples=999)
    assert (got.estimate, got.low, got.high, got.standard_error) == (1.0, 1.0, 1.0, 0.0)
    # the p is the sign flips' (exact for 5: 2 of 32 patterns as extreme), not the bootstrap's
    assert got.excludes(0.0) and got.p_value == pytest.approx(2 / 32)
    assert paired_cluster_bootstrap([0.0, 0.0, 0.0]).p_value == 1.0


def test_bootstrap_resamples_scenarios_not_turns():
    # Scenarios moved by -1 and +1: resampling *scenarios* moves the mean between -1 and +1,
    # so the interval spans zero and the sign-flip p is large.
    got = paired_cluster_bootstrap([-1.0, 1.0, -1.0, 1.0, -1.0, 1.0], seed=3)
    assert got.estimate == 0.0 and got.low < 0 < got.high and got.p_value > 0.5
    assert got == paired_cluster_bootstrap([-1.0, 1.0, -1.0, 1.0, -1.0, 1.0], seed=3)


def test_sign_flip_p_is_exact_for_few_scenarios():
    # 5 scenarios all +: of the 2^5 = 32 sign patterns only all-+ and all-− are as extreme.
    assert sign_flip_p([1.0, 2.0, 1.5, 1.2, 0.8], resamples=5000) == pytest.approx(2 / 32)


def test_a_scenarios_change_is_paired_by_turn_and_a_tail_trial_does_not_move_it():
    # Turn 1 is 10× faster than turn 2 (its prompt, not chance); B doubles both. One of A's
    # turn-2 trials is a cache miss (10× the others): the median trial does not see it.
    a = {1: [1.0, 1.0, 1.0], 2: [10.0, 10.0, 100.0]}
    b = {1: [2.0, 2.0, 2.0], 2: [20.0, 20.0, 20.0], 3: [5.0]}  # turn 3 only on B: not paired
    assert turn_paired_difference(a, b) == pytest.approx(math.log(2))
    # The mean of the trials' logs takes the miss in: turn 2 looks 2 / 10^(1/3) = 0.93× on B.
    by_mean = turn_paired_difference(a, b, median=False)
    assert by_mean == pytest.approx(math.log(2) - math.log(10) / 6)
    assert turn_paired_difference({1: [1.0]}, {2: [1.0]}) is None


def test_a_trimmed_mean_over_scenarios_leaves_one_wild_scenario_out():
    # One scenario of ten moved ×e^5 (a cache-miss storm), nine by +0.1: the trimmed mean
    # drops the top and bottom 10 % (one scenario each) and reads the nine.
    differences = [0.1] * 9 + [5.0]
    assert trimmed_mean(differences, 0.1) == pytest.approx(0.1)
    assert trimmed_mean(differences, 0.0) == pytest.approx(0.59)
    got = paired_cluster_bootstrap(differences, trim=0.1, resamples=999)
    assert got.estimate == pytest.approx(0.1)
    # Sign flips work for any statistic. As extreme as the data (trimmed mean ±0.1): all nine
    # 0.1 alike (the 5.0 either way), or eight of them alike with the 5.0: 2 × (2 + 9) of the
    # 1024 patterns (Monte Carlo here: 2^10 > 999 resamples).
    assert got.p_value == pytest.approx(22 / 1024, abs=0.01)
    with pytest.raises(ValueError, match="trim 0.5"):
        trimmed_mean(differences, 0.5)


def test_trial_permutation_p_is_exact():
    # 5 trials a side, B's all above A's: 2 of the C(10, 5) = 252 splits are as extreme.
    p = trial_permutation_p([1.0, 1.1, 1.2, 1.3, 1.4], [2.0, 2.1, 2.2, 2.3, 2.4])
    assert p == pytest.approx(2 / 252)


def test_benjamini_hochberg():
    assert adjust_bh([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.04, 0.04])
    assert adjust_bh([]) == []


def test_the_sign_flip_p_is_scipys_permutation_test():
    # Written out vectorised for the power simulation, it must be scipy's definition: exact
    # (2^7 = 128 patterns) with the plain and the trimmed mean, and Monte Carlo within noise.
    from scipy import stats

    rng = np.random.default_rng(11)
    for trim in (0.0, 0.15):
        data = rng.normal(0.3, 1.0, 7)
        want = stats.permutation_test(
            (data,), lambda d, axis, trim=trim: stats.trim_mean(d, trim, axis=axis),
            permutation_type="samples", n_resamples=5000, vectorized=True,
        ).pvalue
        assert sign_flip_p(list(data), resamples=5000, trim=trim) == pytest.approx(want)
    many = rng.normal(0.05, 1.0, 60)
    want = stats.permutation_test(
        (many,), lambda d, axis: np.mean(d, axis=axis), permutation_type="samples",
        n_resamples=20000, vectorized=True, rng=np.random.default_rng(1),
    ).pvalue
    assert sign_flip_p(list(many), resamples=20000) == pytest.approx(want, abs=0.01)


def test_a_scenario_rows_p_and_change_are_one_statistic():
    # B faster by the mean of its trials, but B's median trial is the slower one: the row
    # reports the turn-paired mean (its change and its exact test alike), never the median.
    a = [{1: 1.0}, {1: 1.0}, {1: 1.0}, {1: 1.0}, {1: 1.0}]
    b = [{1: 1.1}, {1: 1.1}, {1: 1.1}, {1: 0.1}, {1: 0.1}]
    mean = turn_paired_difference(a, b, median=False)
    assert mean is not None and mean < 0 < turn_paired_difference(a, b)  # type: ignore[operator]
    # Every split's statistic, batched, agrees with the one-split function.
    assert trial_permutation_p(a, b) == trial_permutation_p(
        [{1: v} for v in (1.0,) * 5], [{1: v} for v in (1.1, 1.1, 1.1, 0.1, 0.1)])


def test_the_screen_null_is_the_noise_as_it_is_tails_and_all():
    # TTFT-like noise: a core and one trial in five ×3 or more slower. The p the screen reads
    # from pooled residuals matches the true tail of the statistic under that noise (brute
    # force); a normal reference of the same sd puts half as much beyond +1.6, and over 237
    # questions that is the difference between a false finding and none.
    rng = np.random.default_rng(5)

    def noise(shape: tuple[int, ...]) -> np.ndarray:
        tail = np.where(rng.random(shape) < 0.2, math.log(3) + rng.exponential(0.5, shape), 0.0)
        return rng.normal(0, 0.3, shape) + tail

    cells = noise((800, 5))
    residuals = ((cells - cells.mean(axis=1, keepdims=True)) * math.sqrt(5 / 4)).ravel()
    truth = np.abs(noise((200000, 5)).mean(axis=1) - noise((200000, 5)).mean(axis=1))
    for change in (0.5, 1.0, 1.6):
        got = residual_null_ps([change], ((5,), (5,)), residuals, draws=20000, seed=1)[0]
        assert got == pytest.approx(float(np.mean(truth >= change)), abs=0.004, rel=0.3)
    from scipy import stats

    normal = 2 * stats.norm.sf(1.6 / (residuals.std() * math.sqrt(0.4)))
    assert normal < 0.6 * float(np.mean(truth >= 1.6))  # about half the true tail


def test_bootstrap_rejects_bad_arguments():
    with pytest.raises(ValueError, match="confidence"):
        paired_cluster_bootstrap([1.0, 2.0], confidence=1.0)
    with pytest.raises(ValueError, match="resamples"):
        paired_cluster_bootstrap([1.0, 2.0], resamples=0)
    with pytest.raises(ValueError, match="at least 2 scenarios"):
        paired_cluster_bootstrap([1.0])
    with pytest.raises(ValueError, match="positive values"):
        scenario_differences([0.0], [1.0], relative=True)
    assert scenario_differences([2.0], [3.0], relative=False) == [1.0]


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


def test_smallest_p():
    assert smallest_p(5) == 0.0625 and smallest_p(6) == 0.03125 and smallest_p(0) == 1.0
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


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
    # 8 scenarios × 3 trials a side, paired; every turn ×1.5, so every scenario's ratio is 1.5.
    assert ttft.verdict is Change.SLOWER and (ttft.scenarios, ttft.n_a, ttft.n_b) == (8, 24, 24)
    assert ttft.change == pytest.approx(0.5) and ttft.ci_low == pytest.approx(0.5)
    assert ttft.p_value == pytest.approx(2 / 256)  # sign flips of 8 scenarios: exact
    assert ttft.p_adjusted is not None and ttft.p_adjusted < 0.05
    # The headline moved, so categories and scenarios are looked at; 4 scenarios a category
    # and 3 trials a scenario are too few to call, and the report says so.
    memory = metric(report, "ttft_s", "category", "memory")
    assert memory.verdict is Change.TOO_FEW and "at least 6 needed" in memory.note
    one = metric(report, "ttft_s", "scenario", "scenario_0")
    assert one.verdict is Change.TOO_FEW and "run more trials" in one.note
    assert metric(report, "tokens_per_s").verdict is Change.NO_CHANGE
    assert metric(report, "turn_wall_s").verdict is Change.NO_CHANGE
    index = metric(report, "index_s")
    assert index.verdict is Change.FASTER and index.change < -0.4

    passed = outcome(report, "passed")
    assert (passed.pairs, passed.a_only, passed.b_only) == (24, 10, 0)
    assert passed.p_value == pytest.approx(2 / 1024) and passed.verdict is Change.WORSE
    assert outcome(report, "checks_passed").verdict is Change.WORSE
    assert outcome(report, "completed").verdict is Change.NO_CHANGE
    # 5 of 8 scenarios lost score, 3 did not move: with 8 scenarios the sign-flip p is
    # 2 · 2^3 / 2^8 = 1/16, not enough to call (the paired outcomes above are, per trial).
    score = metric(report, "score")
    assert score.verdict is Change.NO_CHANGE and score.p_value == pytest.approx(1 / 16)

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
    assert ("time to first token (all scenarios, n = 8 scenario(s), 24 vs 24 trials): "
            "B slower +50.0% [+50.0%, +50.0%]") in found
    assert "passed (all scenarios, n = 24 pairs): B worse, 10 pair(s) lost and 0 gained" in found
    assert "decode speed" not in found and "(scenario " not in found


def test_an_identical_pair_shows_no_detectable_change():
    a, traces = planted("build-a", driver="6.10.5")
    report = driver_report(a, a, traces, traces)
    assert report.beyond_noise == []
    # 3 trials a side: a scenario's own test cannot go below p 0.1, so its rows say too few.
    assert all(d.verdict is (Change.TOO_FEW if d.scope == "scenario" else Change.NO_CHANGE)
               for d in report.speed + report.scores)
    assert all(o.verdict is Change.NO_CHANGE for o in report.outcomes)
    assert not any(r.differs for r in report.fingerprint)
    text = render_driver_md(report)
    # 8 scenarios: the smallest sign-flip p, 2/256, does not pass BH over the headline family,
    # so the report says no change could have been shown rather than giving a clean bill.
    assert "- no finding, and none was possible" in text


def test_a_tiny_run_says_n_is_too_small():
    one = [("only_scenario", "rag_quality")]
    a, _ = planted("a", driver="x", scenarios=one, trials=1, turns=1)
    b, _ = planted("b", driver="y", scenarios=one, trials=1, turns=1, ttft_factor=3.0,
                   failing={("only_scenario", 1)})
    report = driver_report(a, b)
    ttft = metric(report, "ttft_s")
    assert ttft.verdict is Change.TOO_FEW and "1 paired scenario(s); at least 6" in ttft.note
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
                    "## Setup: what differs", "## Speed: B vs A, 95% cluster-bootstrap",
                    "## Smallest detectable change", "## Run rules",
                    "### Per scenario", "## Quality: paired outcomes", "## Notes"):
        assert heading in text
    assert "| **hardware.amdgpu_driver** | 6.10.5 | 6.12.0 |" in text
    assert "| time to first token | all scenarios | 8 | 24 | 24 |" in text
    assert "with 3 trial(s) of 8 scenarios, no time to first token change of any size" in text
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


# --- run rules: device truth, warm-up, where speeds came from --------------------------------


def test_a_run_served_on_another_device_is_not_a_driver_comparison():
    a, _ = planted("a", driver="x")
    b, _ = planted("b", driver="y")
    b.config.served_on = "cpu"  # asked for rocm (config), the server said cpu
    with pytest.raises(DeviceMismatchError, match=r"run b asked for rocm but was served on cpu"
                       r".*--allow-device-mismatch"):
        driver_report(a, b)
    report = driver_report(a, b, allow_device_mismatch=True)
    assert (report.served_on_a, report.served_on_b) == ("rocm", "cpu")
    assert any("device mismatch allowed" in n for n in report.notes)
    assert driver_report(a, a).served_on_a == "rocm"  # nothing recorded: the requested device


def test_warmup_discards_the_first_runs_speeds_and_says_so():
    a, _ = planted("a", driver="x")
    b, _ = planted("b", driver="x")
    # B's first scenario run is slow (a cold cache): with the warm-up rule it is not compared.
    first = b.scenarios[0]
    for turn in first.turns:
        assert turn.performance is not None
        turn.performance.time_to_first_token_s = 50.0
    cold_report = driver_report(a, b)
    cold = metric(cold_report, "ttft_s", "scenario", "scenario_0")
    # The scenario's own row (its trials' mean, the statistic its test uses) carries the cold
    # trial; the headline's per-scenario change (the median trial per turn) does not.
    assert cold.mean_b is not None and cold.mean_b > 10 and cold.change is not None
    assert cold.change > 1 and metric(cold_report, "ttft_s").change == pytest.approx(0, abs=0.02)
    report = driver_report(a, b, warmup=1)
    assert report.discarded_b == ["scenario_0__trial1"] and report.warmup == 1
    assert metric(report, "ttft_s").n_b == 23
    warm = metric(report, "ttft_s", "scenario", "scenario_0")
    assert warm.mean_b is not None and warm.mean_b < 1
    assert any("first 1 scenario run(s) of each side" in r for r in report.rules)
    assert "## Run rules" in render_driver_md(report)
    with pytest.raises(ValueError, match="--warmup -1"):
        driver_report(a, b, warmup=-1)


def test_front_door_figures_are_compared_when_both_runs_have_them():
    a, _ = planted("a", driver="x")
    b, _ = planted("b", driver="x", ttft_factor=2.0)
    before = driver_report(a, b)
    assert before.speed_source == "gaia_turn_metrics"
    assert any("not metered at the LLM's front door" in n for n in before.notes)
    for card in (a, b):  # the first turn of every run metered at the front door, unchanged
        for row in card.scenarios:
            perf = row.turns[0].performance
            assert perf is not None
            perf.source = "front_door"
            perf.time_to_first_token_s = 0.5
    report = driver_report(a, b)
    assert report.speed_source == "front_door"
    assert metric(report, "ttft_s").verdict is Change.NO_CHANGE  # the 2× turns are not compared
    assert any(r.startswith("speed figures compared: front_door;") for r in report.rules)


def test_with_few_scenarios_each_scenario_is_a_headline_question():
    three = SCENARIOS[:3]
    a, _ = planted("a", driver="x", scenarios=three, trials=5)
    b, _ = planted("b", driver="y", scenarios=three, trials=5, ttft_factor=2.0)
    report = driver_report(a, b)
    overall = metric(report, "ttft_s")
    assert overall.verdict is Change.TOO_FEW and "3 paired scenario(s); at least 6" in overall.note
    # 5 trials a side, all of B's slower: exact permutation p = 2/252, then adjusted with the
    # other headline questions.
    one = metric(report, "ttft_s", "scenario", "scenario_0")
    assert one.p_value == pytest.approx(2 / 252) and one.verdict is Change.SLOWER
    assert "time to first token: B slower in 3 of 3 scenario(s)" in "\n".join(report.beyond_noise)
    # With 3 trials the same change cannot be told from noise, and the report says why.
    a3, _ = planted("a", driver="x", scenarios=three)
    b3, _ = planted("b", driver="y", scenarios=three, ttft_factor=2.0)
    small = metric(driver_report(a3, b3), "ttft_s", "scenario", "scenario_0")
    assert small.verdict is Change.TOO_FEW and "run more trials" in small.note


def test_compare_report_refuses_a_device_mismatch_with_one_line_and_exit_2(tmp_path):
    import subprocess
    import sys

    a, _ = planted("a", driver="x")
    b, _ = planted("b", driver="y")
    b.config.served_on = "cpu"
    for card in (a, b):
        (tmp_path / f"{card.run_id}.json").write_text(card.model_dump_json())

    def compare(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "runner.cli", "compare", "a.json", "b.json", "--report", *extra],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )

    refused = compare()
    output = refused.stdout + refused.stderr
    assert refused.returncode == 2 and "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "run b asked for rocm but was served on cpu" in errors[0], output
    allowed = compare("--allow-device-mismatch", "--warmup", "3")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert "device mismatch allowed" in allowed.stdout
    assert "the first 3 scenario run(s) of each side have their speed figures" in allowed.stdout


def _clock(card: Scorecard, start: datetime, every: timedelta, offset: int = 0,
           step: int = 1) -> None:
    """Record each row's start and end: row i starts at start + (offset + i·step)·every."""
    for i, row in enumerate(card.scenarios):
        row.started_at = start + (offset + i * step) * every
        row.ended_at = row.started_at + every * 0.9


def test_the_report_says_whether_a_and_b_were_alternated_in_time():
    a, _ = planted("a", driver="x")
    b, _ = planted("b", driver="y")
    # No recorded times (rows from before they were kept): nothing can be said, and a
    # finding is read as if back to back.
    assert driver_report(a, b).order_in_time == "unknown"
    # 24 scenario runs of 4 s each: A ran 09:00:00–09:01:36, B an hour later: back to back.
    _clock(a, WHEN, timedelta(seconds=4))
    _clock(b, WHEN + timedelta(hours=1), timedelta(seconds=4))
    report = driver_report(a, b)
    assert report.order_in_time == "back to back"
    line = next(r for r in report.rules if r.startswith("order in time"))
    assert "back to back, A first" in line and "not alternated" in line
    assert "A 2026-11-30 09:00:00–09:01:35 UTC, B 2026-11-30 10:00:00–10:01:35 UTC" in line
    assert any(r.startswith("run rule (in the MLPerf spirit)") for r in report.rules)
    assert line in render_driver_md(report)
    # B began a minute into A's 96 s (their spans overlap at the seam): still back to back.
    _clock(b, WHEN + timedelta(seconds=60), timedelta(seconds=4))
    assert driver_report(a, b).order_in_time == "back to back"
    # A and B took turns, run by run: alternated.
    _clock(a, WHEN, timedelta(seconds=4), step=2)
    _clock(b, WHEN, timedelta(seconds=4), offset=1, step=2)
    assert driver_report(a, b).order_in_time == "alternated"


def test_a_back_to_back_finding_is_marked_as_not_separable_from_drift():
    twenty = [(f"s{i}", "rag_quality") for i in range(20)]  # 8 could not show a change at all
    a, _ = planted("a", driver="x", scenarios=twenty)
    b, _ = planted("b", driver="y", ttft_factor=2.0, scenarios=twenty)
    _clock(a, WHEN, timedelta(seconds=4))
    _clock(b, WHEN + timedelta(hours=1), timedelta(seconds=4))
    report = driver_report(a, b)
    headline = next(f for f in report.beyond_noise if f.startswith("time to first token"))
    assert "not separable from a drift of the machine (runs back to back" in headline
    _clock(a, WHEN, timedelta(seconds=4), step=2)
    _clock(b, WHEN, timedelta(seconds=4), offset=1, step=2)
    alternated = driver_report(a, b)
    assert alternated.beyond_noise and not any("drift" in f for f in alternated.beyond_noise)


def back_to_back_with_an_a_a_pair() -> tuple[Scorecard, ...]:
    """A, then B an hour later with TTFT ×2 (20 scenarios), and an A/A pair 2 % apart."""
    twenty = [(f"s{i}", "rag_quality") for i in range(20)]
    a, _ = planted("a", driver="x", scenarios=twenty)
    b, _ = planted("b", driver="x", ttft_factor=2.0, scenarios=twenty)
    first, _ = planted("aa1", driver="x", scenarios=twenty)
    second, _ = planted("aa2", driver="x", ttft_factor=1.02, scenarios=twenty)
    _clock(a, WHEN, timedelta(seconds=4))
    _clock(b, WHEN + timedelta(hours=1), timedelta(seconds=4))
    return a, b, first, second


def test_an_a_a_pair_on_the_same_machine_bounds_the_drift_of_a_back_to_back_pair():
    a, b, first, second = back_to_back_with_an_a_a_pair()
    report = driver_report(a, b, aa=(first, second), power_simulations=0)
    headline = next(f for f in report.beyond_noise if f.startswith("time to first token"))
    # TTFT ×2 lies far beyond the ≤ 2 % the A/A pair moved: not the machine's drift alone.
    assert "beyond the drift the A/A pair aa1 / aa2 bounds" in headline
    assert "not separable" not in headline
    assert report.drift_bound is not None and "aa1 / aa2" in report.drift_bound
    # An A/A pair from other hardware bounds nothing.
    other, _ = planted("aa3", driver="y", scenarios=[(f"s{i}", "rag_quality") for i in range(20)])
    elsewhere = driver_report(a, b, aa=(other, second), power_simulations=0)
    assert elsewhere.drift_bound is None
    assert all("not separable" in f for f in elsewhere.beyond_noise)
    assert any("aa3 / aa2 ran on other hardware" in n for n in elsewhere.notes)


def test_the_setup_table_shows_the_differing_settings_and_counts_the_rest():
    a, _ = planted("a", driver="6.10.5")
    b, _ = planted("b", driver="6.12.0")
    report = driver_report(a, b)
    same = sum(not row.differs for row in report.fingerprint)
    assert same >= 5 and len(report.fingerprint) == same + 2  # the driver and the image differ
    md = render_driver_md(report)
    setup = md.split("## Setup: what differs")[1].split("\n## ")[0]
    assert "| **hardware.amdgpu_driver** | 6.10.5 | 6.12.0 |" in setup
    assert "| **images.llm** |" in setup
    assert "cpu_model" not in setup and f"{same} identical setting(s) not shown" in setup
    html = render_driver_html(report)
    assert "hardware.amdgpu_driver" in html and "cpu_model" not in html.split("<h2>Setup")[1]
    assert f"{same} identical setting(s) not shown" in html
    alike = driver_report(a, a)
    nothing = render_driver_md(alike).split("## Setup: what differs")[1].split("\n## ")[0]
    assert f"{len(alike.fingerprint)} identical setting(s) not shown (none differs)" in nothing
    assert "| setting |" not in nothing


def test_compare_aa_names_an_a_a_pair_that_lifts_the_drift_mark_and_refuses_a_lone_one(tmp_path):
    from typer.testing import CliRunner

    from runner.cli.app import app

    a, b, first, second = back_to_back_with_an_a_a_pair()
    for card in (a, b, first, second):
        (tmp_path / f"{card.run_id}.json").write_text(card.model_dump_json())
    paths = {name: str(tmp_path / f"{name}.json") for name in ("a", "b", "aa1", "aa2")}

    def compare(*extra: str) -> tuple[int, str]:
        result = CliRunner().invoke(app, ["compare", paths["a"], paths["b"], *extra])
        return result.exit_code, result.output

    code, out = compare("--report", "--aa", paths["aa1"], "--aa", paths["aa2"])
    assert code == 0, out
    assert "beyond the drift the A/A pair aa1 / aa2 bounds" in out
    code, out = compare("--report")  # the same pair of runs without the A/A: marked as drift
    assert code == 0 and "not separable from a drift of the machine" in out, out
    code, out = compare("--report", "--aa", paths["aa1"])
    assert code == 2 and "an A/A pair is two runs" in out and "Traceback" not in out, out
    code, out = compare("--aa", paths["aa1"], "--aa", paths["aa2"])
    assert code == 2 and "add --report or --html" in out, out


def test_up_to_twelve_pairs_the_sign_flip_test_is_exact_whatever_the_resamples():
    # 12 pairs all one way: the smallest p there is, 2/4096. A sample of 400 sign vectors
    # holds the all-plus one by chance about one time in ten, and then read 4/401.
    from runner.report._stats import sign_flip_p

    moved = [0.1 + 0.01 * i for i in range(12)]
    assert {sign_flip_p(moved, resamples=400, seed=seed) for seed in range(30)} == {2 / 4096}
    assert sign_flip_p(moved + [0.2], resamples=400, seed=0) > 2 / 8192  # 13: sampled again


def test_only_the_two_sides_of_one_ab_are_paired_by_block():
    from runner.report import RunConfig, Scorecard
    from runner.report._driver_samples import one_ab

    def side(ab_id: str, name: str) -> Scorecard:
        extra = {"ab": {"ab_id": ab_id, "side": name}}
        return Scorecard.model_construct(run_id=name, config=RunConfig(extra=extra), scenarios=[])

    plain = Scorecard.model_construct(run_id="p", config=RunConfig(), scenarios=[])
    assert one_ab(side("x", "A"), side("x", "B")) == "x"
    assert one_ab(side("x", "B"), side("x", "A")) == "x"  # compared the other way round
    assert one_ab(side("x", "A"), side("x", "A")) is None  # one side twice
    assert one_ab(side("x", "A"), side("y", "B")) is None  # two different A/Bs
    assert one_ab(side("x", "A"), plain) is None
