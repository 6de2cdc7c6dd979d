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

from runner.report._driver_models import Change, DetectableChange, MetricDelta, OutcomeDelta
from runner.report._driver_samples import Metric, TrialValues, TurnCells
from runner.report._stats import (
    adjust_bh,
    detectable_change,
    paired_cluster_bootstrap,
    relative_change,
    scenario_differences,
    trial_permutation_p,
    trimmed_mean,
    turn_paired_difference,
)

NOT_TESTED = "not tested: the all-scenarios result did not move beyond noise"
#: Below this many paired scenarios no result over scenarios can be called: the sign-flip test's
#: smallest p, 2 / 2^n, is 0.0625 for 5 (and a bootstrap over so few has few distinct draws).
MIN_SCENARIOS = 6
ALPHA = 0.05
CONFIDENCE = 0.95
RESAMPLES = 2000
POWER = 0.8  # the minimum detectable change is the one found this often

#: A speed's per-scenario change is the mean over turns of the median trial's log ratio (True)
#: or of the mean trial's (False); see `turn_paired_difference`.
TURN_MEDIAN = True
#: A speed's change over scenarios is the trimmed mean of the scenarios' changes: the top and
#: bottom SPEED_TRIM of them left out (0 = the plain mean); see `paired_cluster_bootstrap`.
SPEED_TRIM = 0.1


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


def _smallest_permutation_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p a permutation test of n_a against n_b values can give."""
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


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
    cells: tuple[TurnCells, TurnCells] | None = None,
) -> MetricDelta:
    """The scope's estimate and unadjusted p; the verdict waits for the family's adjustment.

    With `cells` (a turn-metered speed) a scenario's difference is paired by turn
    (`turn_paired_difference`); without, it is the log ratio (or difference) of its means.

    Not `tested` (a drill-down under a headline within noise): the change is shown, no test
    is run and the verdict is no detectable change.
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
        trials_a, trials_b = a[name], b[name]
        floor = _smallest_permutation_p(len(trials_a), len(trials_b))
        turn_change = (
            turn_paired_difference(
                cells[0].get(name, {}), cells[1].get(name, {}), median=TURN_MEDIAN
            )
            if cells is not None and metric.relative else None
        )
        base.change = (
            math.expm1(turn_change) if turn_change is not None  # what the scopes above sum up
            else relative_change(means_a[0], means_b[0]) if metric.relative
            else means_b[0] - means_a[0]
        )
        if not tested:
            base.verdict, base.note = Change.NO_CHANGE, NOT_TESTED
            return base
        if floor > ALPHA:
            base.note = (
                f"{len(trials_a)} vs {len(trials_b)} trials: even the clearest split gives "
                f"p ≥ {floor:.2g}; run more trials"
            )
            return base
        if metric.relative:
            trials_a, trials_b = [math.log(v) for v in trials_a], [math.log(v) for v in trials_b]
        base.p_value = trial_permutation_p(
            trials_a, trials_b, resamples=resamples, seed=_seed(seed, metric.key, kind, name)
        )
        return base
    if not paired:
        base.note = "no scenario measured on both sides"
        return base
    differences = scenario_differences(means_a, means_b, relative=metric.relative)
    trim = SPEED_TRIM if metric.relative else 0.0
    if cells is not None and metric.relative:
        by_turn = [
            turn_paired_difference(cells[0].get(s, {}), cells[1].get(s, {}), median=TURN_MEDIAN)
            for s in paired
        ]
        differences = [d if t is None else t for d, t in zip(differences, by_turn, strict=True)]
    mean = trimmed_mean(differences, trim)
    base.change = math.expm1(mean) if metric.relative else mean
    if not tested:
        base.verdict, base.note = Change.NO_CHANGE, NOT_TESTED
        return base
    if len(paired) < MIN_SCENARIOS:
        base.note = f"{len(paired)} paired scenario(s); at least {MIN_SCENARIOS} needed"
        if len(paired) >= 2:  # still worth its noise: the minimum detectable change says how far
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


def detectable_changes(
    headline: Sequence[MetricDelta], *, tests: int, trials: int, confidence: float, alpha: float
) -> list[DetectableChange]:
    """The noise floor (the interval's half-width) and the change found POWER of the time.

    The second is sized for the adjusted test a lone change faces: when only one of `tests`
    headline questions moved, Benjamini–Hochberg asks it for p < alpha / tests.
    """
    sizes = []
    for d in headline:
        if d.standard_error is None:
            continue
        floor, _ = detectable_change(
            d.standard_error, d.scenarios, confidence=confidence, power=POWER
        )
        _, found = detectable_change(
            d.standard_error, d.scenarios, confidence=1 - alpha / max(tests, 1), power=POWER
        )
        shown = math.expm1 if d.relative else float
        sizes.append(DetectableChange(
            metric=d.metric, label=d.label, relative=d.relative, scenarios=d.scenarios,
            trials=trials, noise_floor=shown(floor), detectable=shown(found), power=POWER,
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
        moved = p < alpha and row.change is not None and row.change != 0
        row.verdict = (
            _direction(row.change, lower_is_better[row.metric])
            if moved and row.change is not None else Change.NO_CHANGE
        )
    for outcome, p in zip(asked, adjusted[len(tested):], strict=True):
        outcome.p_adjusted = p
        if p < alpha:
            outcome.verdict = Change.BETTER if outcome.b_only > outcome.a_only else Change.WORSE
        else:
            outcome.verdict = Change.NO_CHANGE
