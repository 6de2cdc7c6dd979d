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
  permutation test of its turn-paired change (trials relabelled, each keeping its turns), so
  the p and the direction come from one statistic; valid however few trials there are (with
  3 a side it can never reach p < 0.1, and says so by its p). A screen over many scenarios
  needs more than 5 trials' exact test can give (2/252 against BH's 0.05 · 7/79):
  `residual_null_ps` measures a scenario's change against the noise of all scenarios.
- quality on the same scenarios is *paired* (scenario s, trial i on A and on B): the exact
  McNemar test asks whether the pairs that flipped lean one way more than a fair coin would
  (scipy's exact binomial test on the discordant pairs).
- many questions asked of one report: `adjust_bh` is the Benjamini–Hochberg step-up adjustment
  (scipy's false_discovery_control). Under "nothing changed" it also bounds the chance of any
  finding at alpha, which is what a null test checks.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
import warnings
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


def _trimmed_means(data: np.ndarray, trim: float) -> np.ndarray:
    """trimmed_mean along the last axis of many rows at once (one partition, no full sort):
    the power simulation asks it of hundreds of thousands of flipped rows."""
    n = data.shape[-1]
    cut = int(trim * n)  # scipy's trim_mean cuts the same whole number from each end
    if cut == 0:
        return np.asarray(data.mean(axis=-1), dtype=float)
    parted = np.partition(data, (cut, n - cut - 1), axis=-1)
    return np.asarray(parted[..., cut:n - cut].mean(axis=-1), dtype=float)


def _two_sided(observed: np.ndarray, null: np.ndarray, exact: bool) -> np.ndarray:
    """scipy.stats.permutation_test's two-sided p: twice the smaller tail, the observed value
    counted within a relative tolerance (so a tie by rounding is a tie), Monte Carlo with +1."""
    tolerance = 1e-14 * np.maximum(np.abs(observed), 1.0)[..., None]
    less = (null <= observed[..., None] + tolerance).sum(axis=-1)
    greater = (null >= observed[..., None] - tolerance).sum(axis=-1)
    count = null.shape[-1]
    if exact:
        tails = np.minimum(less, greater) / count
    else:
        tails = (np.minimum(less, greater) + 1) / (count + 1)
    return np.asarray(np.minimum(1.0, 2 * tails), dtype=float)


#: Up to this many sign vectors the sign-flip test enumerates them all, whatever `resamples`:
#: 12 pairs (an A/B of 6 scenarios × 2 trials) are 4096 vectors, cheap to enumerate, and a
#: sample of them holds the all-plus vector by chance (10 % of samples of 400), which sets the
#: p of a change that moved every pair at 4/401 instead of 2/4096.
EXACT_FLIPS = 4096


def exact_up_to(resamples: int) -> int:
    """The most sign vectors the test enumerates (beyond: a Monte Carlo sample of them)."""
    return max(resamples, EXACT_FLIPS)


def _sign_flips(n: int, resamples: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """Every one of the 2^n sign vectors when there are at most `exact_up_to(resamples)`,
    else a sample of `resamples`."""
    if 2**n <= exact_up_to(resamples):
        bits = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
        return (2 * bits - 1).astype(float), True
    return rng.choice([-1.0, 1.0], size=(resamples, n)), False


def sign_flip_ps(
    rows: np.ndarray, *, resamples: int = 2000, seed: int = 0, trim: float = 0.0
) -> np.ndarray:
    """`sign_flip_p` of every row of a (runs, scenarios) array at once, the same flips for all
    rows (the power simulation asks it of hundreds of simulated runs)."""
    data = np.atleast_2d(np.asarray(rows, dtype=float))
    flips, exact = _sign_flips(data.shape[-1], resamples, np.random.default_rng(seed))
    _centre(trim)  # the same check of trim as every other statistic here
    observed = _trimmed_means(data, trim)
    null = _trimmed_means(data[:, None, :] * flips[None, :, :], trim)
    return _two_sided(observed, null, exact)


def sign_flip_p(
    differences: Sequence[float], *, resamples: int = 2000, seed: int = 0, trim: float = 0.0
) -> float:
    """Two-sided paired permutation p: each scenario's A and B swapped (its sign flipped).

    Exact when 2^n ≤ `exact_up_to(resamples)`, Monte Carlo (with scipy's +1 correction)
    otherwise. Any
    statistic of the flipped differences keeps the test exact: `trim` picks the trimmed mean.
    It is scipy.stats.permutation_test's definition (a unit test holds the two equal), written
    out vectorised so the power simulation can run the very same test on many runs at once.
    """
    return float(sign_flip_ps(np.asarray(differences, dtype=float)[None, :],
                              resamples=resamples, seed=seed, trim=trim)[0])


def turn_matrix(
    trials_a: Sequence[Mapping[int, float]], trials_b: Sequence[Mapping[int, float]]
) -> np.ndarray:
    """One scenario's trials as rows (A's first, then B's) and its turns as columns, log
    values, NaN where a trial did not measure a turn."""
    turns = sorted({t for trial in (*trials_a, *trials_b) for t in trial})
    rows = [[math.log(trial[t]) if t in trial else math.nan for t in turns]
            for trial in (*trials_a, *trials_b)]
    return np.asarray(rows, dtype=float).reshape(len(rows), len(turns))


def _turn_paired(matrix: np.ndarray, on_b: np.ndarray, median: bool) -> np.ndarray:
    """The turn-paired change of each split (rows of `on_b`, True = the trial is B's): per turn
    median (or mean) of B's trials minus A's, then the mean over the turns both sides have."""
    centre = np.nanmedian if median else np.nanmean
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a turn no trial of a side measured
        b = centre(np.where(on_b[:, :, None], matrix[None], np.nan), axis=1)
        a = centre(np.where(~on_b[:, :, None], matrix[None], np.nan), axis=1)
        return np.asarray(np.nanmean(b - a, axis=-1), dtype=float)


def turn_paired_difference(
    turns_a: Mapping[int, Sequence[float]] | Sequence[Mapping[int, float]],
    turns_b: Mapping[int, Sequence[float]] | Sequence[Mapping[int, float]],
    *,
    median: bool = True,
) -> float | None:
    """One scenario's log change, paired by turn: the mean over the turns both sides measured
    of median(log B's trials) − median(log A's trials) (their means when not `median`). None
    when no turn is on both sides. Each side is a list of trials (turn → value) or, the same
    values without their trial, turn → values.

    Values must be positive (a speed). The median of a turn's trials, not their mean: a TTFT
    has heavy tails (a prompt-cache miss costs many times a hit), and one tail value in a mean
    moves the scenario's difference by its full size. On this machine's measured noise the
    median found TTFT +40 % in 78 % of simulated pairs where the mean found 72 %, the A/A
    false-finding share within 5 % for both (tests/unit/test_driver_null.py).
    """
    a, b = _as_trials(turns_a), _as_trials(turns_b)
    # Plain Python for the one observed split (numpy's nanmedian costs ~0.3 ms a call, and a
    # report asks this of every scenario and scope); `_turn_paired` is the same statistic over
    # many splits at once, and a unit test holds the two equal.
    centre = statistics.median if median else statistics.fmean
    diffs = []
    for turn in sorted({t for x in a for t in x} & {t for x in b for t in x}):
        side_a = [math.log(x[turn]) for x in a if turn in x]
        side_b = [math.log(x[turn]) for x in b if turn in x]
        diffs.append(centre(side_b) - centre(side_a))
    return statistics.fmean(diffs) if diffs else None


def _as_trials(
    side: Mapping[int, Sequence[float]] | Sequence[Mapping[int, float]],
) -> list[Mapping[int, float]]:
    if isinstance(side, Mapping):  # turn → values: one pseudo-trial per value position
        depth = max((len(v) for v in side.values()), default=0)
        return [{t: v[i] for t, v in side.items() if i < len(v)} for i in range(depth)]
    return list(side)


@functools.lru_cache(maxsize=64)
def _every_split(n_a: int, n: int) -> np.ndarray:
    """Every split of n trials into n_a of A's and the rest B's (True = B's), the same for
    every scenario of that shape: made once."""
    on_b = np.ones((math.comb(n, n_a), n), dtype=bool)
    for row, chosen in enumerate(itertools.combinations(range(n), n_a)):
        on_b[row, list(chosen)] = False
    on_b.setflags(write=False)
    return on_b


def _splits(n_a: int, n: int, resamples: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """Which trials are B's, for every split of n trials into n_a and n − n_a when there are
    at most `resamples` splits (the observed one among them), else a random sample of splits."""
    if math.comb(n, n_a) <= resamples:
        return _every_split(n_a, n), True
    order = rng.random((resamples, n)).argsort(axis=1)
    return order >= n_a, False


def trial_permutation_p(
    trials_a: Sequence[Mapping[int, float]] | Sequence[float],
    trials_b: Sequence[Mapping[int, float]] | Sequence[float],
    *,
    resamples: int = 2000,
    seed: int = 0,
    median: bool = False,
) -> float:
    """Two-sided permutation p of one scenario's turn-paired change (`turn_paired_difference`,
    the very statistic its change is reported by): A's and B's trials relabelled, a trial
    keeping its turns together. A trial may be a plain value (one turn).

    Exact (every split enumerated) when there are at most `resamples` splits, as with 5 trials
    a side (252); otherwise Monte Carlo with the seed.
    """
    if len(trials_a) < 1 or len(trials_b) < 1:
        raise ValueError("a permutation test needs at least one trial on each side")
    a = [t if isinstance(t, Mapping) else {1: float(t)} for t in trials_a]
    b = [t if isinstance(t, Mapping) else {1: float(t)} for t in trials_b]
    matrix = turn_matrix(a, b)
    n = len(a) + len(b)
    observed = _turn_paired(matrix, (np.arange(n) >= len(a))[None, :], median)
    on_b, exact = _splits(len(a), n, resamples, np.random.default_rng(seed))
    null = np.nan_to_num(_turn_paired(matrix, on_b, median))
    return float(_two_sided(np.nan_to_num(observed), null[None, :], exact)[0])


def smallest_split_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p a permutation test of n_a against n_b trials can give."""
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


def pooled_residuals(groups: Sequence[Sequence[float]]) -> np.ndarray:
    """Every value's deviation from its own group's mean, scaled by √(n/(n−1)) (a deviation
    from a mean of n is that much narrower than from the truth); groups of one add none."""
    parts = []
    for values in groups:
        if len(values) >= 2:
            x = np.asarray(values, dtype=float)
            parts.append((x - x.mean()) * math.sqrt(len(x) / (len(x) - 1)))
    return np.concatenate(parts) if parts else np.zeros(0)


def residual_null_ps(
    changes: Sequence[float], counts: tuple[tuple[int, ...], tuple[int, ...]],
    residuals: np.ndarray, *, draws: int, seed: int,
) -> list[float]:
    """Two-sided p of scenarios' turn-paired mean changes (all of one design: `counts` = per
    turn, how many trials A and B measured) against the noise pooled over every scenario.

    The null distribution is drawn, not assumed: each of `draws` simulated scenarios of this
    design takes every trial's log value from `residuals` (every trial's deviation from its own
    cell's mean, over all scenarios and both sides, scaled by √(n/(n−1)) for the mean it was
    taken from), so TTFT's tails (a prompt-cache miss ×3 and more) are in it as measured; a
    normal or t reference took them for changes (3 % of simulated A/A pairs had a screen
    finding in turn wall time). Why pooled at all: with 5 trials a side a scenario's own exact
    test cannot go below 2/252, and a screen adjusted over 79 scenarios needs less. Turns are
    drawn independently; a trial slow in every turn is the own-trials test's to catch.
    """
    rng = np.random.default_rng(seed)
    null = np.zeros(draws)
    turns = 0
    for n_a, n_b in zip(*counts, strict=True):
        if n_a == 0 or n_b == 0:
            continue
        turns += 1
        a = rng.choice(residuals, size=(draws, n_a)).mean(axis=1)
        b = rng.choice(residuals, size=(draws, n_b)).mean(axis=1)
        null += b - a
    if turns == 0:
        return [1.0 for _ in changes]
    magnitude = np.sort(np.abs(null / turns))
    beyond = draws - np.searchsorted(magnitude, np.abs(np.asarray(changes)) * (1 - 1e-12))
    return [float(x) for x in (beyond + 1) / (draws + 1)]


def adjust_bh(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (compare each with alpha), in the same order."""
    if not p_values:
        return []
    return [float(p) for p in stats.false_discovery_control(list(p_values), method="bh")]


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


def smallest_reaching(share: Callable[[float], float], target: float, *, first: float,
                      cap: float, steps: int) -> float:
    """The smallest size whose `share` (rising with the size) reaches `target`, to 1/2^steps of
    its bracket: the bracket [0, first] doubled until its top reaches the target (never past
    `cap`), then halved `steps` times. Both detectable sizes (the sign-flip test's, simulated;
    the test over sessions', from its noncentral t) are found so."""
    low, high = 0.0, first
    while high < cap and share(high) < target:
        low, high = high, 2 * high
    high = min(high, cap)
    for _ in range(steps):
        middle = (low + high) / 2
        if share(middle) >= target:
            high = middle
        else:
            low = middle
    return high
