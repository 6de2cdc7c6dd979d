"""Statistics over repeated runs: K trials of a scenario, and K judgments of one transcript.

Why: one run of an LLM agent is one sample. A vendor comparing two driver builds needs to know
whether a difference is larger than the noise, so trials report how often a scenario passes
(pass^k: every one of k tries passes; pass@k: at least one does) and how much its score moves,
and `--rejudge K` reports how much the *judge* moves on the same transcript.

Pure functions: no I/O.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from enum import Enum
from itertools import combinations
from math import comb

from pydantic import BaseModel, ConfigDict, Field

from runner.records.judgments import DIMENSIONS, DimensionScores
from runner.records.status import JUDGED, Status


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of P(k fresh tries all pass) from n tries with c passes: C(c,k)/C(n,k)."""
    _check_counts(n, c, k)
    return comb(c, k) / comb(n, k)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of P(at least one of k tries passes): 1 − C(n−c,k)/C(n,k)."""
    _check_counts(n, c, k)
    return 1.0 - comb(n - c, k) / comb(n, k)


def _check_counts(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ValueError(f"passes c={c} must be between 0 and the number of trials n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be between 1 and the number of trials n={n}")


class _Record(BaseModel):
    # Written into scorecard.json: a misspelt field must be an error.
    model_config = ConfigDict(extra="forbid")


class Stability(str, Enum):
    STABLE_PASS = "stable-pass"  # every judged trial passed
    FLAKY = "flaky"  # some passed, some did not
    STABLE_FAIL = "stable-fail"  # no judged trial passed
    UNMEASURED = "unmeasured"  # no trial produced a verdict (all infra / not judged)


class TrialStats(_Record):
    """How one scenario behaved over K trials. Only judged trials count as samples."""

    scenario_id: str = Field(description="the scenario's id")
    trials: int = Field(description="every trial run, whatever its status")
    judged: int = Field(description="trials with a quality verdict: n in the formulas")
    passes: int = Field(description="PASS trials: c in the formulas")
    all_passed: bool = Field(
        description="pass^K observed directly: every one of the K trials passed"
    )
    pass_hat_k: dict[int, float] = Field(
        default_factory=dict, description="k → C(c,k)/C(n,k): P(k fresh tries all pass)"
    )
    pass_at_k: dict[int, float] = Field(
        default_factory=dict, description="k → 1 − C(n−c,k)/C(n,k): P(one of k tries passes)"
    )
    score_mean: float | None = Field(default=None, description="mean score of judged trials")
    score_stdev: float | None = Field(
        default=None, description="sample standard deviation; None with fewer than 2 scores"
    )
    label: Stability = Field(description="stable-pass, flaky, stable-fail or unmeasured")
    statuses: list[Status] = Field(default_factory=list, description="statuses in trial order")


def stability(judged: int, passes: int) -> Stability:
    if judged == 0:
        return Stability.UNMEASURED
    if passes == judged:
        return Stability.STABLE_PASS
    if passes == 0:
        return Stability.STABLE_FAIL
    return Stability.FLAKY


def trial_stats(
    scenario_id: str, statuses: Sequence[Status], scores: Sequence[float | None]
) -> TrialStats:
    """Summarise K trials of one scenario; statuses[i] and scores[i] belong to trial i."""
    if len(statuses) != len(scores):
        raise ValueError(f"{scenario_id}: {len(statuses)} statuses but {len(scores)} scores")
    judged = sum(1 for s in statuses if s in JUDGED)
    passes = sum(1 for s in statuses if s is Status.PASS)
    measured = [
        score for status, score in zip(statuses, scores) if status in JUDGED and score is not None
    ]
    ks = range(1, judged + 1)
    return TrialStats(
        scenario_id=scenario_id,
        trials=len(statuses),
        judged=judged,
        passes=passes,
        all_passed=bool(statuses) and passes == len(statuses),
        pass_hat_k={k: pass_hat_k(judged, passes, k) for k in ks},
        pass_at_k={k: pass_at_k(judged, passes, k) for k in ks},
        score_mean=statistics.fmean(measured) if measured else None,
        score_stdev=statistics.stdev(measured) if len(measured) >= 2 else None,
        label=stability(judged, passes),
        statuses=list(statuses),
    )


# --- judge self-agreement (--rejudge K) ---------------------------------------------------


class Kappa(_Record):
    """Cohen's κ between two raters on PASS/FAIL, with the parts it is made of."""

    kappa: float | None = Field(description="Cohen's κ; None when undefined (see degenerate)")
    observed: float = Field(description="p_o: share of items on which the raters agree")
    expected: float = Field(
        description="p_e: agreement expected by chance from each rater's PASS rate"
    )
    items: int = Field(description="items both raters labelled")
    degenerate: bool = Field(
        default=False,
        description="both raters gave one and the same label to every item: κ = 0/0",
    )


def cohen_kappa(first: Sequence[bool], second: Sequence[bool]) -> Kappa:
    """κ = (p_o − p_e) / (1 − p_e) for two raters' PASS (True) / not-PASS (False) labels.

    When both raters gave the same single label to every item, p_e = 1 and κ is 0/0; it is
    reported as None with degenerate=True instead of pretending to be 1 or 0.
    """
    if len(first) != len(second):
        raise ValueError(
            f"raters labelled different numbers of items: {len(first)} vs {len(second)}"
        )
    if not first:
        raise ValueError("Cohen's kappa needs at least one item")
    n = len(first)
    observed = sum(a == b for a, b in zip(first, second)) / n
    rate_a = sum(first) / n
    rate_b = sum(second) / n
    expected = rate_a * rate_b + (1 - rate_a) * (1 - rate_b)
    if expected == 1.0:
        return Kappa(kappa=None, observed=observed, expected=expected, items=n, degenerate=True)
    kappa = (observed - expected) / (1 - expected)
    return Kappa(kappa=kappa, observed=observed, expected=expected, items=n)


class RejudgeSample(_Record):
    """One of the K judgments of a scenario's transcript."""

    passed: bool = Field(description="the status scoring derived from this judgment was PASS")
    turn_scores: dict[int, DimensionScores] = Field(
        default_factory=dict, description="turn → the judge's dimensions"
    )
    replies: int = Field(default=0, description="judge replies this judging used")
    cached_replies: int = Field(
        default=0, description="of them, served from the on-disk judge cache (replayed)"
    )


class JudgeAgreement(_Record):
    """How consistently the judge scored the same transcripts K times."""

    repeats: int = Field(description="K: judgments per transcript")
    scenarios: int = Field(description="transcripts judged K times")
    kappa: float | None = Field(
        description="mean pairwise κ over the K·(K−1)/2 repeat pairs that define one"
    )
    pairwise: list[Kappa] = Field(default_factory=list, description="κ of each repeat pair")
    observed_agreement: float = Field(
        description="mean p_o over the pairs (defined even when κ is not)"
    )
    degenerate: bool = Field(
        description="every pair was degenerate: every judgment gave the same verdict"
    )
    dimension_spread: dict[str, float] = Field(
        default_factory=dict, description="per dimension, mean (max − min) across repeats"
    )
    mean_spread: float | None = Field(default=None, description="mean over all dimensions")
    unstable_scenarios: list[str] = Field(
        default_factory=list, description="scenarios whose verdict changed across repeats"
    )
    flipped_fraction: float = Field(
        default=0.0,
        description="share of the repeat judgings (2..K of every scenario) whose PASS/not-PASS "
        "verdict differs from that scenario's first judging",
    )
    temperature: float | None = Field(
        default=None,
        description="the judge's sampling temperature for every repeat; None: the provider's "
        "default sampling (or a judge that does not say)",
    )
    seed: int | None = Field(
        default=None,
        description="the sampling seed sent with each judge request; None: no seed is sent, "
        "the server samples with its own",
    )
    replies: int = Field(default=0, description="judge replies over every repeat judging")
    cached_replies: int = Field(
        default=0,
        description="of them, served from the on-disk judge cache: replayed from an earlier "
        "run, so they agree with it by construction",
    )


def flipped_fraction(samples: Mapping[str, Sequence[RejudgeSample]]) -> float:
    """Of the repeat judgings after each scenario's first, the share that changed the verdict."""
    repeats = [(runs[0].passed, later.passed) for runs in samples.values() for later in runs[1:]]
    return sum(first != later for first, later in repeats) / len(repeats) if repeats else 0.0


def judge_agreement(
    samples: Mapping[str, Sequence[RejudgeSample]],
    *,
    temperature: float | None = None,
    seed: int | None = None,
) -> JudgeAgreement:
    """Agreement of K repeated judgments per scenario (same K for every scenario).

    The samples must come from K real judgings (runner/run/engine.py asks each repeat apart and the
    judge cache keys replies by repeat index): κ over replayed replies would always read 1."""
    if not samples:
        raise ValueError("judge agreement needs at least one rejudged scenario")
    repeats = {len(runs) for runs in samples.values()}
    if len(repeats) != 1 or min(repeats) < 2:
        raise ValueError(
            f"every scenario needs the same number (≥ 2) of judgments, got {sorted(repeats)}"
        )
    k = repeats.pop()
    ids = sorted(samples)
    pairs = [
        cohen_kappa([samples[i][a].passed for i in ids], [samples[i][b].passed for i in ids])
        for a, b in combinations(range(k), 2)
    ]
    defined = [p.kappa for p in pairs if p.kappa is not None]
    spread = dimension_spread(samples)
    return JudgeAgreement(
        repeats=k,
        scenarios=len(ids),
        kappa=statistics.fmean(defined) if defined else None,
        pairwise=pairs,
        observed_agreement=statistics.fmean(p.observed for p in pairs),
        degenerate=not defined,
        dimension_spread=spread,
        mean_spread=statistics.fmean(spread.values()) if spread else None,
        unstable_scenarios=[i for i in ids if len({s.passed for s in samples[i]}) > 1],
        flipped_fraction=flipped_fraction(samples),
        temperature=temperature,
        seed=seed,
        replies=sum(s.replies for runs in samples.values() for s in runs),
        cached_replies=sum(s.cached_replies for runs in samples.values() for s in runs),
    )


def dimension_spread(samples: Mapping[str, Sequence[RejudgeSample]]) -> dict[str, float]:
    """Per dimension, the mean over (scenario, turn) of max − min across the repeats.

    Only turns that every repeat scored are compared; a turn one repeat skipped has no spread.
    """
    ranges: dict[str, list[float]] = {name: [] for name in DIMENSIONS}
    for runs in samples.values():
        common = set.intersection(*(set(run.turn_scores) for run in runs))
        for turn in sorted(common):
            for name in DIMENSIONS:
                values = [getattr(run.turn_scores[turn], name) for run in runs]
                ranges[name].append(max(values) - min(values))
    return {name: statistics.fmean(vals) for name, vals in ranges.items() if vals}
