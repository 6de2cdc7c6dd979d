"""Fold several trials of a scenario into one row, the way GAIA reports `--iterations`.

Why: GAIA's scorecards hold one row per scenario. When a run with trials (rows keyed
`<id>__trial<k>`) meets a run without, or is written in GAIA's format, each scenario needs one
representative row. The representative is the worst judged trial (a FAIL outranks a PASS, then
the lowest score), so a scenario that fails now and then never reads as a clean pass.
"""

from __future__ import annotations

from collections.abc import Sequence

from runner.records.status import JUDGED, Status
from runner.report._models import ScenarioResult


def _worst_first(result: ScenarioResult) -> tuple[bool, float]:
    return result.status is Status.PASS, result.score or 0.0


def group_trials(results: Sequence[ScenarioResult]) -> dict[str, list[ScenarioResult]]:
    """Rows by scenario id, in the order ids first appear, each list in trial order."""
    groups: dict[str, list[ScenarioResult]] = {}
    for result in results:
        groups.setdefault(result.id, []).append(result)
    for runs in groups.values():
        runs.sort(key=lambda r: r.trial or 0)
    return groups


def representative(runs: Sequence[ScenarioResult]) -> ScenarioResult:
    """The worst judged trial of one scenario (the worst of all when none was judged)."""
    judged = [r for r in runs if r.status in JUDGED]
    return min(judged or runs, key=_worst_first)


def fold_trials(results: Sequence[ScenarioResult]) -> list[ScenarioResult]:
    """One row per scenario id (trial cleared), in first-appearance order."""
    return [
        representative(runs).model_copy(update={"trial": None})
        for runs in group_trials(results).values()
    ]


def has_trials(results: Sequence[ScenarioResult]) -> bool:
    return any(r.trial is not None for r in results)
