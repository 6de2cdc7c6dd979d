"""Quality of runs A and B: yes/no outcomes paired by trial (McNemar), and pass^k per scenario."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence

from runner.records.status import JUDGED, Status
from runner.report._driver_models import Change, OutcomeDelta, ScenarioQuality
from runner.report._models import ScenarioResult
from runner.report._stats import mcnemar_exact, smallest_p
from runner.verdict.trials import pass_hat_k


def _completed(row: ScenarioResult) -> bool | None:
    if row.status.is_skipped:
        return None  # availability (a document or model absent), not the build
    return row.status in JUDGED or row.status is Status.NOT_JUDGED


def _passed(row: ScenarioResult) -> bool | None:
    return row.status is Status.PASS if row.status in JUDGED else None


def _checks_passed(row: ScenarioResult) -> bool | None:
    if not _completed(row) or not row.all_checks():
        return None
    return all(c.passed for c in row.all_checks())


OUTCOMES: tuple[tuple[str, Callable[[ScenarioResult], bool | None]], ...] = (
    ("completed", _completed),
    ("passed", _passed),
    ("checks_passed", _checks_passed),
)


def pairs_of(
    ids: Iterable[str],
    runs_a: dict[str, list[ScenarioResult]],
    runs_b: dict[str, list[ScenarioResult]],
    outcome: Callable[[ScenarioResult], bool | None],
) -> list[tuple[bool, bool]]:
    # Trial i of a scenario on A is paired with trial i on B: same scenario, same position.
    pairs = []
    for sid in ids:
        for row_a, row_b in zip(runs_a[sid], runs_b[sid]):
            x, y = outcome(row_a), outcome(row_b)
            if x is not None and y is not None:
                pairs.append((x, y))
    return pairs


def outcome_delta(
    outcome: str, scope: str, name: str, pairs: Sequence[tuple[bool, bool]], alpha: float
) -> OutcomeDelta:
    a_only = sum(1 for x, y in pairs if x and not y)
    b_only = sum(1 for x, y in pairs if y and not x)
    n = len(pairs)
    p = mcnemar_exact(a_only, b_only)
    if smallest_p(n) > alpha:
        verdict = Change.TOO_FEW
        note = (
            f"{n} pair(s): even if every one flipped the same way, p ≥ {smallest_p(n):.3g} "
            f"> {alpha:g}; run more scenarios or trials"
        )
    elif p < alpha:
        verdict = Change.BETTER if b_only > a_only else Change.WORSE
        note = ""
    else:
        verdict = Change.NO_CHANGE
        flipped = a_only + b_only
        note = (
            f"only {flipped} pair(s) flipped: too few to separate from noise at {alpha:g}"
            if 0 < flipped and smallest_p(flipped) > alpha
            else ""
        )
    return OutcomeDelta(
        outcome=outcome,
        scope=scope,
        name=name,
        pairs=n,
        a_rate=sum(x for x, _ in pairs) / n if n else None,
        b_rate=sum(y for _, y in pairs) / n if n else None,
        a_only=a_only,
        b_only=b_only,
        p_value=p,
        verdict=verdict,
        note=note,
    )


def _judged_counts(runs: Sequence[ScenarioResult]) -> tuple[int, int, float | None]:
    judged = [r for r in runs if r.status in JUDGED]
    scores = [r.score for r in judged if r.score is not None]
    passes = sum(1 for r in judged if r.status is Status.PASS)
    return len(judged), passes, statistics.fmean(scores) if scores else None


def scenario_quality(
    sid: str, a: list[ScenarioResult], b: list[ScenarioResult]
) -> ScenarioQuality:
    judged_a, passes_a, mean_a = _judged_counts(a)
    judged_b, passes_b, mean_b = _judged_counts(b)
    k = min(judged_a, judged_b) or None
    return ScenarioQuality(
        scenario_id=sid,
        category=a[0].category,
        trials_a=len(a),
        trials_b=len(b),
        judged_a=judged_a,
        judged_b=judged_b,
        passes_a=passes_a,
        passes_b=passes_b,
        k=k,
        pass_hat_k_a=pass_hat_k(judged_a, passes_a, k) if k else None,
        pass_hat_k_b=pass_hat_k(judged_b, passes_b, k) if k else None,
        score_mean_a=mean_a,
        score_mean_b=mean_b,
        statuses_a=[r.status for r in a],
        statuses_b=[r.status for r in b],
    )


def suite_pass_k(rows: Sequence[ScenarioQuality]) -> tuple[int | None, float | None, float | None]:
    measured = [r for r in rows if r.k]
    if not measured:
        return None, None, None
    k = min(r.k for r in measured if r.k)
    a = statistics.fmean(pass_hat_k(r.judged_a, r.passes_a, k) for r in measured)
    b = statistics.fmean(pass_hat_k(r.judged_b, r.passes_b, k) for r in measured)
    return k, a, b
