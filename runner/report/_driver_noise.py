"""The driver report's tests: a metric's change over a scope, and which changes are beyond noise.

The statistics themselves are in runner/report/_stats.py; this module sets them up as the
driver report asks its questions (see runner/report/_driver.py) and decides each verdict.
"""

from __future__ import annotations

import math
import statistics
import zlib
from collections.abc import Sequence
from typing import TypedDict

import numpy as np

from runner.report._driver_models import Change, DetectableChange, MetricDelta, OutcomeDelta
from runner.report._driver_power import POWER, simulated_detectable
from runner.report._driver_samples import Metric, TrialTurns, TrialUnits, TrialValues
from runner.report._stats import (
    adjust_bh,
    exact_up_to,
    paired_cluster_bootstrap,
    pooled_residuals,
    residual_null_ps,
    scenario_differences,
    smallest_split_p,
    trial_permutation_p,
    trimmed_mean,
    turn_matrix,
    turn_paired_difference,
)

NOT_TESTED = "not tested: the all-scenarios result did not move beyond noise"
#: Below this many paired scenarios no result over scenarios can be called: the sign-flip test's
#: smallest p, 2 / 2^n, is 0.0625 for 5 (and a bootstrap over so few has few distinct draws).
MIN_SCENARIOS = 6
ALPHA = 0.05
#: The shares of ALPHA the headline family and the screen over single scenarios spend: their
#: sum bounds the chance of any finding when nothing changed (Bonferroni over the two). They
#: leave 0.2 of ALPHA unspent: simulated A/A pairs on the measured noise showed 4–7 % with
#: all of it spent (0.9 + 0.1), the scenarios' tails and the Monte Carlo p's floor at 1/(R+1)
#: making the nominal level a close call.
HEADLINE_SHARE = 0.7
SCREEN_SHARE = 0.1
#: A screen finding also needs its own trials' exact test below this: with 5 trials a side that
#: is B's trials all beyond A's (2/252 = 0.008), which the screen's own share of alpha is too
#: small to ask of so few trials.
SCREEN_OWN_P = 0.01
#: Simulated scenarios per design in the screen's null: its p goes down to 1/(NULL_DRAWS + 1),
#: below BH's 0.005 · 7/237 for a change confined to 7 of 79 scenarios in 3 speeds.
NULL_DRAWS = 20000
CONFIDENCE = 0.95
RESAMPLES = 2000

#: A speed's per-scenario change over scenarios is the mean over turns of the median trial's
#: log ratio (True) or of the mean trial's (False); see `turn_paired_difference`.
TURN_MEDIAN = True
#: A speed's change over scenarios is the trimmed mean of the scenarios' changes: the top and
#: bottom SPEED_TRIM of them left out (0 = the plain mean); see `paired_cluster_bootstrap`.
SPEED_TRIM = 0.1
#: One scenario's own row is tested by the turn-paired *mean* of its trials' logs: with 5
#: trials a side the median's exact test cannot go below 12/252 (many splits share a median),
#: the mean's goes to 2/252. The row's change is that same statistic, so its p and its
#: direction never disagree.
SCENARIO_MEDIAN = False


def trim_of(metric: Metric) -> float:
    """The share trimmed off each end of a metric's per-scenario changes (0: the mean)."""
    return SPEED_TRIM if metric.relative and metric.tailed else 0.0


def headline_alpha(alpha: float) -> float:
    return alpha * HEADLINE_SHARE


def screen_alpha(alpha: float) -> float:
    return alpha * SCREEN_SHARE


class Knobs(TypedDict):
    """The bootstrap settings every test of one report shares."""

    resamples: int
    confidence: float
    seed: int


def _direction(change: float, lower_is_better: bool | None) -> Change:
    up = change > 0
    if lower_is_better is None:  # a score: higher is better
        return Change.BETTER if up else Change.WORSE
    return Change.SLOWER if up == lower_is_better else Change.FASTER


def _seed(seed: int, *parts: str) -> int:
    # Each test draws from its own stream, so adding a scope never moves another's interval.
    return seed * 2**32 + zlib.crc32("/".join(parts).encode())


def metric_delta(
    metric: Metric,
    scope: tuple[str, str, list[str]],
    a: TrialValues,
    b: TrialValues,
    *,
    resamples: int,
    confidence: float,
    seed: int,
    tested: bool = True,
    trials: tuple[TrialTurns, TrialTurns] | None = None,
    own_test: bool = True,
    units: tuple[TrialUnits, TrialUnits] | None = None,
) -> MetricDelta:
    """The scope's estimate and unadjusted p; the verdict waits for the family's adjustment.

    With `trials` (a turn-metered speed) a scenario's difference is paired by turn
    (`turn_paired_difference`); without, it is the log ratio (or difference) of its means.
    With `units` (the two sides of one `trialbox ab`) a scope over scenarios is paired by
    scenario trial instead (`block_changes`).

    Not `tested` (a drill-down under a headline within noise): the change is shown, no test
    is run and the verdict is no detectable change. Not `own_test` (a scenario row the screen
    tests): its trials' exact test is left for the rows the screen finds (`screen_rows`).
    """
    kind, name, ids = scope
    paired = [s for s in ids if a.get(s) and b.get(s)]
    means_a = [statistics.fmean(a[s]) for s in paired]
    means_b = [statistics.fmean(b[s]) for s in paired]
    base = MetricDelta(
        metric=metric.key,
        label=metric.label,
        unit=metric.unit,
        relative=metric.relative,
        scope=kind,
        name=name,
        scenarios=len(paired),
        n_a=sum(len(a[s]) for s in paired),
        n_b=sum(len(b[s]) for s in paired),
        mean_a=statistics.fmean(means_a) if paired else None,
        mean_b=statistics.fmean(means_b) if paired else None,
        verdict=Change.TOO_FEW,
    )
    if kind == "scenario":
        if not paired:
            base.note = "not measured on both sides"
            return base
        trials_a, trials_b = _trials_of(name, a, b, trials, metric)
        floor = smallest_split_p(len(trials_a), len(trials_b))
        if metric.relative:
            turn_change = turn_paired_difference(trials_a, trials_b, median=SCENARIO_MEDIAN)
            base.change = math.expm1(turn_change) if turn_change is not None else None
        else:
            base.change = means_b[0] - means_a[0]
        if not tested:
            base.verdict, base.note = Change.NO_CHANGE, NOT_TESTED
            return base
        if floor > ALPHA or not metric.relative:
            base.note = (
                f"{len(trials_a)} vs {len(trials_b)} trials: even the clearest split gives "
                f"p ≥ {floor:.2g}; run more trials"
            ) if metric.relative else "a score is tested over scenarios, not within one"
            return base
        if not own_test:
            base.verdict = Change.NO_CHANGE  # testable; the screen decides
            return base
        base.p_value = trial_permutation_p(
            trials_a, trials_b, resamples=resamples, seed=_seed(seed, metric.key, kind, name),
            median=SCENARIO_MEDIAN,
        )
        return base
    if not paired:
        base.note = "no scenario measured on both sides"
        return base
    differences = headline_changes(metric, paired, a, b, trials, units)
    if units is not None:
        base.block_pairs = len(differences)
    trim = trim_of(metric)
    if not differences:
        base.note = "no scenario trial measured on both sides"
        return base
    mean = trimmed_mean(differences, trim)
    base.change = math.expm1(mean) if metric.relative else mean
    if not tested:
        base.verdict, base.note = Change.NO_CHANGE, NOT_TESTED
        return base
    if len(differences) < MIN_SCENARIOS:
        base.note = (f"{len(differences)} A/B block pair(s); at least {MIN_SCENARIOS} needed"
                     if base.block_pairs is not None else
                     f"{len(paired)} paired scenario(s); at least {MIN_SCENARIOS} needed")
        if len(differences) >= 2:  # still worth its noise: the detectable change says how far
            base.standard_error = paired_cluster_bootstrap(
                differences, resamples=resamples, confidence=confidence,
                seed=_seed(seed, metric.key, kind, name), trim=trim,
            ).standard_error
        return base
    test = paired_cluster_bootstrap(
        differences, resamples=resamples, confidence=confidence,
        seed=_seed(seed, metric.key, kind, name), trim=trim,
    )
    shown = math.expm1 if metric.relative else float
    base.change, base.ci_low, base.ci_high = (shown(v) for v in test[:3])
    base.p_value = test.p_value
    base.standard_error = test.standard_error
    return base


def _trials_of(
    name: str, a: TrialValues, b: TrialValues, trials: tuple[TrialTurns, TrialTurns] | None,
    metric: Metric,
) -> tuple[list[dict[int, float]], list[dict[int, float]]]:
    """One scenario's trials on each side, each trial its turns (one pseudo-turn without)."""
    if trials is not None and metric.relative and trials[0].get(name) and trials[1].get(name):
        return trials[0][name], trials[1][name]
    return [{1: v} for v in a[name]], [{1: v} for v in b[name]]


def scenario_changes(
    metric: Metric, paired: Sequence[str], a: TrialValues, b: TrialValues,
    trials: tuple[TrialTurns, TrialTurns] | None,
) -> list[float]:
    """One change per paired scenario, the values the headline sums up: a speed's paired by
    turn (the median trial of each turn, log scale) when its turns are known, else the log
    ratio (or the difference) of the scenario's means."""
    means_a = [statistics.fmean(a[s]) for s in paired]
    means_b = [statistics.fmean(b[s]) for s in paired]
    differences = scenario_differences(means_a, means_b, relative=metric.relative)
    if trials is None or not metric.relative:
        return differences
    by_turn = [
        turn_paired_difference(trials[0].get(s, []), trials[1].get(s, []),
                               median=TURN_MEDIAN and metric.tailed)
        for s in paired
    ]
    return [d if t is None else t for d, t in zip(differences, by_turn, strict=True)]


def block_changes(paired: Sequence[str], units_a: TrialUnits, units_b: TrialUnits) -> list[float]:
    """One change per scenario trial run on both sides of one `trialbox ab`: B's trial against
    A's trial of the same number, which the schedule ran in the block beside it (log scale,
    the mean over the turns both measured).

    Why pair by block and not by scenario: the schedule put the two runs of each trial next to
    each other in time, so a drift of the machine cancels inside every pair, and with the suite
    fixed each pair is a replicate: 6 scenarios × 2 trials give 12 pairs, whose sign-flip test
    goes down to 2/4096, where 6 scenarios stop at 2/64 — which the adjustment over the
    headline questions never lets pass. Under "nothing changed" A and B are exchangeable
    within a pair (the schedule gives each side the first place equally often), which is what
    the sign-flip test needs. The claim is about this suite's scenarios, not others'.
    """
    changes = []
    for sid in paired:
        side_a, side_b = units_a.get(sid, {}), units_b.get(sid, {})
        for trial in sorted(side_a.keys() & side_b.keys()):
            change = turn_paired_difference([side_a[trial]], [side_b[trial]], median=False)
            if change is not None:
                changes.append(change)
    return changes


def headline_changes(
    metric: Metric, paired: Sequence[str], a: TrialValues, b: TrialValues,
    trials: tuple[TrialTurns, TrialTurns] | None, units: tuple[TrialUnits, TrialUnits] | None,
) -> list[float]:
    """The values a result over scenarios sums up and tests: per block pair for a turn-metered
    speed of one `trialbox ab` (`units` given: `block_changes`), else per scenario
    (`scenario_changes`)."""
    if units is not None:
        return block_changes(paired, *units)
    return scenario_changes(metric, paired, a, b, trials)


def screen_rows(
    rows: Sequence[MetricDelta], trials: dict[str, tuple[TrialTurns, TrialTurns]],
    lower_is_better: dict[str, bool | None], alpha: float, *, resamples: int, seed: int,
) -> None:
    """The screen over single scenarios: every scenario row of a turn-metered speed, tested
    against the noise pooled over all scenarios (`residual_null_ps`: its tails as measured),
    Benjamini–Hochberg over all of them together at the screen's share of alpha. A row is a
    finding only when its own trials agree (their exact test below SCREEN_OWN_P; with 5 trials
    a side, only B's trials all beyond A's): the pooled noise assumes scenarios alike in noise
    and turns independent, its own trials assume nothing."""
    asked = []
    residuals = {key: _residuals(*sides) for key, sides in trials.items()}
    by_design: dict[tuple[str, tuple[tuple[int, ...], tuple[int, ...]]], list[MetricDelta]] = {}
    for row in rows:
        if row.metric not in trials or row.change is None or row.verdict is Change.TOO_FEW:
            continue
        side_a, side_b = trials[row.metric][0][row.name], trials[row.metric][1][row.name]
        floor = smallest_split_p(len(side_a), len(side_b))
        if floor >= SCREEN_OWN_P:
            row.verdict = Change.TOO_FEW
            row.note = (f"{len(side_a)} vs {len(side_b)} trials: its own trials' exact test "
                        f"cannot go below {floor:.2g}, the screen needs < {SCREEN_OWN_P:g}")
            continue
        matrix = turn_matrix(side_a, side_b)
        counts = (tuple(int(c) for c in (~np.isnan(matrix[:len(side_a)])).sum(axis=0)),
                  tuple(int(c) for c in (~np.isnan(matrix[len(side_a):])).sum(axis=0)))
        by_design.setdefault((row.metric, counts), []).append(row)
    for (metric, counts), group in by_design.items():
        ps = residual_null_ps([math.log1p(r.change or 0.0) for r in group], counts,
                              residuals[metric], draws=NULL_DRAWS,
                              seed=_seed(seed, metric, "screen", str(counts)))
        for row, p in zip(group, ps, strict=True):
            row.p_value = p
            asked.append(row)
    adjusted = adjust_bh([row.p_value for row in asked if row.p_value is not None])
    for row, p in zip(asked, adjusted, strict=True):
        row.p_adjusted = p
        row.verdict = Change.NO_CHANGE
        if p >= screen_alpha(alpha) or not row.change:
            continue
        side_a, side_b = trials[row.metric][0][row.name], trials[row.metric][1][row.name]
        own = trial_permutation_p(side_a, side_b, resamples=resamples,
                                  seed=_seed(seed, row.metric, "screen", row.name),
                                  median=SCENARIO_MEDIAN)
        row.note = f"own trials' exact p = {own:.3g}"
        if own < SCREEN_OWN_P:
            row.verdict = _direction(row.change, lower_is_better[row.metric])


def _residuals(a: TrialTurns, b: TrialTurns) -> np.ndarray:
    """Every trial's log value around its (scenario, turn, side) cell's mean, over both runs."""
    cells: dict[tuple[str, int, str], list[float]] = {}
    for side, trials in (("a", a), ("b", b)):
        for sid, rows in trials.items():
            for trial in rows:
                for turn, value in trial.items():
                    cells.setdefault((sid, turn, side), []).append(math.log(value))
    return pooled_residuals(list(cells.values()))


def detectable_changes(
    headline: Sequence[MetricDelta], changes: dict[str, list[float]],
    trims: dict[str, float], *, family: int,
    trials: int, alpha: float, resamples: int, seed: int, simulations: int,
) -> list[DetectableChange]:
    """Per headline speed, the change this report finds POWER of the time (simulated: its own
    test, its adjustment among `family` questions, its n and its run's noise), or why none."""
    sizes = []
    for d in headline:
        if not d.relative or d.metric not in changes or len(changes[d.metric]) < 2:
            continue
        size = None
        n = len(changes[d.metric])
        what = "A/B block pairs" if d.block_pairs is not None else "paired scenarios"
        if n < MIN_SCENARIOS:
            over = "them" if d.block_pairs is not None else "scenarios"
            why = f"{n} {what}: below {MIN_SCENARIOS} no result over {over} is tested"
        elif simulations <= 0:
            why = "not simulated"
        else:
            size = simulated_detectable(
                changes[d.metric], trim=trims[d.metric], family=family, alpha=headline_alpha(alpha),
                resamples=resamples, seed=_seed(seed, d.metric, "detectable"),
                simulations=simulations,
            )
            why = "" if size is not None else (
                f"{n} {what} cannot show any change: the sign-flip test's "
                f"smallest p, 2/2^{n}, does not pass the adjustment over "
                f"{family} headline questions even for a change many times the noise"
                if 2 ** n <= exact_up_to(resamples) else
                "no change is found that often at this noise"
            )
        floor = (d.ci_high - d.ci_low) / 2 if d.ci_low is not None and d.ci_high is not None \
            else None
        sizes.append(DetectableChange(
            metric=d.metric, label=d.label, relative=d.relative, scenarios=d.scenarios,
            trials=trials, block_pairs=d.block_pairs, noise_floor=floor,
            detectable=math.expm1(size) if size is not None else None, power=POWER, reason=why,
        ))
    return sizes


def decide(
    rows: Sequence[MetricDelta],
    lower_is_better: dict[str, bool | None],
    alpha: float,
    outcomes: Sequence[OutcomeDelta] = (),
) -> None:
    """Benjamini–Hochberg over one family (metric rows that were tested, and outcomes that could
    show a change); each gets its adjusted p and its verdict."""
    tested = [r for r in rows if r.p_value is not None]
    asked = [o for o in outcomes if o.verdict is not Change.TOO_FEW]
    p_values = [r.p_value for r in tested if r.p_value is not None] + [o.p_value for o in asked]
    adjusted = adjust_bh(p_values)
    for row, p in zip(tested, adjusted[: len(tested)], strict=True):
        row.p_adjusted = p
        moved = p < headline_alpha(alpha) and row.change is not None and row.change != 0
        row.verdict = (
            _direction(row.change, lower_is_better[row.metric])
            if moved and row.change is not None else Change.NO_CHANGE
        )
    for outcome, p in zip(asked, adjusted[len(tested):], strict=True):
        outcome.p_adjusted = p
        if p < headline_alpha(alpha):
            outcome.verdict = Change.BETTER if outcome.b_only > outcome.a_only else Change.WORSE
        else:
            outcome.verdict = Change.NO_CHANGE
