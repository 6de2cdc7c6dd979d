"""The driver-build report's null and planted tests under repeatable decoding (the second profile).

`trialbox run --repeatable-decoding` has the LLM's front door force greedy decoding and one seed
on every sandbox's chat requests, so trials repeat the same conversation and a turn's prompt is
the same in every trial. The simulation is test_driver_null's; only the noise differs, fitted to
runs measured in this mode (the sampled profile there keeps its own figures).

The mode as it ships (greedy, one seed, llama.cpp's prompt cache off), measured on the running
CPU stack under `/tmp/brief/quiet` (exclusive hold, load average 2.0-3.0), the command below:
run 20261201-180746-6623 (18:07-18:12 UTC). Every trial of a scenario had the same prompt and
answer token counts, turn by turn. `scripts/measure-speed-noise`: TTFT turn effect 0.61, cell
noise 0.083, robust 0.041, no tail (TTFT is now the prefill of the whole prompt, 0.5-2.7 s);
decode cell noise 0.068, robust 0.034; turn wall 0.052, robust 0.028 (fitted to these). Its A/A
partner 20261201-181841-4dda (18:18-18:23): TTFT 0.090 / 0.051, decode 0.064, wall 0.047;
shift B - A TTFT +0.02 (0.8 se), decode -0.10 and wall +0.09 (7.6 se each: the machine, not
modelled, as below); `compare --report`: no finding, TTFT ±5.8 % detectable at 6 x 3.

The first version (prompt cache kept, `WITH_CACHE`), measured as a pair:

Where the noise comes from: the running CPU stack (llm-cpu serving SmolLM2-135M-Instruct Q4_1
under GAIA's default name, 2 slots), speed metered at the front door, twice back to back under
`/tmp/brief/quiet` (exclusive hold; load average 2.2-4.3, nothing else on the LLM server):
`trialbox run eval/scenarios -s forget_desk_extension -s store_and_recall_parking_bay
-s superseded_meeting_room -s hotel_cap_follow_ups -s launch_delay_thread -s two_documents_recall
--trials 3 --judge-provider none --repeatable-decoding`, runs 20261201-170604-f393 (17:06-17:09
UTC) and 20261201-171056-0b38 (17:10-17:14).

- In both runs every trial of a scenario had the same prompt and answer token counts, turn by
  turn (6 scenarios × 3 turns × 6 trials); sampled, the pair 20261201-151101-f1b9 / -151418-2c91
  had 3 different sequences in the 3 trials of every scenario.
- `scripts/measure-speed-noise A B` (log scale; A / B):
  TTFT: turn effect 0.86 / 0.80, cell noise 0.50 / 0.54, robust 0.26 / 0.25, 14 % / 17 % of
  trials ×3 or more above their cell's median: every one of them (5 / 6) the first turn of a
  scenario's first trial, which follows another scenario's conversation in llama.cpp's prompt
  cache, where every later trial follows the same conversation (`Noise.cold_start`). Sampled,
  the same pair had cell noise 0.65-0.76 and robust 0.50-0.57, with the tail anywhere.
  decode speed: turn effect 0.07 / 0.10, cell noise 0.04 / 0.08, no tail.
  turn wall time: turn effect 0.41 / 0.41, cell noise 0.04 / 0.07 (sampled: 0.66): the same
  answers take the same time.
  A/A shift B − A: TTFT +0.02 (0.4 se); decode −0.09 (×0.92, 4.1 se) and wall +0.09 (×1.09,
  5.2 se): B ran slower as a whole. With cell noise this small a run-level drift of the machine
  shows, and no interval over scenarios covers it (the report's note says so; alternating A and
  B is the cure). The simulation has none (`Noise.run` 0), as the sampled profile.
- `trialbox compare A B --report` on the pair: no finding beyond noise; smallest detectable
  change with 6 scenarios × 3 trials: TTFT ±29.5 % (sampled: ±40 %), decode ±21.7 %, wall
  ±15.2 %, each found 80 % of the time.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from test_driver_null import (
    FIGURES,
    PLANTED_RESAMPLES,
    Noise,
    aa_finding_rate,
    assert_simulation_reads_as,
    figures_of_runs,
    rates,
)

from runner.report._driver import detectable_text

#: Fitted so that simulated runs of the measured design read as the kept run (below): the mode
#: as it ships (greedy, one seed, prompt cache off), run 20261204-224620-1ba5. The first fit,
#: to run 20261201-180746-6623 (not kept), had cores of 0.075, 0.062 and 0.048: the machine was
#: quieter that day, and the figures could not be read again.
TTFT = Noise(scenario=0.18, turn=0.58, core=0.14, tail_share=0.0, tail_mean=0.0)
DECODE = Noise(scenario=0.06, turn=0.06, core=0.095, tail_share=0.0, tail_mean=0.0)
WALL = Noise(scenario=0.32, turn=0.27, core=0.10, tail_share=0.0, tail_mean=0.0)
REPEATABLE = (TTFT, DECODE, WALL)

#: A single `trialbox run --repeatable-decoding` of the measured design, kept as test data
#: (its scorecard.json cut to what speed is read from, tests/fixtures/speed_noise/run-*): the
#: noise above must read as what scripts/measure-speed-noise reads from it, so the figures the
#: simulation is held to come from a run, never copied from one.
KEPT_RUN = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "speed_noise").glob("run-*"))


def kept_figures() -> dict[str, tuple[float, ...]]:
    (folder,) = KEPT_RUN
    return figures_of_runs([folder])


#: The first version of the mode kept llama.cpp's prompt cache (greedy and one seed only), fitted
#: to the pair 20261201-170604-f393 / -171056-0b38: its tail sat on each scenario's first trial.
#: Kept to show what turning the cache off bought: +5 % TTFT found in ~72 % of pairs with 5 trials.
WITH_CACHE = (
    Noise(scenario=0.0, turn=0.80, core=0.17, tail_share=0.0, tail_mean=0.0, cold_start=1.5,
          cold_sd=0.25),
    Noise(scenario=0.05, turn=0.075, core=0.062, tail_share=0.0, tail_mean=0.0),
    Noise(scenario=0.20, turn=0.42, core=0.052, tail_share=0.0, tail_mean=0.0),
)
WITH_CACHE_FIGURES = {
    "ttft_s": (0.83, 0.52, 0.256, 0.153),
    "tokens_per_s": (0.085, 0.063, 0.048, 0.0),
    "turn_wall_s": (0.41, 0.054, 0.044, 0.0),
}

PLANTED_PAIRS = 10


def test_the_simulation_has_the_measured_repeatable_noise():
    assert len(KEPT_RUN) == 1, "the kept run folder (tests/fixtures/speed_noise/run-*)"
    measured = kept_figures()
    print(f"\nkept run ({KEPT_RUN[0].name}): " + "; ".join(
        f"{m} " + " ".join(f"{name} {v:.3f}" for name, v in zip(FIGURES, values, strict=True))
        for m, values in measured.items()))
    assert_simulation_reads_as(measured, REPEATABLE)
    assert_simulation_reads_as(WITH_CACHE_FIGURES, WITH_CACHE)


def test_a_a_pairs_under_repeatable_decoding_show_a_finding_in_at_most_5_percent():
    assert aa_finding_rate(REPEATABLE, seed=1818, label="repeatable decoding") <= 0.05


def test_a_planted_5_percent_ttft_with_5_trials_is_found_4_times_in_5():
    # The suite's size (79 scenarios, 120 turns), 5 trials: sampled, +5 % TTFT is found in 12 %
    # of pairs (test_driver_null); with the prompt cache kept, ~72 %; as the mode ships, here.
    _, found, sizes = rates(REPEATABLE, planted=(1.05, 1.0, 1.0), seed=1819,
                            pairs=PLANTED_PAIRS, resamples=PLANTED_RESAMPLES)
    size = next(d for d in sizes if d.metric == "ttft_s")
    print(f"\nrepeatable decoding, planted +5% TTFT, 5 trials: found in {found['ttft_s']:.0%} of "
          f"{PLANTED_PAIRS} pairs ({detectable_text(size)})")
    assert found["ttft_s"] >= 0.80 and size.detectable is not None
    assert math.isfinite(size.detectable)


def test_a_repeatable_run_is_not_compared_with_a_sampled_one():
    import pytest
    from test_driver_null import SUITE_TURNS, run, suite_of

    from runner.report._driver import driver_report
    from runner.report._driver_models import DecodingMismatchError

    rng = np.random.default_rng(5)
    suite = suite_of(rng, SUITE_TURNS[:8], REPEATABLE)
    sampled = run("a", rng, suite, REPEATABLE, trials=2)  # no decoding recorded: sampled
    repeatable = run("b", rng, suite, REPEATABLE, trials=2)
    repeatable.config.extra["decoding"] = "repeatable (greedy, seed 1234)"
    with pytest.raises(DecodingMismatchError, match="run b decoded repeatably"):
        driver_report(sampled, repeatable, resamples=50)
    both = run("c", rng, suite, REPEATABLE, trials=2)
    both.config.extra["decoding"] = "repeatable (greedy, seed 1234)"
    rows = {r.key: r for r in driver_report(both, repeatable, resamples=50).fingerprint}
    assert rows["decoding"].a == rows["decoding"].b and not rows["decoding"].differs
