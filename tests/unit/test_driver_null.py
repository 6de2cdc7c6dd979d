"""The driver-build report under "nothing changed" and under a planted change of known size.

Simulated A/A pairs (the same distribution on both sides) must show a finding "beyond noise"
— any speed or quality finding at any scope — in at most 5 % of pairs; a planted +5 % on every
turn's TTFT must be found in at least 80 % of pairs. Both rates are printed (pytest -s) and the
test fails on either bound. The runs go through `driver_report` itself: the code under test is
the report, not a copy of its statistics.

Where the noise comes from (parameters, not the files, are kept here):
- GAIA-REPORTED: a real run on this machine, `trialbox run --category personality --trials 3`
  (run 20261201-110230-f7b8, 3 scenarios × 3 trials, llm-cpu SmolLM2-135M, GAIA's
  turn_metrics), first run dropped as warm-up: the pooled within-scenario standard deviation
  of log(value) per turn was TTFT 0.98, tokens/s 0.20, turn wall 0.74; pass rate and score
  spread as a PASS/FAIL coin per scenario.
- FRONT-DOOR: 36 streamed requests straight to the same llm-cpu container (time to the first
  streamed token and decode rate as a client sees them, the front door's view), 3 prompts,
  first of each dropped, on this 2-core machine while other test suites ran: pooled log sd
  TTFT 0.47, tokens/s 0.89, wall 0.72.
Scenario means differ (log sd 0.5 between scenarios): the pairing must cancel them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runner.report import Change, RunConfig, ScenarioResult, Scorecard, TurnResult, driver_report
from runner.report._driver import detectable_text
from runner.status import Status
from runner.transcript import TurnPerformance

PAIRS = 200
RESAMPLES = 400  # fewer than the report's 2000: p near 0.05 is resolved to ±0.01, enough here
# (the planted tests use 1000: a lone change must reach p < 0.05 / 6 under Benjamini–Hochberg)


@dataclass(frozen=True)
class Noise:
    ttft: float  # log sd per turn
    tokens_per_s: float
    wall: float


GAIA_REPORTED = Noise(ttft=0.98, tokens_per_s=0.20, wall=0.74)
FRONT_DOOR = Noise(ttft=0.47, tokens_per_s=0.89, wall=0.72)


# Built once and copied (no validation): 200 pairs of runs must build in a few seconds.
TURN = TurnResult(turn=1, performance=TurnPerformance(wall_s=1.0, source="front_door"))
ROW = ScenarioResult(id="s", status=Status.PASS)


def run(
    run_id: str,
    rng: np.random.Generator,
    suite: np.ndarray,
    noise: Noise,
    *,
    trials: int,
    turns: int,
    ttft_factor: float = 1.0,
) -> Scorecard:
    """One simulated run of the suite: `suite` holds each scenario's (ttft, tok/s, wall, pass)."""
    rows = []
    perf = TURN.performance
    assert perf is not None
    for index, (ttft, speed, wall, pass_rate) in enumerate(suite):
        draws = np.exp(rng.standard_normal((trials, turns, 3)) * [noise.ttft, noise.tokens_per_s,
                                                                   noise.wall])
        passed = rng.random(trials) < pass_rate
        scores = np.clip(rng.normal(np.where(passed, 8.0, 4.0), 1.0), 0, 10)
        for trial in range(trials):
            rows.append(ROW.model_copy(update={
                "id": f"s{index:03d}",
                "category": f"c{index % 4}",
                "status": Status.PASS if passed[trial] else Status.FAIL,
                "score": float(scores[trial]),
                "trial": trial + 1,
                "turns": [
                    TURN.model_copy(update={"turn": t + 1, "performance": perf.model_copy(update={
                        "time_to_first_token_s": ttft * ttft_factor * draws[trial, t, 0],
                        "tokens_per_s": speed * draws[trial, t, 1],
                        "wall_s": wall * draws[trial, t, 2],
                    })})
                    for t in range(turns)
                ],
            }))
    return Scorecard.model_construct(
        run_id=run_id, config=RunConfig(trials=trials, device="cpu"), scenarios=rows
    )


def suite_of(rng: np.random.Generator, scenarios: int) -> np.ndarray:
    spread = np.exp(0.5 * rng.standard_normal((scenarios, 3)))
    base = np.array([0.3, 60.0, 5.0]) * spread
    return np.column_stack([base, rng.uniform(0.2, 0.9, scenarios)])


def rate_of_findings(
    noise: Noise, *, scenarios: int, trials: int, turns: int, ttft_factor: float, seed: int,
    pairs: int = PAIRS, resamples: int = RESAMPLES,
) -> tuple[float, float]:
    """(share of pairs with any finding, share with TTFT found slower over all scenarios)."""
    rng = np.random.default_rng(seed)
    any_finding = ttft_found = 0
    for pair in range(pairs):
        suite = suite_of(rng, scenarios)
        a = run("a", rng, suite, noise, trials=trials, turns=turns)
        b = run("b", rng, suite, noise, trials=trials, turns=turns, ttft_factor=ttft_factor)
        report = driver_report(a, b, resamples=resamples, seed=pair)
        any_finding += bool(report.beyond_noise)
        ttft = next(d for d in report.speed if d.metric == "ttft_s" and d.scope == "all")
        ttft_found += ttft.verdict is Change.SLOWER
    return any_finding / pairs, ttft_found / pairs


def test_a_a_pairs_show_a_finding_in_at_most_5_percent():
    # The null design: 25 scenarios × 3 trials × 3 turns, GAIA-reported noise.
    false_rate, _ = rate_of_findings(
        GAIA_REPORTED, scenarios=25, trials=3, turns=3, ttft_factor=1.0, seed=18
    )
    print(f"\nA/A: {false_rate:.1%} of {PAIRS} pairs show a finding beyond noise")
    assert false_rate <= 0.05


#: The suite's size (59 scenarios, 3 turns) with 5 trials, front-door noise.
DESIGN = {"scenarios": 59, "trials": 5, "turns": 3}
PLANTED_PAIRS = 100


def test_a_planted_change_of_the_printed_detectable_size_is_found_4_times_in_5():
    # The size the report prints rests on one run's noise estimate (±9 % for 59 scenarios):
    # plant the median of what 10 A/A reports of this design print.
    rng = np.random.default_rng(0)
    sizes = []
    for _ in range(10):
        suite = suite_of(rng, DESIGN["scenarios"])
        a, b = (run(x, rng, suite, FRONT_DOOR, trials=5, turns=3) for x in "ab")
        sizes.append(next(d for d in driver_report(a, b).detectable if d.metric == "ttft_s"))
    size = sorted(sizes, key=lambda d: d.detectable)[len(sizes) // 2]
    print(f"\n{detectable_text(size)}")
    _, at_size = rate_of_findings(
        FRONT_DOOR, **DESIGN, ttft_factor=1 + size.detectable, seed=5, pairs=PLANTED_PAIRS,
        resamples=1000,
    )
    _, at_5 = rate_of_findings(
        FRONT_DOOR, **DESIGN, ttft_factor=1.05, seed=6, pairs=PLANTED_PAIRS, resamples=1000
    )
    print(f"planted +{size.detectable:.1%} TTFT: found in {at_size:.0%} of {PLANTED_PAIRS} "
          f"pairs; planted +5%: found in {at_5:.0%}")
    # 100 pairs measure a true 80 % as 80 ± 8 %: 0.75 leaves room for this test's own
    # sampling error, not the report's.
    assert at_size >= 0.75
    # A smaller change is found less often: the printed size is what decides.
    assert (at_5 <= at_size) == (size.detectable >= 0.05)
