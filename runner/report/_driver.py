"""The driver-build report: the same suite on two builds (drivers, images, devices), compared.

A hardware vendor asks three questions of runs A and B: what differs between the two machines
and stacks; is B faster or slower, beyond the noise; did quality move, beyond the noise. This
module answers them from two scorecards (and, for indexing time, their traces) into one
`DriverReport`. Speed uses stratified bootstrap intervals over turns and trials; quality uses
pass^k over trials and the exact McNemar test on paired outcomes (runner/report/_stats.py).
Every verdict says "no detectable change" unless the interval or the test excludes noise, and
"too few samples" when n could not show a change at all.
"""

from __future__ import annotations

import json
import random
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runner.report._fold import group_trials
from runner.report._models import ScenarioResult, Scorecard, Trace, TurnResult
from runner.report._stats import (
    Interval,
    mcnemar_exact,
    mean_difference,
    percentile_interval,
    pooled_means,
    relative_change,
    resampled_sums,
    smallest_p,
)
from runner.status import JUDGED, Status
from runner.trials import pass_hat_k

MIN_SAMPLES = 3  # fewer values on a side than this and a bootstrap interval means nothing
ALPHA = 0.05
CONFIDENCE = 0.95
RESAMPLES = 2000


class Change(str, Enum):
    FASTER = "faster"
    SLOWER = "slower"
    BETTER = "better"
    WORSE = "worse"
    NO_CHANGE = "no detectable change"
    TOO_FEW = "too few samples"

    @property
    def beyond_noise(self) -> bool:
        return self not in (Change.NO_CHANGE, Change.TOO_FEW)


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FingerprintRow(_Record):
    key: str = Field(description="dotted path, e.g. hardware.gpus[0].name")
    a: str | None = Field(default=None, description="value on run A (None = not recorded)")
    b: str | None = Field(default=None, description="value on run B (None = not recorded)")
    differs: bool = Field(description="both recorded and not equal, or recorded on one side only")


class MetricDelta(_Record):
    """One metric over one scope: B against A, with its bootstrap interval and a verdict."""

    metric: str = Field(description="ttft_s | tokens_per_s | turn_wall_s | index_s | score")
    label: str = Field(description="what a reader calls the metric")
    unit: str = Field(description="unit of mean_a/mean_b")
    relative: bool = Field(description="change is relative (mean_b/mean_a − 1) or absolute")
    scope: str = Field(description="all | category | scenario")
    name: str = Field(description="'all', a category or a scenario id")
    n_a: int = Field(description="values on run A (turns × trials, or documents)")
    n_b: int = Field(description="values on run B")
    mean_a: float | None = Field(default=None, description="mean on A")
    mean_b: float | None = Field(default=None, description="mean on B")
    change: float | None = Field(default=None, description="B vs A, relative or absolute")
    ci_low: float | None = Field(default=None, description="lower bound of the interval")
    ci_high: float | None = Field(default=None, description="upper bound of the interval")
    verdict: Change = Field(description="faster/slower/better/worse, or why not")
    note: str = Field(default="", description="why the verdict is what it is, when not obvious")


class OutcomeDelta(_Record):
    """A yes/no outcome on paired runs (same scenario, same trial index) with McNemar's test."""

    outcome: str = Field(description="completed | passed | checks_passed")
    scope: str = Field(description="all | category")
    name: str = Field(description="'all' or a category")
    pairs: int = Field(description="pairs with the outcome known on both sides")
    a_rate: float | None = Field(default=None, description="share of yes on A over the pairs")
    b_rate: float | None = Field(default=None, description="share of yes on B over the pairs")
    a_only: int = Field(description="pairs yes on A, no on B (B worse)")
    b_only: int = Field(description="pairs no on A, yes on B (B better)")
    p_value: float = Field(description="two-sided exact McNemar p")
    verdict: Change = Field(description="better/worse, or why not")
    note: str = Field(default="", description="why the verdict is what it is")


class ScenarioQuality(_Record):
    scenario_id: str = Field(description="scenario id")
    category: str = Field(description="scenario category")
    trials_a: int = Field(description="trials on A")
    trials_b: int = Field(description="trials on B")
    judged_a: int = Field(description="trials with a verdict on A")
    judged_b: int = Field(description="trials with a verdict on B")
    passes_a: int = Field(description="PASS trials on A")
    passes_b: int = Field(description="PASS trials on B")
    k: int | None = Field(default=None, description="k of pass^k: min(judged_a, judged_b)")
    pass_hat_k_a: float | None = Field(default=None, description="P(k tries all pass) on A")
    pass_hat_k_b: float | None = Field(default=None, description="P(k tries all pass) on B")
    score_mean_a: float | None = Field(default=None, description="mean judged score on A")
    score_mean_b: float | None = Field(default=None, description="mean judged score on B")
    statuses_a: list[Status] = Field(default_factory=list, description="A's statuses by trial")
    statuses_b: list[Status] = Field(default_factory=list, description="B's statuses by trial")


class DriverReport(_Record):
    a_label: str = Field(description="run A (the reference build): its run id")
    b_label: str = Field(description="run B (the build under test): its run id")
    fingerprint: list[FingerprintRow] = Field(default_factory=list, description="A vs B setup")
    speed: list[MetricDelta] = Field(default_factory=list, description="speed deltas")
    scores: list[MetricDelta] = Field(default_factory=list, description="judged score deltas")
    outcomes: list[OutcomeDelta] = Field(default_factory=list, description="paired outcomes")
    scenarios: list[ScenarioQuality] = Field(default_factory=list, description="per scenario")
    pass_k: int | None = Field(default=None, description="k for the suite's pass^k")
    pass_hat_k_a: float | None = Field(default=None, description="mean pass^k over scenarios, A")
    pass_hat_k_b: float | None = Field(default=None, description="mean pass^k over scenarios, B")
    only_in_a: list[str] = Field(default_factory=list, description="scenarios B did not run")
    only_in_b: list[str] = Field(default_factory=list, description="scenarios A did not run")
    beyond_noise: list[str] = Field(default_factory=list, description="the findings, one line each")
    notes: list[str] = Field(default_factory=list, description="caveats a reader must know")
    confidence: float = Field(description="interval confidence level")
    alpha: float = Field(description="significance level of the McNemar test")
    resamples: int = Field(description="bootstrap resamples")
    seed: int = Field(description="bootstrap RNG seed")


# --- fingerprint ---------------------------------------------------------------------------


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for key in sorted(value):
            _flatten(f"{prefix}.{key}" if prefix else str(key), value[key], out)
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        for index, item in enumerate(value):
            _flatten(f"{prefix}[{index}]", item, out)
    elif value is not None and value != [] and value != {}:
        out[prefix] = value if isinstance(value, str) else json.dumps(value)


def _identity(card: Scorecard, traces: Sequence[Trace]) -> dict[str, str]:
    c = card.config
    flat: dict[str, str] = {}
    _flatten(
        "",
        {
            "device": c.device,
            "backend": c.backend,
            "agent_model": c.agent_model,
            "served_model": c.served_model,
            "simulator": c.simulator_model or c.simulator_mode,
            "judge_model": c.judge_model,
            "trialbox_version": c.trialbox_version,
            "trials": c.trials,
            "agent.gaia_version": next(
                (t.transcript.gaia_version for t in traces if t.transcript), None
            ),
            "hardware": c.hardware,
            "images": c.images,
            "llm_server": c.llm_server,
        },
        flat,
    )
    return flat


def fingerprint(
    a: Scorecard, b: Scorecard, traces_a: Sequence[Trace] = (), traces_b: Sequence[Trace] = ()
) -> list[FingerprintRow]:
    """Every recorded setting of both runs side by side; rows that differ come first."""
    left, right = _identity(a, traces_a), _identity(b, traces_b)
    rows = [
        FingerprintRow(key=k, a=left.get(k), b=right.get(k), differs=left.get(k) != right.get(k))
        for k in sorted(left.keys() | right.keys())
    ]
    return sorted(rows, key=lambda r: not r.differs)


# --- samples -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    lower_is_better: bool
    turn_value: Callable[[TurnResult], float | None] | None  # None: comes from traces


def _perf(get: Callable[[Any], float | None]) -> Callable[[TurnResult], float | None]:
    return lambda t: get(t.performance) if t.performance is not None else None


SPEED_METRICS = (
    Metric("ttft_s", "time to first token", "s", True, _perf(lambda p: p.time_to_first_token_s)),
    Metric("tokens_per_s", "decode speed", "tok/s", False, _perf(lambda p: p.tokens_per_s)),
    Metric("turn_wall_s", "turn wall time", "s", True, _perf(lambda p: p.wall_s)),
    Metric("index_s", "index time per document", "s", True, None),
)

Samples = dict[str, list[float]]  # scenario id → values (turns × trials, or documents)


def _turn_samples(card: Scorecard, metric: Metric) -> Samples:
    assert metric.turn_value is not None
    samples: Samples = {}
    for row in card.scenarios:
        values = [metric.turn_value(t) for t in row.turns]
        # Zero or negative = not measured (GAIA's rule too); a speed is never 0.
        samples.setdefault(row.id, []).extend(v for v in values if v is not None and v > 0)
    return samples


def _index_samples(traces: Sequence[Trace]) -> Samples:
    samples: Samples = {}
    for trace in traces:
        docs = trace.transcript.indexed if trace.transcript else []
        samples.setdefault(trace.result.id, []).extend(
            d.duration_s for d in docs if d.error is None and d.duration_s > 0
        )
    return samples


def _scope_groups(
    common: Sequence[str], categories: dict[str, str]
) -> list[tuple[str, str, list[str]]]:
    groups = [("all", "all", list(common))]
    for category in sorted({categories[s] for s in common}):
        groups.append(("category", category, [s for s in common if categories[s] == category]))
    groups += [("scenario", s, [s]) for s in common]
    return groups


def _verdict(interval: Interval, lower_is_better: bool | None) -> Change:
    if not interval.excludes(0.0):
        return Change.NO_CHANGE
    up = interval.estimate > 0
    if lower_is_better is None:  # a score: higher is better
        return Change.BETTER if up else Change.WORSE
    return Change.SLOWER if up == lower_is_better else Change.FASTER


class _Draws:
    """Bootstrap draws per (side, metric, scenario), made once and shared by every scope.

    Each scenario is resampled within itself (stratified), with its own RNG seeded from the
    report seed and its name, so the overall, category and scenario intervals rest on the same
    draws and the report is the same on every run.
    """

    def __init__(self, resamples: int, confidence: float, seed: int) -> None:
        self.resamples = resamples
        self.confidence = confidence
        self.seed = seed
        self._sums: dict[tuple[str, str, str], list[float]] = {}

    def sums(self, side: str, metric: str, sid: str, values: Sequence[float]) -> list[float]:
        key = (side, metric, sid)
        if key not in self._sums:
            rng = random.Random(f"{self.seed}/{side}/{metric}/{sid}")
            self._sums[key] = resampled_sums(values, self.resamples, rng)
        return self._sums[key]

    def interval(
        self,
        metric: str,
        ids: Sequence[str],
        a: Samples,
        b: Samples,
        statistic: Callable[[float, float], float],
    ) -> Interval:
        sides = []
        for side, samples in (("a", a), ("b", b)):
            present = [s for s in ids if samples.get(s)]
            count = sum(len(samples[s]) for s in present)
            sums = [self.sums(side, metric, s, samples[s]) for s in present]
            sides.append((sum(sum(samples[s]) for s in present) / count, pooled_means(sums, count)))
        (mean_a, draws_a), (mean_b, draws_b) = sides
        draws = [statistic(x, y) for x, y in zip(draws_a, draws_b, strict=True)]
        return percentile_interval(statistic(mean_a, mean_b), draws, self.confidence)


def _delta(
    metric: str,
    label: str,
    unit: str,
    lower_is_better: bool | None,
    scope: tuple[str, str, list[str]],
    a: Samples,
    b: Samples,
    draws: _Draws,
) -> MetricDelta:
    kind, name, ids = scope
    flat_a = [v for s in ids for v in a.get(s, [])]
    flat_b = [v for s in ids for v in b.get(s, [])]
    relative = lower_is_better is not None
    base = MetricDelta(
        metric=metric,
        label=label,
        unit=unit,
        relative=relative,
        scope=kind,
        name=name,
        n_a=len(flat_a),
        n_b=len(flat_b),
        mean_a=statistics.fmean(flat_a) if flat_a else None,
        mean_b=statistics.fmean(flat_b) if flat_b else None,
        verdict=Change.TOO_FEW,
    )
    if len(flat_a) < MIN_SAMPLES or len(flat_b) < MIN_SAMPLES:
        base.note = f"n = {len(flat_a)} vs {len(flat_b)}; at least {MIN_SAMPLES} a side needed"
        return base
    interval = draws.interval(
        metric, ids, a, b, relative_change if relative else mean_difference
    )
    base.change, base.ci_low, base.ci_high = interval
    base.verdict = _verdict(interval, lower_is_better)
    return base


# --- quality -------------------------------------------------------------------------------


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


def _pairs(
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


def _outcome_delta(
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


def _scenario_quality(
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


def _suite_pass_k(rows: Sequence[ScenarioQuality]) -> tuple[int | None, float | None, float | None]:
    measured = [r for r in rows if r.k]
    if not measured:
        return None, None, None
    k = min(r.k for r in measured if r.k)
    a = statistics.fmean(pass_hat_k(r.judged_a, r.passes_a, k) for r in measured)
    b = statistics.fmean(pass_hat_k(r.judged_b, r.passes_b, k) for r in measured)
    return k, a, b


def _score_samples(runs: dict[str, list[ScenarioResult]]) -> Samples:
    return {
        sid: [r.score for r in rows if r.status in JUDGED and r.score is not None]
        for sid, rows in runs.items()
    }


# --- the report ----------------------------------------------------------------------------


def scope_text(scope: str, name: str) -> str:
    return "all scenarios" if scope == "all" else f"{scope} {name}"


def _shown(delta: MetricDelta, value: float) -> str:
    return f"{value * 100:+.1f}%" if delta.relative else f"{value:+.2f}"


def _finding(delta: MetricDelta) -> str:
    assert delta.change is not None and delta.ci_low is not None and delta.ci_high is not None
    return (
        f"{delta.label} ({scope_text(delta.scope, delta.name)}): B {delta.verdict.value} "
        f"{_shown(delta, delta.change)} [{_shown(delta, delta.ci_low)}, "
        f"{_shown(delta, delta.ci_high)}]"
    )


def _scenario_findings(deltas: Sequence[MetricDelta]) -> list[str]:
    """Per metric and direction, one line naming the scenarios that moved beyond noise."""
    moved: dict[tuple[str, Change], list[MetricDelta]] = {}
    for d in deltas:
        if d.scope == "scenario" and d.verdict.beyond_noise:
            moved.setdefault((d.label, d.verdict), []).append(d)
    lines = []
    for (label, verdict), rows in moved.items():
        total = sum(1 for d in deltas if d.scope == "scenario" and d.label == label)
        names = ", ".join(d.name for d in rows[:5]) + (" ..." if len(rows) > 5 else "")
        lines.append(f"{label}: B {verdict.value} in {len(rows)} of {total} scenario(s): {names}")
    return lines


def _outcome_finding(delta: OutcomeDelta) -> str:
    return (
        f"{delta.outcome} ({scope_text(delta.scope, delta.name)}): B {delta.verdict.value}, "
        f"{delta.a_only} pair(s) lost and {delta.b_only} gained of {delta.pairs}, "
        f"McNemar p = {delta.p_value:.3g}"
    )


def driver_report(
    a: Scorecard,
    b: Scorecard,
    traces_a: Sequence[Trace] = (),
    traces_b: Sequence[Trace] | None = None,
    *,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    alpha: float = ALPHA,
    seed: int = 0,
) -> DriverReport:
    """Compare run B (build under test) with run A (reference) on the scenarios both ran."""
    traces_b = traces_b or ()
    draws = _Draws(resamples, confidence, seed)
    runs_a, runs_b = group_trials(a.scenarios), group_trials(b.scenarios)
    common = [s for s in runs_a if s in runs_b]
    categories = {s: runs_a[s][0].category for s in common}
    scopes = _scope_groups(common, categories)
    notes = [
        f"run {card.run_id} is a GAIA scorecard: GAIA records no per-turn wall time, so its "
        f"turns carry no speeds trialbox can pair (scenario averages only)"
        for card in (a, b)
        if card.config.extra.get("source_format") == "gaia"
    ]

    speed = []
    for metric in SPEED_METRICS:
        if metric.turn_value is None:
            if not (traces_a and traces_b):
                notes.append(f"{metric.label}: needs both runs' traces; not compared")
                continue
            sa, sb = _index_samples(traces_a), _index_samples(traces_b)
        else:
            sa, sb = _turn_samples(a, metric), _turn_samples(b, metric)
        if not any(sa.get(s) for s in common) and not any(sb.get(s) for s in common):
            notes.append(f"{metric.label}: not measured on either run")
            continue
        speed += [
            _delta(metric.key, metric.label, metric.unit, metric.lower_is_better, scope, sa, sb,
                   draws)
            for scope in scopes
        ]

    score_a, score_b = _score_samples(runs_a), _score_samples(runs_b)
    scores = [
        _delta("score", "judged score", "", None, scope, score_a, score_b, draws)
        for scope in scopes
        if scope[0] != "scenario"
    ]
    if not any(score_a.values()) or not any(score_b.values()):
        scores = []
        notes.append("judged score: a run was not judged; quality rests on checks and completion")

    outcomes = []
    for name, outcome in OUTCOMES:
        for kind, label, ids in scopes:
            if kind == "scenario":
                continue
            pairs = _pairs(ids, runs_a, runs_b, outcome)
            if pairs or kind == "all":
                outcomes.append(_outcome_delta(name, kind, label, pairs, alpha))
    outcomes = [o for o in outcomes if o.pairs or o.outcome == "completed"]

    rows = [_scenario_quality(s, runs_a[s], runs_b[s]) for s in common]
    k, hat_a, hat_b = _suite_pass_k(rows)
    if a.config.trials <= 1 or b.config.trials <= 1:
        notes.append("one trial per scenario on a side: pass^k is pass^1 and each scenario "
                     "is one pair; --trials N gives tighter answers")
    findings = [
        _finding(d) for d in speed + scores if d.verdict.beyond_noise and d.scope != "scenario"
    ]
    findings += _scenario_findings(speed)
    findings += [_outcome_finding(o) for o in outcomes if o.verdict.beyond_noise]
    return DriverReport(
        a_label=a.run_id,
        b_label=b.run_id,
        fingerprint=fingerprint(a, b, traces_a, traces_b),
        speed=speed,
        scores=scores,
        outcomes=outcomes,
        scenarios=rows,
        pass_k=k,
        pass_hat_k_a=hat_a,
        pass_hat_k_b=hat_b,
        only_in_a=[s for s in runs_a if s not in runs_b],
        only_in_b=[s for s in runs_b if s not in runs_a],
        beyond_noise=findings,
        notes=notes,
        confidence=confidence,
        alpha=alpha,
        resamples=resamples,
        seed=seed,
    )
