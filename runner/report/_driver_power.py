"""The smallest change the driver report finds, found by running the report's own test on
simulated runs. Pure functions.

Why simulate instead of a formula: a formula (t-quantiles on the bootstrap's standard error)
knows nothing of what the report really does with a headline question — a sign-flip test whose
smallest p is 2/2^n, a trimmed mean, and Benjamini–Hochberg over the other headline questions.
At 6 scenarios the sign-flip test cannot go below 2/64, and after the adjustment over the
headline family no lone metric can ever be flagged, while the formula printed "decode ±5.7 %
found 80 % of the time". So the size printed is the one *this report* finds POWER of the time:

- the noise is the run's own: its per-scenario (or per-pair) changes, centred and widened by
  √(n/(n−1)) (what centring takes away), drawn with replacement, each with a random sign
  (under "nothing changed" A and B are exchangeable within a scenario);
- a change δ is added to every scenario; the report's statistic (trimmed mean), its sign-flip
  p (`sign_flip_ps`, the report's own test) and its adjustment (BH among the family's other
  questions, whose p is uniform when they did not move) decide whether it is found, in the
  right direction;
- the share found rises with δ (the same draws for every δ); bisection finds where it crosses
  POWER. When even a change many times the noise is not found that often, no size is printed:
  the n cannot show a change.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats  # type: ignore[import-untyped]  # no scipy-stubs pinned yet

from runner.report._stats import exact_up_to, sign_flip_ps, smallest_reaching

POWER = 0.8  # the printed size is the change found this often
SIMULATIONS = 120  # simulated runs per size tried: a found share of 0.8 to ±0.04
#: Sign flips per simulated run, Monte Carlo above 2^n: fewer than the report's 2000 keeps the
#: report fast; a p near the BH cut-off (0.05 / 6) is resolved to about ±0.004.
FLIPS = 400
STEPS = 8  # bisection steps: the size to 1/256 of its bracket (~1 % of it)


def found_share(
    null: np.ndarray, delta: float, *, trim: float, others: np.ndarray, alpha: float,
    flips: int, seed: int,
) -> float:
    """The share of simulated runs (rows of `null`, per-scenario changes under no change) in
    which the report finds a planted change `delta` (log scale, > 0) in its direction."""
    planted = null + delta
    p = sign_flip_ps(planted, resamples=flips, seed=seed, trim=trim)
    family = np.column_stack([p, others]) if others.size else p[:, None]
    adjusted = stats.false_discovery_control(family, axis=1, method="bh")[:, 0]
    estimate = stats.trim_mean(planted, trim, axis=1) if trim else planted.mean(axis=1)
    return float(np.mean((adjusted < alpha) & (estimate > 0)))


def simulated_detectable(
    differences: Sequence[float],
    *,
    trim: float,
    family: int,
    alpha: float,
    resamples: int,
    seed: int = 0,
    simulations: int = SIMULATIONS,
    flips: int = FLIPS,
    power: float = POWER,
) -> float | None:
    """The change (log scale for a speed) the report finds `power` of the time at this n and
    this noise, as a headline question among `family`; None when no change is found that often.

    `resamples` is the report's: where its test is exact (2^n ≤ `exact_up_to(resamples)`), so
    is this one.
    """
    data = np.asarray(differences, dtype=float)
    n = len(data)
    if n < 2 or family < 1:
        return None
    rng = np.random.default_rng(seed)
    centre = stats.trim_mean(data, trim) if trim else data.mean()
    # Centred values spread less than the noise they come from (by (n−1)/n in variance): at
    # 12 A/B pairs the uncorrected size was found 73 % of the time, not 80 %.
    centred = (data - centre) * np.sqrt(n / (n - 1))
    null = centred[rng.integers(0, n, (simulations, n))] * rng.choice([-1.0, 1.0], (simulations, n))
    others = rng.random((simulations, family - 1))
    flips = 2**n if 2**n <= exact_up_to(resamples) else flips
    spread = float(np.std(centred, ddof=1)) or float(np.max(np.abs(data))) or 1.0

    def share(delta: float) -> float:
        return found_share(null, delta, trim=trim, others=others, alpha=alpha, flips=flips,
                           seed=seed)

    # A change 20 standard deviations of one scenario's change is beyond any noise: if even
    # that is not found `power` of the time, the n (its smallest p, the adjustment) is why.
    if share(20 * spread) < power:
        return None
    # The bracket starts from the normal approximation (so few steps are needed), widened
    # until its top is found often enough.
    z = stats.norm.ppf(1 - alpha / (2 * family)) + stats.norm.ppf(power)
    return float(smallest_reaching(share, power, first=2 * z * spread / np.sqrt(n),
                                   cap=20 * spread, steps=STEPS))
