"""When A's and B's scenario runs happened: their order in time, and each side's drift.

A difference of the machine between two runs (heat, other load, caches, a background job)
moves every scenario of one run alike, and no interval over scenarios can tell it from a change
of the build: measured here, both repeatable A/A pairs run back to back had the second run 9–10 %
slower in decode and wall time. So the report reads, from each row's recorded start and end
(`ScenarioResult.started_at`/`ended_at`, never estimated spans), whether A and B took turns in
time or ran one after the other, and marks the findings of a back-to-back pair as not separable
from a drift, unless an A/A pair measured on the same machine bounds it. Where a side ran the
same scenarios early and late, its drift between them is estimated with an interval.
"""

from __future__ import annotations

import math
from datetime import datetime

from runner.report._driver_models import Drift
from runner.report._driver_samples import SPEED_METRICS, trial_turns_of
from runner.report._models import Scorecard
from runner.report._stats import paired_cluster_bootstrap, turn_paired_difference

ALTERNATED = "alternated"
BACK_TO_BACK = "back to back"
UNKNOWN = "unknown"
#: A side counts as alternated with the other when between a third and two thirds of its runs
#: lie in the first half of the two runs' time-ordered scenario runs: a minute of overlap at
#: the seam of two runs made one after the other is not alternation.
BALANCE = (1 / 3, 2 / 3)
NOT_SEPARABLE = "not separable from a drift of the machine"
#: Fewest scenarios run both early and late on one side for a drift estimate with an interval.
DRIFT_SCENARIOS = 3


def _spans(card: Scorecard) -> list[tuple[datetime, datetime]]:
    return [(r.started_at, r.ended_at) for r in card.scenarios
            if r.started_at is not None and r.ended_at is not None]


def order_in_time(a: Scorecard, b: Scorecard) -> tuple[str, str]:
    """(ALTERNATED | BACK_TO_BACK | UNKNOWN, one line saying so with the recorded times)."""
    spans_a, spans_b = _spans(a), _spans(b)
    if not spans_a or not spans_b:
        return UNKNOWN, (
            "order in time: unknown (a run's rows carry no recorded start and end times: runs "
            "from before they were kept), so whether A and B were alternated cannot be told; "
            "findings are read as if back to back"
        )

    def shown(spans: list[tuple[datetime, datetime]]) -> str:
        first, last = min(s for s, _ in spans), max(e for _, e in spans)
        return f"{first:%Y-%m-%d %H:%M:%S}–{last:%H:%M:%S} UTC"

    times = f"A {shown(spans_a)}, B {shown(spans_b)}, as recorded"
    starts = sorted([(s, "a") for s, _ in spans_a] + [(s, "b") for s, _ in spans_b])
    first_half = starts[: len(starts) // 2]
    shares = [sum(side == x for _, side in first_half) / len(spans)
              for x, spans in (("a", spans_a), ("b", spans_b))]
    if all(BALANCE[0] <= share <= BALANCE[1] for share in shares):
        return ALTERNATED, (
            f"order in time: alternated ({times}): A's and B's scenario runs took turns, so a "
            "steady drift of the machine falls on both alike"
        )
    first = "A" if starts[0][1] == "a" else "B"
    return BACK_TO_BACK, (
        f"order in time: back to back, {first} first ({times}), not alternated: a drift of "
        "the machine between the two runs (heat, load, caches) moves every scenario of one "
        "run alike and the intervals cannot tell it from a change of the build"
    )


def drift_of(
    card: Scorecard, side: str, dropped: set[str], source: str | None, *, resamples: int,
    confidence: float, seed: int,
) -> list[Drift]:
    """Per turn-metered speed, the side's late runs against its early ones (split at the
    median start time), paired by scenario and turn over the scenarios run in both halves."""
    rows = sorted((r for r in card.scenarios if r.started_at is not None and r.key not in dropped),
                  key=lambda r: r.started_at or datetime.min)
    early = {r.key for r in rows[: len(rows) // 2]}
    late = {r.key for r in rows[len(rows) // 2:]}
    drifts = []
    for metric in SPEED_METRICS:
        if metric.turn_value is None:
            continue
        before = trial_turns_of(card, metric, dropped | late, source)
        after = trial_turns_of(card, metric, dropped | early, source)
        changes = [
            d for s in before if s in after
            if (d := turn_paired_difference(before[s], after[s])) is not None
        ]
        drift = Drift(side=side, metric=metric.key, label=metric.label, scenarios=len(changes))
        if not rows:
            drift.note = "no recorded start times"
        elif len(changes) < DRIFT_SCENARIOS:
            drift.note = (f"{len(changes)} scenario(s) ran both early and late on {side}; at "
                          f"least {DRIFT_SCENARIOS} are needed (run trials in rounds)")
        else:
            test = paired_cluster_bootstrap(changes, resamples=resamples, confidence=confidence,
                                            seed=seed)
            drift.change, drift.ci_low, drift.ci_high = (math.expm1(v) for v in test[:3])
        drifts.append(drift)
    return drifts


def drift_text(d: Drift) -> str:
    if d.change is None or d.ci_low is None or d.ci_high is None:
        return f"drift of {d.side}'s {d.label}, late vs early runs: not estimated ({d.note})"
    return (f"drift of {d.side}'s {d.label}, late vs early runs: {d.change * 100:+.1f}% "
            f"[{d.ci_low * 100:+.1f}%, {d.ci_high * 100:+.1f}%] over {d.scenarios} scenarios")
