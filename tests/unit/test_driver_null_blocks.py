"""The driver report on the two sides of one `trialbox ab`: paired block by block, null and
planted, on a machine that drifts 10 % between back-to-back runs, with the noise of the real
interleaved A/A kept in tests/fixtures/speed_noise/ (test_driver_null_interleaved's fit).

An A/B's schedule ran every scenario trial on A and on B in blocks side by side in time, so the
report pairs B's trial k with A's trial k (`block_changes`): a drift cancels inside each pair,
and 6 scenarios × 2 trials are 12 pairs, whose sign-flip test reaches 2/4096 — where 6 scenarios
compared as two separate runs can show no change at all (test_driver_null_drift). What is
checked, each through `driver_report` itself (rates printed with pytest -s):

- on the real kept A/A (6 × 3, 18 block pairs): no finding;
- simulated A/A at the n of the README's example (6 one-turn scenarios × 2 trials) and at the
  suite's (79 × 5): a finding in at most 5 % of pairs;
- a decode change of the size the report prints is found 70–90 % of the time, at 6 × 2 and at
  the suite's 79 × 5 (a too-large or too-small printed size fails);
- ×3 on every speed at 6 × 3, which two separate runs cannot show, is found, B slower.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np
from test_driver_null import PLANTED_RESAMPLES, RESAMPLES, SUITE_TURNS, in_parallel, run, suite_of
from test_driver_null_interleaved import INTERLEAVED, KEPT, SIDES

from runner.ab.schedule import FIRST
from runner.report import Change, driver_report, read_scorecard
from runner.report._driver_models import DriverReport
from runner.report._driver_power import SIMULATIONS

#: The README's A/B example: 6 one-turn scenarios × 2 trials.
SMALL = (1,) * 6
SMALL_TRIALS = 2
#: A linear drift of 10 % over one side's runs (as test_driver_null_drift), here per slot of
#: the A/B's schedule, which holds both sides' runs.
DRIFT_OVER_RUNS = math.log(1.10)


def abba_a(rank: int) -> int:
    # The A/B's own schedule (runner/ab/schedule.py): unit r takes slots 2r and 2r+1, the side
    # FIRST names for it in the first.
    return 2 * rank + (FIRST[rank % 4] != "A")


def abba_b(rank: int) -> int:
    return 2 * rank + (FIRST[rank % 4] != "B")


def _pair(seed: int, planted, turns, trials: int, power_simulations: int,
          resamples: int, index: int) -> DriverReport:
    rng = np.random.default_rng([seed, index])
    suite = suite_of(rng, turns, INTERLEAVED)
    drift = DRIFT_OVER_RUNS / (len(turns) * trials)
    a = run("a", rng, suite, INTERLEAVED, trials=trials, slot=abba_a, drift=drift, ab_side="A")
    b = run("b", rng, suite, INTERLEAVED, trials=trials, slot=abba_b, drift=drift, ab_side="B",
            planted=planted)
    return driver_report(a, b, resamples=resamples, seed=index,
                         power_simulations=power_simulations)


def ab_pairs(count: int, seed: int, *, planted=(1.0, 1.0, 1.0), turns=SMALL,
             trials: int = SMALL_TRIALS, power_simulations: int = 0,
             resamples: int = RESAMPLES) -> list[DriverReport]:
    return in_parallel(partial(_pair, seed, planted, turns, trials, power_simulations,
                               resamples), count)


def decode_slower(report: DriverReport) -> bool:
    return any(d.scope == "all" and d.metric == "tokens_per_s" and d.verdict is Change.SLOWER
               for d in report.speed)


def test_null_on_real_runs_the_kept_interleaved_aa_has_no_finding_paired_by_block():
    a, b = (read_scorecard(side / "scorecard.json") for side in SIDES)
    assert (KEPT / "ab.json").is_file()
    report = driver_report(a, b, power_simulations=0)
    headline = [d for d in report.speed if d.scope == "all" and d.metric != "index_s"]
    print("\nkept A/A, paired by block: " + "; ".join(
        f"{d.metric} {d.change:+.1%} p {d.p_adjusted:.2f}" for d in headline))
    assert headline and all(d.block_pairs == 18 for d in headline)
    assert not report.beyond_noise


def test_aa_at_6_scenarios_x_2_trials_shows_a_finding_in_at_most_5_percent():
    reports = ab_pairs(200, 3201)
    rate = sum(bool(r.beyond_noise) for r in reports) / len(reports)
    print(f"\none ab, A/A, 6 × 2, 10 % drift: a finding in {rate:.1%} of 200 pairs")
    assert all(r.order_in_time == "alternated" for r in reports)
    assert rate <= 0.05


def test_aa_at_the_suites_size_shows_a_finding_in_at_most_5_percent():
    reports = ab_pairs(40, 3202, turns=SUITE_TURNS, trials=5)
    rate = sum(bool(r.beyond_noise) for r in reports) / len(reports)
    print(f"\none ab, A/A, 79 × 5, 10 % drift: a finding in {rate:.1%} of 40 pairs")
    assert rate <= 0.05


def test_a_decode_change_of_the_printed_size_at_6_x_2_is_found_70_to_90_percent_of_the_time():
    # At 12 pairs each report's size rests on its own 12 changes, so it varies from report to
    # report (here ±13 % to ±44 %); the size a report typically prints — the median of 15 A/A
    # reports' — planted in 100 pairs must be found about 80 % of the time.
    reports = ab_pairs(15, 3203, power_simulations=SIMULATIONS, resamples=PLANTED_RESAMPLES)
    sizes = [next(d for d in r.detectable if d.metric == "tokens_per_s") for r in reports]
    assert all(d.block_pairs == 12 for d in sizes)
    printed = sorted(d.detectable for d in sizes if d.detectable is not None)
    assert len(printed) == len(sizes), [d.reason for d in sizes]
    size = float(np.median(printed))
    planted = ab_pairs(100, 3204, planted=(1.0, 1 / (1 + size), 1.0), resamples=PLANTED_RESAMPLES)
    found = sum(decode_slower(r) for r in planted) / len(planted)
    print(f"\none ab, 6 × 2: printed decode sizes ±{printed[0]:.0%} … ±{printed[-1]:.0%}, "
          f"median ±{size:.1%}; planted at the median: found in {found:.0%} of 100 pairs")
    assert 0.7 <= found <= 0.9


def test_a_decode_change_of_the_printed_size_at_the_suites_size_is_found_70_to_90_percent():
    # At 395 pairs the size hardly varies between reports (±3.2 … ±3.4 % over three): the
    # first report's size, planted in 40 pairs, is found about 80 % of the time.
    (first,) = ab_pairs(1, 3301, turns=SUITE_TURNS, trials=5, power_simulations=SIMULATIONS,
                        resamples=PLANTED_RESAMPLES)
    size = next(d for d in first.detectable if d.metric == "tokens_per_s")
    assert size.detectable is not None and size.block_pairs == 395, size
    planted = ab_pairs(40, 3302, turns=SUITE_TURNS, trials=5, resamples=PLANTED_RESAMPLES,
                       planted=(1.0, 1 / (1 + size.detectable), 1.0))
    found = sum(decode_slower(r) for r in planted) / len(planted)
    print(f"\none ab, 79 × 5: printed decode size ±{size.detectable:.1%}; planted: found in "
          f"{found:.0%} of 40 pairs")
    assert 0.7 <= found <= 0.9


def test_x3_on_every_speed_at_6_scenarios_is_found_when_paired_by_block():
    # Two separate runs of 6 scenarios cannot show this (test_driver_null_drift); the same
    # scenarios as one A/B can, and in the right direction.
    (report,) = ab_pairs(1, 3205, planted=(3.0, 1 / 3, 3.0), turns=(3,) * 6, trials=3)
    print(f"\none ab, ×3 at 6 × 3: {report.beyond_noise[:3]}")
    assert decode_slower(report)
    assert any(f.startswith("time to first token (all scenarios") and "B slower" in f
               for f in report.beyond_noise)
