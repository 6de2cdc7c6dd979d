"""Speed aggregates over turns: means and percentiles, None when nothing was measured."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from runner.report._models import Performance, PerformanceStats, ScenarioResult
from runner.transcript import TurnPerformance


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    if not values:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q={q} must be within 0..100")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def stats_of(turns: Iterable[TurnPerformance], wall_s: float | None) -> PerformanceStats:
    measured = list(turns)
    walls = [t.wall_s for t in measured]
    return PerformanceStats(
        wall_s=wall_s,
        turns=len(measured),
        turn_wall_s_mean=_mean(walls),
        turn_wall_s_p50=percentile(walls, 50),
        turn_wall_s_p90=percentile(walls, 90),
        ttft_s_mean=_mean(
            [t.time_to_first_token_s for t in measured if t.time_to_first_token_s is not None]
        ),
        tokens_per_s_mean=_mean([t.tokens_per_s for t in measured if t.tokens_per_s is not None]),
        input_tokens=sum(t.input_tokens or 0 for t in measured),
        output_tokens=sum(t.output_tokens or 0 for t in measured),
    )


def _turn_performance(result: ScenarioResult) -> list[TurnPerformance]:
    return [t.performance for t in result.turns if t.performance is not None]


def performance_of(results: Sequence[ScenarioResult]) -> Performance:
    walls = [r.wall_s for r in results if r.wall_s is not None]
    return Performance(
        totals=stats_of(
            (p for r in results for p in _turn_performance(r)), sum(walls) if walls else None
        ),
        scenarios={r.key: stats_of(_turn_performance(r), r.wall_s) for r in results},
    )
