"""Statistics for telling a real difference between two runs from noise. Pure functions.

Why these two tools:
- speed (TTFT, tokens/s, wall times) is a continuous sample per turn whose distribution is
  skewed and unknown, so the interval comes from a *stratified percentile bootstrap*: each
  scenario is resampled within itself on each side (the suite's mix stays fixed) and the
  statistic recomputed. The RNG is seeded: the same inputs always give the same interval.
- quality on the same scenarios is *paired* (scenario s, trial i on build A and on build B), so
  the exact McNemar test asks whether the pairs that flipped lean one way more than a fair coin
  would: p = P(|X − d/2| ≥ |b − d/2|) for X ~ Binomial(d = b + c, 1/2).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from math import comb
from typing import NamedTuple

from runner.report._performance import percentile

Statistic = Callable[[float, float], float]
"""A comparison of two means: statistic(mean_a, mean_b)."""


class Interval(NamedTuple):
    estimate: float  # the statistic on the data as observed
    low: float
    high: float

    def excludes(self, value: float) -> bool:
        return value < self.low or value > self.high


def relative_change(mean_a: float, mean_b: float) -> float:
    """mean_b / mean_a − 1: +0.25 means B's values are 25 % larger. Needs mean_a > 0."""
    if mean_a <= 0:
        raise ValueError(f"relative change needs a positive baseline mean, got {mean_a}")
    return mean_b / mean_a - 1


def mean_difference(mean_a: float, mean_b: float) -> float:
    """mean_b − mean_a."""
    return mean_b - mean_a


def resampled_sums(values: Sequence[float], resamples: int, rng: random.Random) -> list[float]:
    """The sum of each of `resamples` resamples (with replacement, same size) of one stratum.

    Sums, not means, so strata combine into any pooled mean without drawing again.
    """
    n = len(values)
    return [sum(rng.choices(values, k=n)) for _ in range(resamples)]


def pooled_means(sums: Sequence[Sequence[float]], count: int) -> list[float]:
    """Per resample, the mean over several strata: Σ stratum sums / total number of values."""
    return [total / count for total in map(sum, zip(*sums, strict=True))]


def percentile_interval(estimate: float, draws: Sequence[float], confidence: float) -> Interval:
    """The central `confidence` share of the bootstrap draws around `estimate`."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence} must be between 0 and 1")
    tail = (1 - confidence) / 2 * 100
    low, high = percentile(draws, tail), percentile(draws, 100 - tail)
    if low is None or high is None:
        raise ValueError("a bootstrap interval needs at least one draw")
    return Interval(estimate, low, high)


def bootstrap_interval(
    groups_a: Sequence[Sequence[float]],
    groups_b: Sequence[Sequence[float]],
    statistic: Statistic,
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Percentile-bootstrap interval of statistic(mean A, mean B), resampling within each group.

    Groups are the strata (one per scenario, say); empty groups are ignored. Deterministic for a
    given seed.
    """
    if resamples < 1:
        raise ValueError(f"resamples {resamples} must be at least 1")
    a = [list(g) for g in groups_a if g]
    b = [list(g) for g in groups_b if g]
    if not a or not b:
        raise ValueError("bootstrap needs at least one value on each side")
    n_a, n_b = sum(map(len, a)), sum(map(len, b))
    estimate = statistic(sum(map(sum, a)) / n_a, sum(map(sum, b)) / n_b)
    rng = random.Random(seed)
    means_a = pooled_means([resampled_sums(g, resamples, rng) for g in a], n_a)
    means_b = pooled_means([resampled_sums(g, resamples, rng) for g in b], n_b)
    draws = [statistic(x, y) for x, y in zip(means_a, means_b, strict=True)]
    return percentile_interval(estimate, draws, confidence)


def binomial_tail(k: int, n: int) -> float:
    """P(X ≤ k) for X ~ Binomial(n, 1/2), exactly (integer arithmetic until the division)."""
    if n < 0 or k < 0:
        raise ValueError(f"binomial tail needs k, n ≥ 0, got k={k}, n={n}")
    return sum(comb(n, i) for i in range(min(k, n) + 1)) / (1 << n)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for b pairs that went A-yes/B-no and c that went A-no/B-yes.

    p = min(1, 2 · P(X ≤ min(b, c))), X ~ Binomial(b + c, 1/2); 1.0 when nothing flipped.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be ≥ 0, got b={b}, c={c}")
    if b + c == 0:
        return 1.0
    return min(1.0, 2 * binomial_tail(min(b, c), b + c))


def smallest_p(pairs: int) -> float:
    """The smallest two-sided McNemar p that `pairs` paired outcomes can give (all flip one way).

    When it is above the significance level, no result of that size can be called a change.
    """
    return 1.0 if pairs <= 0 else min(1.0, 2 * 0.5**pairs)
