"""Statistics for telling a real difference between two runs from noise. Pure functions.

The tools, and why:
- speed and judged score are compared *per scenario, paired*: a scenario's value on A and on B
  (the mean over its trials, each trial the mean over its turns) give one difference per
  scenario (log ratio for speeds, plain difference for scores). The scenario is the unit: its
  turns are one conversation and its trials share one prompt, so neither is an independent
  sample. `paired_cluster_bootstrap` resamples those per-scenario differences (scipy's
  percentile bootstrap), which keeps the mix fixed (each scenario weighs the same on A and B)
  and nests trials and turns inside the scenario they belong to.
- a speed's per-scenario difference is paired *by turn*: turn t of scenario s on B against
  turn t on A (`turn_paired_difference`), each side's cell summed up by the median of its
  trials' log values. Turn 1 and turn 3 of one conversation differ by prompt, not by chance:
  pairing by turn cancels that instead of averaging it in; the median keeps one prompt-cache
  miss (a TTFT many times the others) from moving a whole scenario. Over scenarios a speed's
  changes can be summed up by a trimmed mean (`trim`) for the same reason, one level up.
- one scenario on its own has only its trials: `trial_permutation_p` is the exact two-sample
  permutation test of A's trial means against B's (scipy), valid however few trials there are
  (with 3 a side it can never reach p < 0.1, and says so by its p).
- quality on the same scenarios is *paired* (scenario s, trial i on A and on B): the exact
  McNemar test asks whether the pairs that flipped lean one way more than a fair coin would
  (scipy's exact binomial test on the discordant pairs).
- many questions asked of one report: `adjust_bh` is the Benjamini–Hochberg step-up adjustment
  (scipy's false_discovery_control). Under "nothing changed" it also bounds the chance of any
  finding at alpha, which is what a null test checks.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from scipy import stats  # type: ignore[import-untyped]  # no scipy-stubs pinned yet


class ClusterTest(NamedTuple):
    """A paired comparison over scenarios: estimate, interval, p and the noise it rests on."""

    estimate: float  # mean per-scenario difference (log ratio for relative metrics)
    low: float
    high: float
    p_value: float  # two-sided sign-flip permutation p of "A and B are exchangeable"
    standard_error: float  # bootstrap standard error of the estimate
    scenarios: int  # paired scenarios the test rests on

    def excludes(self, value: float) -> bool:
        return value < self.low or value > self.high


def relative_change(mean_a: float, mean_b: float) -> float:
    """mean_b / mean_a − 1: +0.25 means B's values are 25 % larger. Needs mean_a > 0."""
    if mean_a <= 0:
        raise ValueError(f"relative change needs a positive baseline mean, got {mean_a}")
    return mean_b / mean_a - 1


def scenario_differences(
    a: Sequence[float], b: Sequence[float], *, relative: bool
) -> list[float]:
    """One paired difference per scenario: log(b/a) when relative (needs positive values)."""
    if len(a) != len(b):
        raise ValueError(f"paired scenarios need equal lengths, got {len(a)} and {len(b)}")
    if relative:
        if any(x <= 0 for x in (*a, *b)):
            raise ValueError("a relative change needs positive values on both sides")
        return [float(np.log(y / x)) for x, y in zip(a, b, strict=True)]
    return [y - x for x, y in zip(a, b, strict=True)]


def turn_paired_difference(
    turns_a: Mapping[int, Sequence[float]],
    turns_b: Mapping[int, Sequence[float]],
    *,
    median: bool = True,
) -> float | None:
    """One scenario's log change, paired by turn: the mean over the turns both sides measured
    of median(log B's trials) − median(log A's trials) (their means when not `median`). None
    when no turn is on both sides.

    Values must be positive (a speed). The median of a turn's trials, not their mean: a TTFT
    has heavy tails (a prompt-cache miss costs many times a hit), and one tail value in a mean
    moves the scenario's difference by its full size. On this machine's measured noise the
    median found TTFT +40 % in 78 % of simulated pairs where the mean found 72 %, the A/A
    false-finding share within 5 % for both (tests/unit/test_driver_null.py).
    """
    common = sorted(turns_a.keys() & turns_b.keys())
    # Plain Python: a report computes this for every scenario and scope, on 1–10 values each,
    # where numpy's per-call overhead is most of the cost.
    centre = statistics.median if median else statistics.fmean
    diffs = [
        centre([math.log(v) for v in turns_b[t]]) - centre([math.log(v) for v in turns_a[t]])
        for t in common
        if turns_a[t] and turns_b[t]
    ]
    return statistics.fmean(diffs) if diffs else None


def paired_cluster_bootstrap(
    differences: Sequence[float],
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    trim: float = 0.0,
) -> ClusterTest:
    """Percentile-bootstrap interval of the mean per-scenario difference, and its p.

    Scenarios are drawn with replacement (a scenario brings its trials and turns with it).
    The p is not read off the bootstrap: with tens of scenarios a percentile interval is a
    little too narrow, and a null test of the report saw 8 % of A/A pairs with a finding. It
    comes from the paired sign-flip permutation test instead (`sign_flip_p`), which is exact
    when nothing changed (A and B exchangeable within each scenario). Deterministic for a seed.
    """
    if resamples < 1:
        raise ValueError(f"resamples {resamples} must be at least 1")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence} must be between 0 and 1")
    if len(differences) < 2:
        raise ValueError("a bootstrap over scenarios needs at least 2 scenarios")
    data = np.asarray(differences, dtype=float)
    centre = _centre(trim)
    estimate = float(centre(data, axis=0))
    if np.all(data == data[0]):
        # Every scenario moved by exactly the same amount: no resample can differ, and the
        # sign flips still say how often so many scenarios would all lean one way by chance.
        p = 1.0 if estimate == 0 else sign_flip_p(
            differences, resamples=resamples, seed=seed, trim=trim
        )
        return ClusterTest(estimate, estimate, estimate, p, 0.0, len(data))
    result = stats.bootstrap(
        (data,),
        centre,
        n_resamples=resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return ClusterTest(
        estimate,
        float(result.confidence_interval.low),
        float(result.confidence_interval.high),
        sign_flip_p(differences, resamples=resamples, seed=seed, trim=trim),
        float(result.standard_error),
        len(data),
    )


def _centre(trim: float) -> Callable[..., Any]:
    """The statistic over scenarios: the mean, or the mean of the middle 1 − 2·trim of them."""
    if not 0 <= trim < 0.5:
        raise ValueError(f"trim {trim} must be at least 0 and below 0.5")
    if trim == 0:
        return np.mean
    return lambda d, axis: stats.trim_mean(d, trim, axis=axis)


def trimmed_mean(values: Sequence[float], trim: float) -> float:
    """The mean of the middle 1 − 2·trim of the values (the plain mean when trim is 0)."""
    return float(_centre(trim)(np.asarray(values, dtype=float), axis=0))


def sign_flip_p(
    differences: Sequence[float], *, resamples: int = 2000, seed: int = 0, trim: float = 0.0
) -> float:
    """Two-sided paired permutation p: each scenario's A and B swapped (its sign flipped).

    Exact when 2^n ≤ resamples, Monte Carlo (with scipy's +1 correction) otherwise. Any
    statistic of the flipped differences keeps the test exact: `trim` picks the trimmed mean.
    """
    centre = _centre(trim)
    result = stats.permutation_test(
        (np.asarray(differences, dtype=float),),
        lambda d, axis: centre(d, axis=axis),
        permutation_type="samples",
        alternative="two-sided",
        n_resamples=resamples,
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return float(result.pvalue)


def trial_permutation_p(
    trials_a: Sequence[float], trials_b: Sequence[float], *, resamples: int = 2000, seed: int = 0
) -> float:
    """Two-sided permutation p for "A's and B's trial means come from one distribution".

    Exact (every split enumerated) when there are at most `resamples` splits, as with 5 trials
    a side (252); otherwise Monte Carlo with the seed.
    """
    if len(trials_a) < 1 or len(trials_b) < 1:
        raise ValueError("a permutation test needs at least one trial on each side")
    result = stats.permutation_test(
        (np.asarray(trials_a, dtype=float), np.asarray(trials_b, dtype=float)),
        lambda x, y, axis: np.mean(y, axis=axis) - np.mean(x, axis=axis),
        permutation_type="independent",
        alternative="two-sided",
        n_resamples=resamples,
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return float(result.pvalue)


def adjust_bh(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (compare each with alpha), in the same order."""
    if not p_values:
        return []
    return [float(p) for p in stats.false_discovery_control(list(p_values), method="bh")]


def detectable_change(
    standard_error: float, scenarios: int, *, confidence: float = 0.95, power: float = 0.8
) -> tuple[float, float]:
    """For a test over `scenarios` with this standard error: (noise floor, change found often).

    The noise floor is the interval's half-width: a true change smaller than it can never be
    told from noise. The second is the change the test finds `power` of the time:
    (t₁₋α/₂ + t_power) · SE on n − 1 degrees of freedom, with the bootstrap's SE scaled by
    √(n / (n − 1)) (a bootstrap over n clusters underestimates it by that much).
    """
    if scenarios < 2:
        raise ValueError("a detectable change needs at least 2 scenarios")
    df = scenarios - 1
    se = standard_error * (scenarios / df) ** 0.5
    t_alpha = float(stats.t.ppf(1 - (1 - confidence) / 2, df))
    t_power = float(stats.t.ppf(power, df))
    return t_alpha * se, (t_alpha + t_power) * se


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for b pairs that went A-yes/B-no and c that went A-no/B-yes.

    p = min(1, 2 · P(X ≤ min(b, c))), X ~ Binomial(b + c, 1/2); 1.0 when nothing flipped.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be ≥ 0, got b={b}, c={c}")
    if b + c == 0:
        return 1.0
    return float(stats.binomtest(min(b, c), b + c, 0.5, alternative="two-sided").pvalue)


def smallest_p(pairs: int) -> float:
    """The smallest two-sided McNemar p that `pairs` paired outcomes can give (all flip one way).

    When it is above the significance level, no result of that size can be called a change.
    """
    return 1.0 if pairs <= 0 else min(1.0, 2 * 0.5**pairs)
