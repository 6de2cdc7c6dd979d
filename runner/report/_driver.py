"""The driver-build report: the same suite on two builds (drivers, images, devices), compared.

A hardware vendor asks three questions of runs A and B: what differs between the two machines
and stacks; is B faster or slower, beyond the noise; did quality move, beyond the noise. This
module answers them from two scorecards (and, for indexing time, their traces) into one
`DriverReport`.

How (the statistics are in runner/report/_stats.py):
- the scenario is the unit. Speeds and scores are compared on the scenarios both runs have,
  paired (scenario s on A against s on B), each scenario weighing the same on both sides; the
  interval is a cluster bootstrap over those scenarios (trials and turns nested inside).
- a speed is paired by turn inside the scenario (turn t on B against turn t on A, the median
  of each turn's trials, log scale), and the scenarios' changes are summed up by their
  10 %-trimmed mean. Why, measured (tests/unit/test_driver_null.py, front-door noise of this
  machine, 79 scenarios × 5 trials): TTFT +40 % was found in 7.5 % of pairs by the log ratio
  of scenario means, 78 % paired by turn with medians, 92 % with the trimmed mean on top; the
  A/A false-finding share stayed 4–4.5 %.
- one scenario alone is tested over its trials (exact permutation test); quality by the exact
  McNemar test on paired trials, and pass^k.
- one family of headline questions (every metric and outcome over all scenarios), adjusted by
  Benjamini–Hochberg; categories and single scenarios are looked at only for a headline that
  moved (gatekeeping), each set adjusted by Benjamini–Hochberg again. So when nothing changed,
  the chance of any finding at all stays at alpha.
- every verdict states its n; below the n that could show a change it is "too few samples".
"""

from __future__ import annotations

import json
import math
import statistics
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from runner.records.status import JUDGED, Status
from runner.report._fold import group_trials
from runner.report._identity import requested_device, served_elsewhere
from runner.report._models import ScenarioResult, Scorecard, Trace, TurnResult
from runner.report._stats import (
    adjust_bh,
    detectable_change,
    mcnemar_exact,
    paired_cluster_bootstrap,
    relative_change,
    scenario_differences,
    smallest_p,
    trial_permutation_p,
    trimmed_mean,
    turn_paired_difference,
)
from runner.verdict.trials import pass_hat_k

NOT_TESTED = "not tested: the all-scenarios result did not move beyond noise"
#: Below this many paired scenarios no result over scenarios can be called: the sign-flip test's
#: smallest p, 2 / 2^n, is 0.0625 for 5 (and a bootstrap over so few has few distinct draws).
MIN_SCENARIOS = 6
ALPHA = 0.05
CONFIDENCE = 0.95
RESAMPLES = 2000
POWER = 0.8  # the minimum detectable change is the one found this often


class DeviceMismatchError(ValueError):
    """A run served on another device than it asked for: not a driver comparison."""


class DecodingMismatchError(ValueError):
    """One run decoded repeatably (`trialbox run --repeatable-decoding`), the other sampled."""


#: How a run decoded when its scorecard does not say (runs from before --repeatable-decoding).
SAMPLED_DECODING = "sampled (the agent's own settings)"


def decoding_of(card: Scorecard) -> str:
    """How the run's sandboxes decoded (`RunConfig.extra["decoding"]`, set by `trialbox run`)."""
    recorded = card.config.extra.get("decoding")
    return recorded if isinstance(recorded, str) and recorded else SAMPLED_DECODING


def check_decoding(a: Scorecard, b: Scorecard) -> None:
    """Refuse to set a repeatable run against a sampled one: under greedy decoding every trial
    repeats one conversation, so its prompts (and TTFT) differ from sampled trials' by the
    decoding alone, and a "change" would be the mode, not the build."""
    repeatable = [card.run_id for card in (a, b) if decoding_of(card) != SAMPLED_DECODING]
    if len(repeatable) == 1:
        sampled = b.run_id if repeatable[0] == a.run_id else a.run_id
        raise DecodingMismatchError(
            f"not a speed comparison: run {repeatable[0]} decoded repeatably "
            f"(--repeatable-decoding) and run {sampled} sampled; run both the same way")


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
    """One metric over one scope: B against A, paired by scenario, with a verdict."""

    metric: str = Field(description="ttft_s | tokens_per_s | turn_wall_s | index_s | score")
    label: str = Field(description="what a reader calls the metric")
    unit: str = Field(description="unit of mean_a/mean_b")
    relative: bool = Field(description="change is relative (B/A − 1) or absolute (B − A)")
    scope: str = Field(description="all | category | scenario")
    name: str = Field(description="'all', a category or a scenario id")
    scenarios: int = Field(default=0, description="scenarios paired between A and B in scope")
    n_a: int = Field(description="trials on A the scope's values come from")
    n_b: int = Field(description="trials on B the scope's values come from")
    mean_a: float | None = Field(
        default=None, description="mean over the paired scenarios of A's scenario means"
    )
    mean_b: float | None = Field(
        default=None, description="mean over the paired scenarios of B's scenario means"
    )
    change: float | None = Field(
        default=None,
        description="B vs A: for a speed exp(the 10 %-trimmed mean of the per-scenario log "
        "changes) − 1 (each scenario weighs the same; a scenario's change paired by turn), "
        "else the mean per-scenario difference",
    )
    ci_low: float | None = Field(
        default=None, description="lower bound of the cluster-bootstrap interval (unadjusted)"
    )
    ci_high: float | None = Field(
        default=None, description="upper bound of the cluster-bootstrap interval (unadjusted)"
    )
    p_value: float | None = Field(
        default=None, description="two-sided p of no change (bootstrap, or permutation per scenario)"
    )
    p_adjusted: float | None = Field(
        default=None, description="p after Benjamini–Hochberg over its family; the verdict uses it"
    )
    standard_error: float | None = Field(
        default=None, description="bootstrap standard error of the change (log scale if relative)"
    )
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
    p_adjusted: float | None = Field(
        default=None, description="p after Benjamini–Hochberg over its family; the verdict uses it"
    )
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


class DetectableChange(_Record):
    """How large a change of one metric this run's n and noise could tell from noise."""

    metric: str = Field(description="metric key, as in MetricDelta")
    label: str = Field(description="what a reader calls the metric")
    relative: bool = Field(description="sizes are relative (0.05 = 5 %) or absolute")
    scenarios: int = Field(description="paired scenarios")
    trials: int = Field(description="trials per scenario (the smaller side's run setting)")
    noise_floor: float = Field(
        description="a change smaller than ± this cannot be told from noise (interval half-width)"
    )
    detectable: float = Field(description="a change of ± this is found POWER of the time")
    power: float = Field(description="the share of runs in which `detectable` is found")


class DriverReport(_Record):
    a_label: str = Field(description="run A (the reference build): its run id")
    b_label: str = Field(description="run B (the build under test): its run id")
    fingerprint: list[FingerprintRow] = Field(default_factory=list, description="A vs B setup")
    speed: list[MetricDelta] = Field(default_factory=list, description="speed deltas")
    scores: list[MetricDelta] = Field(default_factory=list, description="judged score deltas")
    outcomes: list[OutcomeDelta] = Field(default_factory=list, description="paired outcomes")
    scenarios: list[ScenarioQuality] = Field(default_factory=list, description="per scenario")
    detectable: list[DetectableChange] = Field(
        default_factory=list, description="minimum detectable change per speed metric"
    )
    pass_k: int | None = Field(default=None, description="k for the suite's pass^k")
    pass_hat_k_a: float | None = Field(default=None, description="mean pass^k over scenarios, A")
    pass_hat_k_b: float | None = Field(default=None, description="mean pass^k over scenarios, B")
    only_in_a: list[str] = Field(default_factory=list, description="scenarios B did not run")
    only_in_b: list[str] = Field(default_factory=list, description="scenarios A did not run")
    beyond_noise: list[str] = Field(default_factory=list, description="the findings, one line each")
    rules: list[str] = Field(default_factory=list, description="the run rules the report applied")
    notes: list[str] = Field(default_factory=list, description="caveats a reader must know")
    speed_source: str = Field(
        default="not measured",
        description="where the compared speed figures came from (front_door, or what the "
        "scorecards had)",
    )
    warmup: int = Field(default=0, description="scenario runs per side whose speeds were dropped")
    discarded_a: list[str] = Field(
        default_factory=list, description="result keys on A whose speed figures were discarded"
    )
    discarded_b: list[str] = Field(
        default_factory=list, description="result keys on B whose speed figures were discarded"
    )
    order_in_time: str = Field(
        default="unknown",
        description="how A's and B's scenario runs lay in time: 'alternated' (their spans "
        "overlap: trials interleaved or run side by side), 'back to back' (one run, then the "
        "other) or 'unknown' (a run without times)",
    )
    served_on_a: str | None = Field(default=None, description="device that served run A")
    served_on_b: str | None = Field(default=None, description="device that served run B")
    multiplicity: str = Field(
        default="Benjamini–Hochberg", description="the multiplicity control applied"
    )
    confidence: float = Field(description="interval confidence level")
    alpha: float = Field(description="significance level every adjusted p is compared with")
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


#: Counters the LLM server reports beside its settings: a snapshot of the moment, not the setup
#: (an A/A pair showed "in_flight 0 vs 1" as the one difference).
VOLATILE = ("in_flight",)


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
            "decoding": decoding_of(card),
            "agent.gaia_version": next(
                (t.transcript.gaia_version for t in traces if t.transcript), None
            ),
            "hardware": c.hardware,
            "images": c.images,
            "llm_server": c.llm_server,
        },
        flat,
    )
    return {k: v for k, v in flat.items() if k.rsplit(".", 1)[-1] not in VOLATILE}


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


def differing_settings(rows: Sequence[FingerprintRow]) -> tuple[list[FingerprintRow], str]:
    """The settings a reader must compare (those that differ) and a line for the rest."""
    shown = [r for r in rows if r.differs]
    same = len(rows) - len(shown)
    if not same:
        return shown, ""
    return shown, f"{same} identical setting(s) not shown" + ("" if shown else " (none differs)")


# --- samples -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    lower_is_better: bool | None  # None: a score (higher is better, absolute change)
    turn_value: Callable[[TurnResult], float | None] | None  # None: comes from traces

    @property
    def relative(self) -> bool:
        return self.lower_is_better is not None


def _perf(get: Callable[[Any], float | None]) -> Callable[[TurnResult], float | None]:
    return lambda t: get(t.performance) if t.performance is not None else None


SPEED_METRICS = (
    Metric("ttft_s", "time to first token", "s", True, _perf(lambda p: p.time_to_first_token_s)),
    Metric("tokens_per_s", "decode speed", "tok/s", False, _perf(lambda p: p.tokens_per_s)),
    Metric("turn_wall_s", "turn wall time", "s", True, _perf(lambda p: p.wall_s)),
    Metric("index_s", "index time per document", "s", True, None),
)
SCORE = Metric("score", "judged score", "", None, None)

TrialValues = dict[str, list[float]]
"""scenario id → one value per trial (the mean over that trial's turns, or documents)."""

TurnCells = dict[str, dict[int, list[float]]]
"""scenario id → turn number → one value per trial that measured that turn."""

#: A speed's per-scenario change is the mean over turns of the median trial's log ratio (True)
#: or of the mean trial's (False); see `turn_paired_difference`.
TURN_MEDIAN = True
#: A speed's change over scenarios is the trimmed mean of the scenarios' changes: the top and
#: bottom SPEED_TRIM of them left out (0 = the plain mean); see `paired_cluster_bootstrap`.
SPEED_TRIM = 0.1

FRONT_DOOR = "front_door"


def _source(turn: TurnResult) -> str:
    # A trace written before sources were recorded carries GAIA's turn_metrics.
    source = getattr(turn.performance, "source", None) if turn.performance else None
    return str(source) if source else "gaia_turn_metrics"


def speed_source(a: Scorecard, b: Scorecard) -> str | None:
    """front_door when both runs metered turns at the LLM's front door; None = all turns."""
    def has_front_door(card: Scorecard) -> bool:
        return any(_source(t) == FRONT_DOOR for row in card.scenarios for t in row.turns)

    return FRONT_DOOR if has_front_door(a) and has_front_door(b) else None


def _sources_seen(card: Scorecard) -> set[str]:
    return {_source(t) for row in card.scenarios for t in row.turns if t.performance}


def _turn_trials(
    card: Scorecard, metric: Metric, dropped: set[str], source: str | None
) -> TrialValues:
    assert metric.turn_value is not None
    samples: TrialValues = {}
    for row in card.scenarios:
        if row.key in dropped:
            continue
        values = [
            metric.turn_value(t) for t in row.turns if source is None or _source(t) == source
        ]
        # Zero or negative = not measured (GAIA's rule too); a speed is never 0.
        measured = [v for v in values if v is not None and v > 0]
        if measured:
            samples.setdefault(row.id, []).append(statistics.fmean(measured))
    return samples


def _turn_cells(
    card: Scorecard, metric: Metric, dropped: set[str], source: str | None
) -> TurnCells:
    assert metric.turn_value is not None
    cells: TurnCells = {}
    for row in card.scenarios:
        if row.key in dropped:
            continue
        for t in row.turns:
            value = metric.turn_value(t) if source is None or _source(t) == source else None
            if value is not None and value > 0:
                cells.setdefault(row.id, {}).setdefault(t.turn, []).append(value)
    return cells


def _index_trials(traces: Sequence[Trace], dropped: set[str]) -> TrialValues:
    samples: TrialValues = {}
    for trace in traces:
        if trace.result.key in dropped:
            continue
        docs = trace.transcript.indexed if trace.transcript else []
        durations = [d.duration_s for d in docs if d.error is None and d.duration_s > 0]
        if durations:
            samples.setdefault(trace.result.id, []).append(statistics.fmean(durations))
    return samples


def _score_trials(runs: dict[str, list[ScenarioResult]]) -> TrialValues:
    return {
        sid: scores
        for sid, rows in runs.items()
        if (scores := [r.score for r in rows if r.status in JUDGED and r.score is not None])
    }


def warmup_keys(card: Scorecard, warmup: int) -> list[str]:
    """The first `warmup` scenario runs in the scorecard's order (the order they were planned)."""
    if warmup < 0:
        raise ValueError(f"--warmup {warmup} must be 0 or more")
    return [row.key for row in card.scenarios[:warmup]]


def _scope_groups(
    common: Sequence[str], categories: dict[str, str]
) -> list[tuple[str, str, list[str]]]:
    groups = [("all", "all", list(common))]
    for category in sorted({categories[s] for s in common}):
        groups.append(("category", category, [s for s in common if categories[s] == category]))
    groups += [("scenario", s, [s]) for s in common]
    return groups


class _Knobs(TypedDict):
    resamples: int
    confidence: float
    seed: int


# --- tests ---------------------------------------------------------------------------------


def _direction(change: float, lower_is_better: bool | None) -> Change:
    up = change > 0
    if lower_is_better is None:  # a score: higher is better
        return Change.BETTER if up else Change.WORSE
    return Change.SLOWER if up == lower_is_better else Change.FASTER


def _smallest_permutation_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p a permutation test of n_a against n_b values can give."""
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


def _seed(seed: int, *parts: str) -> int:
    # Each test draws from its own stream, so adding a scope never moves another's interval.
    return seed * 2**32 + zlib.crc32("/".join(parts).encode())


def _delta(
    metric: Metric,
    scope: tuple[str, str, list[str]],
    a: TrialValues,
    b: TrialValues,
    *,
    resamples: int,
    confidence: float,
    seed: int,
    tested: bool = True,
    cells: tuple[TurnCells, TurnCells] | None = None,
) -> MetricDelta:
    """The scope's estimate and unadjusted p; the verdict waits for the family's adjustment.

    With `cells` (a turn-metered speed) a scenario's difference is paired by turn
    (`turn_paired_difference`); without, it is the log ratio (or difference) of its means.

    Not `tested` (a drill-down under a headline within noise): the change is shown, no test
    is run and the verdict is no detectable change.
    """
    kind, name, ids = scope
    paired = [s for s in ids if a.get(s) and b.get(s)]
    means_a = [statistics.fmean(a[s]) for s in paired]
    means_b = [statistics.fmean(b[s]) for s in paired]
    base = MetricDelta(
        metric=metric.key,
        label=metric.label,
        unit=metric.unit,
        relative=metric.relative,
        scope=kind,
        name=name,
        scenarios=len(paired),
        n_a=sum(len(a[s]) for s in paired),
        n_b=sum(len(b[s]) for s in paired),
        mean_a=statistics.fmean(means_a) if paired else None,
        mean_b=statistics.fmean(means_b) if paired else None,
        verdict=Change.TOO_FEW,
    )
    if kind == "scenario":
        if not paired:
            base.note = "not measured on both sides"
            return base
        trials_a, trials_b = a[name], b[name]
        floor = _smallest_permutation_p(len(trials_a), len(trials_b))
        turn_change = (
            turn_paired_difference(
                cells[0].get(name, {}), cells[1].get(name, {}), median=TURN_MEDIAN
            )
            if cells is not None and metric.relative else None
        )
        base.change = (
            math.expm1(turn_change) if turn_change is not None  # what the scopes above sum up
            else relative_change(means_a[0], means_b[0]) if metric.relative
            else means_b[0] - means_a[0]
        )
        if not tested:
            base.verdict, base.note = Change.NO_CHANGE, NOT_TESTED
            return base
        if floor > ALPHA:
            base.note = (
                f"{len(trials_a)} vs {len(trials_b)} trials: even the clearest split gives "
                f"p ≥ {floor:.2g}; run more trials"
            )
            return base
        if metric.relative:
            trials_a, trials_b = [math.log(v) for v in trials_a], [math.log(v) for v in trials_b]
        base.p_value = trial_permutation_p(
            trials_a, trials_b, resamples=resamples, seed=_seed(seed, metric.key, kind, name)
        )
        return base
    if not paired:
        base.note = "no scenario measured on both sides"
        return base
    differences = scenario_differences(means_a, means_b, relative=metric.relative)
    trim = SPEED_TRIM if metric.relative else 0.0
    if cells is not None and metric.relative:
        by_turn = [
            turn_paired_difference(cells[0].get(s, {}), cells[1].get(s, {}), median=TURN_MEDIAN)
            for s in paired
        ]
        differences = [d if t is None else t for d, t in zip(differences, by_turn, strict=True)]
    mean = trimmed_mean(differences, trim)
    base.change = math.expm1(mean) if metric.relative else mean
    if not tested:
        base.verdict, base.note = Change.NO_CHANGE, NOT_TESTED
        return base
    if len(paired) < MIN_SCENARIOS:
        base.note = f"{len(paired)} paired scenario(s); at least {MIN_SCENARIOS} needed"
        if len(paired) >= 2:  # still worth its noise: the minimum detectable change says how far
            base.standard_error = paired_cluster_bootstrap(
                differences, resamples=resamples, confidence=confidence,
                seed=_seed(seed, metric.key, kind, name), trim=trim,
            ).standard_error
        return base
    test = paired_cluster_bootstrap(
        differences, resamples=resamples, confidence=confidence,
        seed=_seed(seed, metric.key, kind, name), trim=trim,
    )
    shown = math.expm1 if metric.relative else float
    base.change, base.ci_low, base.ci_high = (shown(v) for v in test[:3])
    base.p_value = test.p_value
    base.standard_error = test.standard_error
    return base


def _detectable(
    headline: Sequence[MetricDelta], *, tests: int, trials: int, confidence: float, alpha: float
) -> list[DetectableChange]:
    """The noise floor (the interval's half-width) and the change found POWER of the time.

    The second is sized for the adjusted test a lone change faces: when only one of `tests`
    headline questions moved, Benjamini–Hochberg asks it for p < alpha / tests.
    """
    sizes = []
    for d in headline:
        if d.standard_error is None:
            continue
        floor, _ = detectable_change(
            d.standard_error, d.scenarios, confidence=confidence, power=POWER
        )
        _, found = detectable_change(
            d.standard_error, d.scenarios, confidence=1 - alpha / max(tests, 1), power=POWER
        )
        shown = math.expm1 if d.relative else float
        sizes.append(DetectableChange(
            metric=d.metric, label=d.label, relative=d.relative, scenarios=d.scenarios,
            trials=trials, noise_floor=shown(floor), detectable=shown(found), power=POWER,
        ))
    return sizes


def _decide(
    rows: Sequence[MetricDelta],
    lower_is_better: dict[str, bool | None],
    alpha: float,
    outcomes: Sequence[OutcomeDelta] = (),
) -> None:
    """Benjamini–Hochberg over one family (metric rows that were tested, and outcomes that could
    show a change); each gets its adjusted p and its verdict."""
    tested = [r for r in rows if r.p_value is not None]
    asked = [o for o in outcomes if o.verdict is not Change.TOO_FEW]
    p_values = [r.p_value for r in tested if r.p_value is not None] + [o.p_value for o in asked]
    adjusted = adjust_bh(p_values)
    for row, p in zip(tested, adjusted[: len(tested)], strict=True):
        row.p_adjusted = p
        moved = p < alpha and row.change is not None and row.change != 0
        row.verdict = (
            _direction(row.change, lower_is_better[row.metric])
            if moved and row.change is not None else Change.NO_CHANGE
        )
    for outcome, p in zip(asked, adjusted[len(tested):], strict=True):
        outcome.p_adjusted = p
        if p < alpha:
            outcome.verdict = Change.BETTER if outcome.b_only > outcome.a_only else Change.WORSE
        else:
            outcome.verdict = Change.NO_CHANGE


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


# --- device --------------------------------------------------------------------------------


def served_on(card: Scorecard) -> str | None:
    """The device the LLM server said it ran on; the requested device when it named none."""
    served = card.config.served_on
    return served if served not in (None, "unknown") else requested_device(card.config)


def check_devices(a: Scorecard, b: Scorecard, *, allow_mismatch: bool) -> list[str]:
    """Refuse a driver comparison of a run that served on another device than it asked for."""
    problems = [
        f"run {card.run_id} asked for {requested_device(card.config)} but was served on "
        f"{served_on(card)}"
        for card in (a, b)
        if served_elsewhere(card.config)  # gpu (GAIA's name) is rocm; unknown proves nothing
    ]
    if problems and not allow_mismatch:
        raise DeviceMismatchError(
            f"not a driver comparison: {'; '.join(problems)} (fix the device access and run "
            "again, or pass --allow-device-mismatch to compare anyway)"
        )
    return [f"device mismatch allowed (--allow-device-mismatch): {p}" for p in problems]


# --- order in time -------------------------------------------------------------------------


def run_span(card: Scorecard) -> tuple[datetime, datetime] | None:
    """When a run started and (estimated) ended: its start plus its scenarios' wall time over
    its concurrency. Rows carry no clock times; the estimate is close at concurrency 1, where
    scenarios run one after another. None without wall times."""
    walls = [row.wall_s for row in card.scenarios if row.wall_s]
    if not walls:
        return None
    lasted = sum(walls) / max(card.config.concurrency or 1, 1)
    return card.timestamp, card.timestamp + timedelta(seconds=lasted)


def order_in_time(a: Scorecard, b: Scorecard) -> tuple[str, str]:
    """('alternated' | 'back to back' | 'unknown', one line saying so with the times)."""
    span_a, span_b = run_span(a), run_span(b)
    if span_a is None or span_b is None:
        return "unknown", (
            "order in time: unknown (a run has no wall times), so whether A and B were "
            "alternated cannot be told"
        )

    def shown(span: tuple[datetime, datetime]) -> str:
        return f"{span[0]:%Y-%m-%d %H:%M}–~{span[1]:%H:%M} UTC"

    spans = f"A {shown(span_a)}, B {shown(span_b)}"
    if span_a[0] < span_b[1] and span_b[0] < span_a[1]:
        return "alternated", (
            f"order in time: alternated ({spans}: the runs overlap, so a drift of the machine "
            "falls on both alike)"
        )
    first = "A" if span_a[0] <= span_b[0] else "B"
    return "back to back", (
        f"order in time: back to back, {first} first ({spans}), not alternated: a drift of "
        "the machine between the two runs (heat, load, caches) moves every scenario of one "
        "run alike and the intervals cannot tell it from a change of the build"
    )


RUN_RULE = (
    "run rule (in the MLPerf spirit): discard warm-up (--warmup N), alternate A and B on one "
    "machine (short runs of each, in turn) or pair nodes (--per-node), and repeat an A/A pair "
    "to see the machine's run-to-run spread before reading a change near the noise floor"
)


# --- the report ----------------------------------------------------------------------------


def scope_text(scope: str, name: str) -> str:
    return "all scenarios" if scope == "all" else f"{scope} {name}"


def _shown(delta: MetricDelta, value: float) -> str:
    return f"{value * 100:+.1f}%" if delta.relative else f"{value:+.2f}"


def _n_text(delta: MetricDelta) -> str:
    return f"n = {delta.scenarios} scenario(s), {delta.n_a} vs {delta.n_b} trials"


def _finding(delta: MetricDelta) -> str:
    assert delta.change is not None and delta.ci_low is not None and delta.ci_high is not None
    return (
        f"{delta.label} ({scope_text(delta.scope, delta.name)}, {_n_text(delta)}): "
        f"B {delta.verdict.value} {_shown(delta, delta.change)} [{_shown(delta, delta.ci_low)}, "
        f"{_shown(delta, delta.ci_high)}], adjusted p = {delta.p_adjusted:.3g}"
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
        f"{delta.outcome} ({scope_text(delta.scope, delta.name)}, n = {delta.pairs} pairs): "
        f"B {delta.verdict.value}, {delta.a_only} pair(s) lost and {delta.b_only} gained, "
        f"McNemar p = {delta.p_value:.3g}, adjusted p = {delta.p_adjusted:.3g}"
    )


def detectable_text(d: DetectableChange) -> str:
    """'with 3 trials of 59 scenarios, a TTFT change smaller than ±x % cannot be told ...'"""
    def size(v: float) -> str:
        if d.relative and v > 9:  # beyond ×10 the percentage says nothing more
            return "a factor of more than 10"
        return f"±{v * 100:.1f}%" if d.relative else f"±{v:.2f}"

    return (
        f"with {d.trials} trial(s) of {d.scenarios} scenarios, a {d.label} change smaller than "
        f"{size(d.noise_floor)} cannot be told from noise; one of {size(d.detectable)} is found "
        f"{d.power * 100:.0f}% of the time"
    )


UNCOVERED = (
    "what the intervals do not cover: a difference of the machine between the two runs "
    "(heat, other load, caches, a background job) moves every scenario of one run alike and "
    "looks like a change of the build; run A and B alternately (or on paired nodes with "
    "--per-node), repeat an A/A pair to see this machine's run-to-run spread, and read a "
    "finding near its noise floor with care"
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
    warmup: int = 0,
    allow_device_mismatch: bool = False,
) -> DriverReport:
    """Compare run B (build under test) with run A (reference) on the scenarios both ran.

    Raises DeviceMismatchError when a run served on another device than it asked for (unless
    allowed), DecodingMismatchError when one run decoded repeatably and the other sampled,
    ValueError for a negative warmup.
    """
    traces_b = traces_b or ()
    check_decoding(a, b)
    notes = check_devices(a, b, allow_mismatch=allow_device_mismatch)
    dropped_a, dropped_b = warmup_keys(a, warmup), warmup_keys(b, warmup)
    runs_a, runs_b = group_trials(a.scenarios), group_trials(b.scenarios)
    common = [s for s in runs_a if s in runs_b]
    categories = {s: runs_a[s][0].category for s in common}
    scopes = _scope_groups(common, categories)
    notes += [
        f"run {card.run_id} is a GAIA scorecard: GAIA records no per-turn wall time, so its "
        f"turns carry no speeds trialbox can pair (scenario averages only)"
        for card in (a, b)
        if card.config.extra.get("source_format") == "gaia"
    ]
    source = speed_source(a, b)
    seen = sorted(_sources_seen(a) | _sources_seen(b))
    compared_from = source or (", ".join(seen) if seen else "not measured")
    if source is None and seen:
        notes.append(
            f"speed figures compared as the scorecards have them ({compared_from}), not "
            "metered at the LLM's front door: GAIA's turn_metrics come from the server's "
            "global /stats, the last request of anyone, so at concurrency > 1 a turn may carry "
            "another sandbox's figures"
        )
    knobs = _Knobs(resamples=resamples, confidence=confidence, seed=seed)
    better: dict[str, bool | None] = {m.key: m.lower_is_better for m in (*SPEED_METRICS, SCORE)}

    speed: list[MetricDelta] = []
    samples: dict[str, tuple[Metric, TrialValues, TrialValues]] = {}
    turn_cells: dict[str, tuple[TurnCells, TurnCells]] = {}
    for metric in SPEED_METRICS:
        if metric.turn_value is None:
            if not (traces_a and traces_b):
                notes.append(f"{metric.label}: needs both runs' traces; not compared")
                continue
            sa, sb = _index_trials(traces_a, set(dropped_a)), _index_trials(traces_b, set(dropped_b))
        else:
            sa = _turn_trials(a, metric, set(dropped_a), source)
            sb = _turn_trials(b, metric, set(dropped_b), source)
            turn_cells[metric.key] = (
                _turn_cells(a, metric, set(dropped_a), source),
                _turn_cells(b, metric, set(dropped_b), source),
            )
        if not any(sa.get(s) for s in common) and not any(sb.get(s) for s in common):
            notes.append(f"{metric.label}: not measured on either run")
            continue
        samples[metric.key] = (metric, sa, sb)
        speed.append(_delta(metric, scopes[0], sa, sb, **knobs, cells=turn_cells.get(metric.key)))

    score_a, score_b = _score_trials(runs_a), _score_trials(runs_b)
    scores = []
    if any(score_a.values()) and any(score_b.values()):
        scores.append(_delta(SCORE, scopes[0], score_a, score_b, **knobs))
        samples[SCORE.key] = (SCORE, score_a, score_b)
    else:
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

    # The headline family: every metric and outcome over all scenarios, adjusted together.
    headline = [d for d in speed + scores if d.scope == "all"]
    # Too few scenarios for a result over scenarios: each scenario (tested over its trials)
    # becomes a headline question itself, adjusted with the rest.
    few = {
        d.metric for d in headline
        if d.p_value is None and 0 < d.scenarios < MIN_SCENARIOS and d.metric != SCORE.key
    }
    for key in few:
        metric, sa, sb = samples[key]
        speed += [_delta(metric, scope, sa, sb, **knobs, cells=turn_cells.get(key))
                  for scope in scopes if scope[0] == "scenario"]
    promoted = [d for d in speed if d.metric in few and d.scope == "scenario"]
    all_outcomes = [o for o in outcomes if o.scope == "all"]
    _decide(headline + promoted, better, alpha, all_outcomes)
    detectable = _detectable(
        [d for d in headline if d.metric != SCORE.key],
        tests=len(headline) + sum(o.scope == "all" for o in outcomes),
        trials=min(a.config.trials, b.config.trials),
        confidence=confidence,
        alpha=alpha,
    )
    # Drill down only where the headline moved; each metric's categories and its scenarios are
    # one family each.
    for d in headline:
        metric, sa, sb = samples[d.metric]
        deltas = speed if d.metric != "score" else scores
        for kind in ("category", "scenario"):
            if kind == "scenario" and (metric is SCORE or d.metric in few):
                continue  # scores: the pass^k rows below; few: tested with the headline
            family = [
                _delta(metric, scope, sa, sb, **knobs, tested=d.verdict.beyond_noise,
                       cells=turn_cells.get(d.metric))
                for scope in scopes if scope[0] == kind
            ]
            _decide(family, better, alpha)
            deltas += family
    # Headline rows of metrics not measured on both sides stay first; order: all, categories,
    # scenarios per metric, as before.
    order = {"all": 0, "category": 1, "scenario": 2}
    keys = [m.key for m in SPEED_METRICS]
    speed.sort(key=lambda r: (keys.index(r.metric), order[r.scope]))
    for o in all_outcomes:
        drill = [x for x in outcomes if x.outcome == o.outcome and x.scope == "category"]
        if o.verdict.beyond_noise:
            _decide([], better, alpha, drill)
        else:
            for x in drill:
                if x.verdict is not Change.TOO_FEW:
                    x.verdict = Change.NO_CHANGE
                    x.note = NOT_TESTED

    rows = [_scenario_quality(s, runs_a[s], runs_b[s]) for s in common]
    k, hat_a, hat_b = _suite_pass_k(rows)
    if a.config.trials <= 1 or b.config.trials <= 1:
        notes.append("one trial per scenario on a side: pass^k is pass^1 and each scenario "
                     "is one pair; --trials N gives tighter answers")
    placed, order_text = order_in_time(a, b)
    notes.append(UNCOVERED)
    findings = [
        _finding(d) for d in speed + scores if d.verdict.beyond_noise and d.scope != "scenario"
    ]
    findings += _scenario_findings(speed)
    findings += [_outcome_finding(o) for o in outcomes if o.verdict.beyond_noise]
    rules = [
        "the unit is the scenario: A and B are paired on the scenarios both ran, each weighing "
        "the same on both sides; a speed's change in a scenario is paired by turn (turn t on B "
        "against turn t on A), other values are the mean over trials",
        f"intervals: {confidence * 100:.0f}% percentile cluster bootstrap over scenarios "
        f"({resamples} resamples, seed {seed}); at least {MIN_SCENARIOS} paired scenarios for "
        "a verdict; one scenario: exact permutation test over its trials",
        f"multiplicity: Benjamini–Hochberg over the all-scenarios results (speeds, score and "
        f"outcomes together) at {alpha:g}; categories and scenarios are tested only for a "
        "result that moved, Benjamini–Hochberg again within each; with fewer than "
        f"{MIN_SCENARIOS} paired scenarios each scenario is tested over its trials as a "
        "headline question",
        f"warm-up: the first {warmup} scenario run(s) of each side have their speed figures "
        "discarded" if warmup else "warm-up: none discarded (--warmup N drops the first N "
        "scenario runs' speed figures)",
        f"speed figures compared: {compared_from}; a scenario's change is the mean over its "
        f"turns of the change of the turn's {'median' if TURN_MEDIAN else 'mean'} trial (log "
        f"scale), over scenarios their {SPEED_TRIM:.0%}-trimmed mean",
        RUN_RULE,
        order_text,
    ]
    return DriverReport(
        a_label=a.run_id,
        b_label=b.run_id,
        fingerprint=fingerprint(a, b, traces_a, traces_b),
        speed=speed,
        scores=scores,
        outcomes=outcomes,
        scenarios=rows,
        detectable=detectable,
        pass_k=k,
        pass_hat_k_a=hat_a,
        pass_hat_k_b=hat_b,
        only_in_a=[s for s in runs_a if s not in runs_b],
        only_in_b=[s for s in runs_b if s not in runs_a],
        beyond_noise=findings,
        rules=rules,
        notes=notes,
        speed_source=compared_from,
        warmup=warmup,
        discarded_a=dropped_a,
        discarded_b=dropped_b,
        order_in_time=placed,
        served_on_a=served_on(a),
        served_on_b=served_on(b),
        confidence=confidence,
        alpha=alpha,
        resamples=resamples,
        seed=seed,
    )
