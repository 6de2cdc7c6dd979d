"""The driver-build report under "nothing changed" and under a planted change of known size.

This file holds the simulation of runs on this machine's measured noise (used by
test_driver_null_drift.py, which adds time and a drifting machine and tests the A/A rate, a
planted 3 % decode change and the printed size's found-rate) and checks that the simulation
reads back as the measured runs did, and that a planted +5 % TTFT — below what this noise lets
5 trials see — is mostly missed while the report's printed size says so. Rates are printed
(pytest -s). The runs go through `driver_report` itself: the code under test is the report, not
a copy of its statistics.

Where the noise comes from (parameters, not the files, are kept here):
- an A/A pair on this machine, 2026-12-01, the running CPU stack (llm-cpu serving
  SmolLM2-135M-Instruct Q4_1 under GAIA's default name Gemma-4-E4B-it-GGUF, 2 slots), speed
  metered at the front door, twice back to back on a quiet machine (load average 2–4, nothing
  else using the LLM server), under `flock -x /tmp/trialbox-quiet.lock`:
  `trialbox run eval/scenarios -s forget_desk_extension -s store_and_recall_parking_bay
  -s superseded_meeting_room -s hotel_cap_follow_ups -s launch_delay_thread
  -s two_documents_recall --trials 3 --judge-provider none` (6 scenarios × 3 turns × 3 trials),
  runs 20261201-151101-f1b9 (15:11–15:14 UTC) and 20261201-151418-2c91 (15:14–15:18).
- `scripts/measure-speed-noise A B` on them (log scale; A / B):
  TTFT: turn effect 0.93 / 0.89, cell noise (trials within a scenario and turn) 0.76 / 0.65,
  robust 0.57 / 0.50, 22 % / 14 % of trials ×3 or more above their cell's median (the turn's
  prompt grows with the agent's earlier answers, whose length varies between trials, and
  llama.cpp's prompt cache holds more or less of it); the old pooled within-scenario sd,
  turn positions mixed, was 1.04 / 0.96.
  decode speed: turn effect 0.08 / 0.08, cell noise 0.12 / 0.10, no tail.
  turn wall time: turn effect 0.15 / 0.37, cell noise 0.66 / 0.66, 3 % / 6 % in a tail.
  A/A shift B − A: TTFT −0.12 (se 0.10), decode −0.01 (se 0.02), wall +0.15 (se 0.09): each
  within 1.6 se of zero, so no run-level shift can be told from the cell noise here; the
  simulation has none (Noise.run = 0), and the report's note on what intervals do not cover
  stands. `trialbox compare A B --report` on the pair: no finding beyond noise.
- the same pair measured earlier the same day under load (load average 5–21, other clients
  ahead in llama.cpp's queue: runs 20261201-134613-306a, 20261201-135537-ebe7) had about
  twice the TTFT noise (cell 1.34 / 1.41, 28–31 % tail) and decode cell noise 0.21 / 0.17:
  the report's minimum detectable TTFT change was ±32 % there against ±15 % here. A shared
  machine doubles what a driver comparison can see.
- the simulation's parameters (below) are fitted so that the same script reads the measured
  figures off simulated runs of the measured design (a test checks it).

What the measured noise allows, at the suite's size (79 scenarios, 120 turns) with 5 trials,
as the report prints it (simulated from its own test): decode speed ±2.8 %, TTFT ±15–16 %; a
planted +5 % TTFT is found in 5–12 % of pairs (+5 % would need about 50 trials per scenario).
Measured while choosing the report's statistics (the loaded noise; other seeds than the tests'; 200 A/A pairs,
100 planted pairs): per-scenario log ratio of means (the previous report): A/A 4.5 %, TTFT
+40 % found 7.5 %; paired by turn, mean trial: 2.5 %, 72 %; median trial: 4.5 %, 78 %; median
trial and 10 %-trimmed mean over scenarios (the report now): 4.0 %, 92 % (20 %-trimmed: 2.0 %,
94 %, decode −5 % found 72 % against 74 % at 10 %).
"""

from __future__ import annotations

import importlib.util
import math
import multiprocessing as mp
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from importlib.machinery import SourceFileLoader
from pathlib import Path
from typing import TypeVar

import numpy as np

from runner.records.status import Status
from runner.records.transcript import TurnPerformance
from runner.report import Change, RunConfig, ScenarioResult, Scorecard, TurnResult, driver_report
from runner.report._driver import detectable_text
from runner.report._driver_models import DetectableChange, DriverReport
from runner.report._driver_power import SIMULATIONS

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
_loader = SourceFileLoader("measure_speed_noise", str(ROOT / "scripts/measure-speed-noise"))
_spec = importlib.util.spec_from_loader(_loader.name, _loader)
assert _spec is not None
measure = importlib.util.module_from_spec(_spec)
_loader.exec_module(measure)  # the measuring script's functions read the simulated runs

PAIRS = 40
RESAMPLES = 400  # fewer than the report's 2000: p near 0.05 is resolved to ±0.01, enough here
#: A planted change must reach p < 0.05 / 6 (a lone change among 6 headline questions under
#: Benjamini–Hochberg): with 400 resamples a true p of 0.004 reads 0.0075 ± 0.004 and is often
#: lost (5 % slower decode: 68 % found with 400, 83 % with 2000, 60 pairs each); 1000 resolve
#: it well enough (printed-size TTFT 83 % found with 1000, 86 % with 2000) at half the time.
PLANTED_RESAMPLES = 1000


@dataclass(frozen=True)
class Noise:
    """One speed metric's spread, log scale, as scripts/measure-speed-noise splits it."""

    scenario: float  # sd between scenarios (cancels in the pairing)
    turn: float  # sd between turn positions within a scenario (fixed: cancels paired by turn)
    core: float  # sd of a trial around its (scenario, turn) cell: the noise that does not cancel
    tail_share: float  # share of trials that land far above the core (cache miss, a queue)
    tail_mean: float  # mean log excess of those beyond ×3 (exponential)
    run: float = 0.0  # sd of a whole run's shift (heat, load): moves every scenario alike
    # Log excess of the first turn of a scenario's first trial (sd `cold_sd`): under repeatable
    # decoding the prompt cache holds the previous trial's identical conversation for every
    # trial but the first, which follows another scenario's (measured: all 11 tails there).
    cold_start: float = 0.0
    cold_sd: float = 0.0


#: Fitted so that simulated runs of the measured design show the measured figures (below).
TTFT = Noise(scenario=0.0, turn=0.80, core=0.30, tail_share=0.20, tail_mean=0.50)
DECODE = Noise(scenario=0.11, turn=0.05, core=0.11, tail_share=0.0, tail_mean=0.0)
WALL = Noise(scenario=0.27, turn=0.0, core=0.45, tail_share=0.03, tail_mean=0.90)
MEASURED = (TTFT, DECODE, WALL)
METRICS = ("ttft_s", "tokens_per_s", "turn_wall_s")
BASE = np.log([0.2, 55.0, 5.0])  # typical values (s, tok/s, s): only their ratios matter

#: The suite's shape (ls eval/scenarios/*/*.yaml, 2026-12-01): 79 scenarios, 45 of one turn,
#: 27 of two, 7 of three.
SUITE_TURNS = (1,) * 45 + (2,) * 27 + (3,) * 7

TURN = TurnResult.model_construct(turn=1, performance=None)
START = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
ROW = ScenarioResult(id="s", status=Status.PASS)
PERF = TurnPerformance(wall_s=1.0, source="front_door")


@dataclass(frozen=True)
class Suite:
    """What stays the same between runs: each (scenario, turn)'s level, each scenario's pass rate."""

    levels: list[np.ndarray]  # per scenario: (turns, 3) log levels of ttft, tok/s, wall
    pass_rate: np.ndarray


def suite_of(rng: np.random.Generator, turns: tuple[int, ...], noise: tuple[Noise, ...]) -> Suite:
    levels = []
    for n in turns:
        scenario = np.array([x.scenario for x in noise]) * rng.standard_normal(3)
        turn = np.array([x.turn for x in noise]) * rng.standard_normal((n, 3))
        levels.append(BASE + scenario + turn)
    return Suite(levels, rng.uniform(0.2, 0.9, len(turns)))


def trial_noise(rng: np.random.Generator, shape: tuple[int, ...], noise: Noise) -> np.ndarray:
    """Log noise of single trials: the core, plus the tail's jumps (slow, never fast)."""
    core = noise.core * rng.standard_normal(shape)
    if noise.tail_share <= 0:
        return core
    jumps = rng.random(shape) < noise.tail_share
    excess = math.log(3) + rng.exponential(max(noise.tail_mean, 1e-9), shape)
    return core + np.where(jumps, excess, 0.0)


def run(
    run_id: str,
    rng: np.random.Generator,
    suite: Suite,
    noise: tuple[Noise, ...],
    *,
    trials: int,
    planted: tuple[float, float, float] = (1.0, 1.0, 1.0),
    slot: Callable[[int], int] = lambda rank: rank,
    drift: float = 0.0,
    only: frozenset[int] | None = None,
    ab_side: str | None = None,
    ab_sessions: int | None = None,
    trial_shift: Sequence[float] | None = None,
) -> Scorecard:
    """One simulated run of the suite, its speed figures metered at the front door; `planted`
    multiplies every turn's (ttft, tok/s, wall) (of the scenarios in `only`, when given).

    Time: trials run in rounds (every scenario's trial 1, then trial 2, ...); the scenario run
    of rank r takes the machine's time slot `slot(r)` (10 s each, recorded as the row's start
    and end), and the machine drifts by `drift` (log scale) per slot: slower, in every metric.
    `ab_side` ("A" or "B") records the run as that side of one `trialbox ab`, as ab's own
    scorecards do (config.extra.ab); `ab_sessions`, as an A/B run in that many sessions.
    `trial_shift[t]`: a slower machine by that much (log scale) in every metric for trial t+1
    of every scenario (a session's boot, in an A/B in sessions).
    """
    shift = np.array([x.run for x in noise]) * rng.standard_normal(3)
    slower = np.array([1.0, -1.0, 1.0])  # a slower machine: TTFT and wall up, tok/s down
    scenarios = len(suite.levels)
    rows = []
    for index, levels in enumerate(suite.levels):
        turns = len(levels)
        draws = np.stack(
            [trial_noise(rng, (trials, turns), x) for x in noise], axis=-1
        )
        draws[0, 0] += [x.cold_start + x.cold_sd * rng.standard_normal() if x.cold_start else 0.0
                        for x in noise]
        plant = np.log(planted) if only is None or index in only else np.zeros(3)
        slots = np.array([slot(trial * scenarios + index) for trial in range(trials)])
        machine = (drift * slots + (np.asarray(trial_shift) if trial_shift is not None else 0.0)
                   )[:, None, None] * slower
        values = np.exp(levels + shift + plant + draws + machine)  # (trials, turns, 3)
        passed = rng.random(trials) < suite.pass_rate[index]
        scores = np.clip(rng.normal(np.where(passed, 8.0, 4.0), 1.0), 0, 10)
        for trial in range(trials):
            rows.append(ROW.model_copy(update={
                "id": f"s{index:03d}",
                "category": f"c{index % 4}",
                "status": Status.PASS if passed[trial] else Status.FAIL,
                "score": float(scores[trial]),
                "trial": trial + 1,
                "started_at": START + timedelta(seconds=10 * int(slots[trial])),
                "ended_at": START + timedelta(seconds=10 * int(slots[trial]) + 9),
                "turns": [
                    TURN.model_copy(update={"turn": t + 1, "performance": PERF.model_copy(update={
                        "time_to_first_token_s": float(values[trial, t, 0]),
                        "tokens_per_s": float(values[trial, t, 1]),
                        "wall_s": float(values[trial, t, 2]),
                    })})
                    for t in range(turns)
                ],
            }))
    extra = ({"ab": {"ab_id": "simulated-ab", "side": ab_side, "sessions": ab_sessions}}
             if ab_side else {})
    return Scorecard.model_construct(
        run_id=run_id, config=RunConfig(trials=trials, device="cpu", extra=extra), scenarios=rows
    )


def in_parallel(job: Callable[[int], T], count: int) -> list[T]:
    """job(0..count-1) on this machine's two cores (forked workers: the simulated runs are
    built and reported in the worker, only the result comes back)."""
    if count < 4:
        return [job(i) for i in range(count)]
    with ProcessPoolExecutor(max_workers=2, mp_context=mp.get_context("fork")) as pool:
        return list(pool.map(job, range(count), chunksize=max(1, count // 8)))


def _pair(noise: tuple[Noise, ...], turns: tuple[int, ...], trials: int,
          planted: tuple[float, float, float], seed: int, resamples: int,
          pair: int) -> DriverReport:
    rng = np.random.default_rng([seed, pair])  # each pair its own stream, in any worker
    suite = suite_of(rng, turns, noise)
    a = run("a", rng, suite, noise, trials=trials)
    b = run("b", rng, suite, noise, trials=trials, planted=planted)
    # The printed size is simulated once (the first pair's); the rates need no size.
    return driver_report(a, b, resamples=resamples, seed=pair,
                         power_simulations=SIMULATIONS if pair == 0 else 0)


def rates(
    noise: tuple[Noise, ...], *, turns: tuple[int, ...] = SUITE_TURNS, trials: int = 5,
    planted: tuple[float, float, float] = (1.0, 1.0, 1.0), seed: int,
    pairs: int = PAIRS, resamples: int = RESAMPLES,
) -> tuple[float, dict[str, float], list[DetectableChange]]:
    """(share of pairs with any finding, per speed metric the share with it found slower over
    all scenarios, the first pair's minimum detectable changes)."""
    reports = in_parallel(partial(_pair, noise, turns, trials, planted, seed, resamples), pairs)
    slower = {m: sum(any(d.metric == m and d.scope == "all" and d.verdict is Change.SLOWER
                         for d in r.speed) for r in reports) / pairs for m in METRICS}
    return sum(bool(r.beyond_noise) for r in reports) / pairs, slower, reports[0].detectable


def aa_finding_rate(noise: tuple[Noise, ...], seed: int, label: str) -> float:
    """The share of simulated A/A pairs at the suite's size with any finding, printed with the
    sizes the first pair's report gives (pytest -s)."""
    false_rate, _, sizes = rates(noise, seed=seed)
    print(f"\n{label}, A/A: {false_rate:.1%} of {PAIRS} pairs show a finding beyond noise; "
          f"{'; '.join(detectable_text(d) for d in sizes)}")
    return false_rate


#: The measured run's design (6 scenarios × 3 turns × 3 trials) and what scripts/measure-speed-noise
#: read from it, averaged over the A/A pair: MEASURED_FIGURES[metric] = (turn_effect,
#: cell_noise, cell_noise_robust, tail_share). The spread between scenarios is not matched: it
#: cancels in any pairing, and 6 scenarios cannot pin it down.
MEASURED_FIGURES = {
    "ttft_s": (0.91, 0.70, 0.53, 0.18),
    "tokens_per_s": (0.08, 0.11, 0.085, 0.0),
    "turn_wall_s": (0.26, 0.66, 0.45, 0.04),
}
FIGURES = ("turn_effect", "cell_noise", "cell_noise_robust", "tail_share")


def figures_of_runs(folders: list[Path]) -> dict[str, tuple[float, ...]]:
    """What scripts/measure-speed-noise reads from kept run folders (FIGURES per metric, front
    door, no warm-up), averaged over the runs: the figures a simulation is held to."""
    cards = [measure.load(folder) for folder in folders]
    return {metric: tuple(float(v) for v in np.mean(
        [[measure.components(measure.cells_of(card, metric, source="front_door", warmup=0))[f]
          for f in FIGURES] for card in cards], axis=0)) for metric in METRICS}


def simulated_figures(
    runs: int = 40, seed: int = 1, noise: tuple[Noise, ...] = MEASURED
) -> dict[str, tuple[float, ...]]:
    """What the measuring script reads from simulated runs of the measured design."""
    rng = np.random.default_rng(seed)
    seen: dict[str, list[list[float]]] = {m: [] for m in METRICS}
    for _ in range(runs):
        card = run("x", rng, suite_of(rng, (3,) * 6, noise), noise, trials=3)
        for metric in METRICS:
            parts = measure.components(
                measure.cells_of(card, metric, source="front_door", warmup=0)
            )
            seen[metric].append([parts[f] for f in FIGURES])
    return {m: tuple(np.nanmean(np.array(v), axis=0)) for m, v in seen.items()}


def assert_simulation_reads_as(measured_figures: dict[str, tuple[float, ...]],
                               noise: tuple[Noise, ...]) -> None:
    """Read by the same script as the real runs, simulated runs show the measured spread
    (within what 6 scenarios × 3 trials can pin down)."""
    got = simulated_figures(noise=noise)
    for metric, measured in measured_figures.items():
        for name, want, have in zip(FIGURES, measured, got[metric], strict=True):
            assert abs(have - want) <= 0.25 * want + 0.03, (metric, name, want, have)


def test_the_simulation_has_the_measured_noise():
    # The parameters above are not guesses: the simulated runs read back as the measured ones.
    assert_simulation_reads_as(MEASURED_FIGURES, MEASURED)


# The A/A rate and the found-rate at the printed size are tested on a drifting machine, the
# harder case, in test_driver_null_drift.py (this file's simulation, with time added).


PLANTED_PAIRS = 60


def test_a_planted_5_percent_ttft_is_beyond_this_noise_and_the_report_says_so():
    # TTFT 5 % slower on every turn: its noise (a core of 0.30 per trial and 20 % of trials ×3
    # or more slower) hides it at the suite's size, and the report's minimum detectable change
    # says so before anyone runs the comparison.
    _, found, sizes = rates(MEASURED, planted=(1.05, 1.0, 1.0), seed=2006, pairs=10,
                            resamples=PLANTED_RESAMPLES)
    size = next(d for d in sizes if d.metric == "ttft_s")
    assert size.detectable is not None
    trials_needed = math.ceil(5 * (math.log1p(size.detectable) / math.log(1.05)) ** 2)
    print(f"\nplanted +5% TTFT: found in {found['ttft_s']:.0%} of 10 pairs "
          f"({detectable_text(size)}; +5% would need about {trials_needed} trials)")
    assert size.detectable > 0.05 and found["ttft_s"] < 0.5
