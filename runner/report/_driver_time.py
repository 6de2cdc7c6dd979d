"""When A's and B's scenario runs happened: their order in time, and each side's drift.

A difference of the machine between two runs (heat, other load, caches, a background job)
moves every scenario of one run alike, and no interval over scenarios can tell it from a change
of the build: measured here, both repeatable A/A pairs run back to back had the second run 9–10 %
slower in decode and wall time. So the report reads, from each row's recorded start and end
(`ScenarioResult.started_at`/`ended_at`, never estimated spans), whether A and B took turns in
time or ran one after the other, and marks the findings of a back-to-back pair as not separable
from a drift, unless an A/A pair measured on the same machine bounds it. Where a side ran the
same scenarios early and late, its drift between them is estimated with an interval.

An A/B in sessions (one side per session, A B B A …, for a build that needs a reboot) pairs
B's trials with A's from the session beside them, so a steady drift cancels; a difference
between two boots does not, and every pair of one session pair shares it, which a test over
pairs cannot see. So a speed finding must also pass a test with the session as the unit (B's
session means against A's, whose spread within a side is what boots differ by), or it is
marked as not separable from a difference between boots.
"""

from __future__ import annotations

import math
import statistics
from datetime import datetime
from typing import NamedTuple

from scipy import stats  # type: ignore[import-untyped]  # no scipy-stubs pinned yet

from runner.report._driver_models import Drift
from runner.report._driver_samples import SPEED_METRICS, TrialUnits, trial_turns_of
from runner.report._models import Scorecard
from runner.report._stats import (
    paired_cluster_bootstrap,
    smallest_reaching,
    turn_paired_difference,
)

ALTERNATED = "alternated"
BACK_TO_BACK = "back to back"
UNKNOWN = "unknown"
#: A side counts as alternated with the other when between a third and two thirds of its runs
#: lie in the first half of the two runs' time-ordered scenario runs: a minute of overlap at
#: the seam of two runs made one after the other is not alternation.
BALANCE = (1 / 3, 2 / 3)
NOT_SEPARABLE = "not separable from a drift of the machine"
NOT_SEPARABLE_BOOTS = "not separable from a difference between sessions (boots)"
#: Fewest scenarios run both early and late on one side for a drift estimate with an interval.
DRIFT_SCENARIOS = 3


def order_in_time(a: Scorecard, b: Scorecard) -> tuple[str, str]:
    """(ALTERNATED | BACK_TO_BACK | UNKNOWN, one line saying so with the recorded times)."""
    spans_a, spans_b = a.spans(), b.spans()
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


def session_test(units_a: TrialUnits, units_b: TrialUnits, sessions: int, trials: int
                 ) -> SessionTest | None:
    """An A/B in sessions tested with the session as the unit (B's session means against A's,
    a two-sample t-test), or None where it cannot be made: 2 sessions (one per side), no
    scenario every session ran, or session means without any spread to weigh a change by.

    A session's mean is the mean over the scenarios every session ran of the log of the
    scenario's mean over that session's trials and turns. A reboot moves a whole session, so
    the session means vary by what boots differ by, and the test weighs the change against
    that; a steady drift cancels from the change in A B B A order and only widens the spread
    within a side, which makes the test stricter, never looser."""
    per_pair = trials // (sessions // 2)
    if sessions < 4 or per_pair < 1:
        return None
    pairs = range(sessions // 2)

    def session_of(trial: int) -> int:
        return (trial - 1) // per_pair

    def cells(units: TrialUnits) -> dict[str, dict[int, list[float]]]:
        by: dict[str, dict[int, list[float]]] = {}
        for scenario, runs in units.items():
            for trial, turns in runs.items():
                by.setdefault(scenario, {}).setdefault(session_of(trial), []).extend(
                    turns.values())
        return by

    on_a, on_b = cells(units_a), cells(units_b)
    scenarios = [s for s in on_a if s in on_b
                 and all(on_a[s].get(p) and on_b[s].get(p) for p in pairs)]
    if not scenarios:
        return None

    def means(on: dict[str, dict[int, list[float]]]) -> list[float]:
        return [statistics.fmean(math.log(statistics.fmean(on[s][p])) for s in scenarios)
                for p in pairs]

    mean_a, mean_b = means(on_a), means(on_b)
    test = stats.ttest_ind(mean_b, mean_a, equal_var=True)
    spread = math.sqrt((statistics.variance(mean_a) + statistics.variance(mean_b)) / 2)
    if spread == 0:
        return None
    return SessionTest(math.expm1(statistics.fmean(mean_b) - statistics.fmean(mean_a)),
                       float(test.pvalue), sessions, spread)


class SessionTest(NamedTuple):
    """The test over an A/B's sessions for one speed."""

    change: float  # B vs A, relative, of the mean session
    p_value: float  # two-sample t-test on the session means (log scale), two-sided
    sessions: int
    spread: float  # the session means' pooled standard deviation within a side (log scale)

    def detectable(self, alpha: float, power: float = 0.8) -> float:
        """The change (relative) this test finds `power` of the time at `alpha` when the
        session means spread as measured: from the noncentral t of its own statistic. The
        measured spread is made median-unbiased first (over 2 degrees of freedom it is below
        the true spread more often than not: a size from it would be found ~63 % of the time,
        measured in tests/unit/test_driver_null_sessions.py)."""
        df, per_side = self.sessions - 2, self.sessions // 2
        critical = stats.t.ppf(1 - alpha / 2, df)
        spread = self.spread / math.sqrt(stats.chi2.median(df) / df)
        scale = spread * math.sqrt(2 / per_side)

        def found(log_change: float) -> float:
            shift = log_change / scale
            share = float(stats.nct.sf(critical, df, shift) + stats.nct.cdf(-critical, df, shift))
            # scipy's noncentral t gives NaN far out in its tail (a shift of ~14 at 6 degrees
            # of freedom), where the change is found every time.
            return 1.0 if math.isnan(share) else share

        return math.expm1(smallest_reaching(found, power, first=1.0, cap=50.0, steps=40))


def session_marked(text: str, tested: SessionTest | None, p_adjusted: float | None,
                   alpha: float, sessions: int) -> str:
    """A speed finding of an A/B in sessions, held against the session-level test: kept when
    its adjusted p is below alpha, else marked as not separable from a difference between
    boots."""
    if tested is None or p_adjusted is None:
        why = ("in 2 sessions no side ran twice, so nothing shows what a reboot alone moves: "
               "run --sessions 4" if sessions < 4 else
               "not tested over the sessions: a single scenario's change, no scenario every "
               "session ran, or session means that do not vary")
        return f"{text} — {NOT_SEPARABLE_BOOTS} ({why})"
    over = (f"over {tested.sessions} sessions' means, B vs A {tested.change * 100:+.1f}%, "
            f"t-test adjusted p = {p_adjusted:.3g}")
    if p_adjusted < alpha:
        return f"{text} (beyond what the sessions differ by: {over})"
    return f"{text} — {NOT_SEPARABLE_BOOTS} ({over}: each side's own sessions differ by as much)"


def session_text(label: str, tested: SessionTest, p_adjusted: float, alpha: float,
                 tested_count: int) -> str:
    """The rule line of one speed's test over sessions, with the size it can show."""
    size = tested.detectable(alpha / tested_count)
    shown = "a factor of more than 10" if size > 9 else f"±{size * 100:.1f}%"
    return (f"{label} over the {tested.sessions} sessions' means (the unit a reboot moves): "
            f"B vs A {tested.change * 100:+.1f}%, t-test adjusted p = {p_adjusted:.3g}; the "
            f"session means spread by ±{math.expm1(tested.spread) * 100:.1f}% within a side, "
            f"so this test finds a change of {shown} 80% of the time (at alpha / "
            f"{tested_count}); smaller ones are mostly missed, and a speed finding this test "
            "does not pass stays marked")
