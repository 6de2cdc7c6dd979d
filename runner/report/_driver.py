"""The driver-build report: the same suite on two builds (drivers, images, devices), compared.

A hardware vendor asks three questions of runs A and B: what differs between the two machines
and stacks; is B faster or slower, beyond the noise; did quality move, beyond the noise. This
module answers them from two scorecards (and, for indexing time, their traces) into one
`DriverReport` and says its findings in sentences. Its parts: the models (_driver_models), what
differs besides the build (_driver_setup: settings, decoding, device, order in time), the values
compared (_driver_samples), the tests and verdicts (_driver_noise, _driver_quality); the
statistics are in _stats, the Markdown and HTML in _driver_render.

How:
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

from collections.abc import Sequence

from runner.report._driver_models import (
    Change,
    DetectableChange,
    DriverReport,
    MetricDelta,
    OutcomeDelta,
)
from runner.report._driver_noise import (
    ALPHA,
    CONFIDENCE,
    MIN_SCENARIOS,
    NOT_TESTED,
    RESAMPLES,
    SPEED_TRIM,
    TURN_MEDIAN,
    Knobs,
    decide,
    detectable_changes,
    metric_delta,
)
from runner.report._driver_quality import (
    OUTCOMES,
    outcome_delta,
    pairs_of,
    scenario_quality,
    suite_pass_k,
)
from runner.report._driver_samples import (
    SCORE,
    SPEED_METRICS,
    Metric,
    TrialValues,
    TurnCells,
    index_trials,
    scope_groups,
    score_trials,
    sources_seen,
    speed_source,
    turn_cells_of,
    turn_trials,
    warmup_keys,
)
from runner.report._driver_setup import (
    RUN_RULE,
    check_decoding,
    check_devices,
    fingerprint,
    order_in_time,
    served_on,
)
from runner.report._fold import group_trials
from runner.report._models import Scorecard, Trace


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
    scopes = scope_groups(common, categories)
    notes += [
        f"run {card.run_id} is a GAIA scorecard: GAIA records no per-turn wall time, so its "
        f"turns carry no speeds trialbox can pair (scenario averages only)"
        for card in (a, b)
        if card.config.extra.get("source_format") == "gaia"
    ]
    source = speed_source(a, b)
    seen = sorted(sources_seen(a) | sources_seen(b))
    compared_from = source or (", ".join(seen) if seen else "not measured")
    if source is None and seen:
        notes.append(
            f"speed figures compared as the scorecards have them ({compared_from}), not "
            "metered at the LLM's front door: GAIA's turn_metrics come from the server's "
            "global /stats, the last request of anyone, so at concurrency > 1 a turn may carry "
            "another sandbox's figures"
        )
    knobs = Knobs(resamples=resamples, confidence=confidence, seed=seed)
    better: dict[str, bool | None] = {m.key: m.lower_is_better for m in (*SPEED_METRICS, SCORE)}

    speed: list[MetricDelta] = []
    samples: dict[str, tuple[Metric, TrialValues, TrialValues]] = {}
    turn_cells: dict[str, tuple[TurnCells, TurnCells]] = {}
    for metric in SPEED_METRICS:
        if metric.turn_value is None:
            if not (traces_a and traces_b):
                notes.append(f"{metric.label}: needs both runs' traces; not compared")
                continue
            sa, sb = index_trials(traces_a, set(dropped_a)), index_trials(traces_b, set(dropped_b))
        else:
            sa = turn_trials(a, metric, set(dropped_a), source)
            sb = turn_trials(b, metric, set(dropped_b), source)
            turn_cells[metric.key] = (
                turn_cells_of(a, metric, set(dropped_a), source),
                turn_cells_of(b, metric, set(dropped_b), source),
            )
        if not any(sa.get(s) for s in common) and not any(sb.get(s) for s in common):
            notes.append(f"{metric.label}: not measured on either run")
            continue
        samples[metric.key] = (metric, sa, sb)
        speed.append(metric_delta(metric, scopes[0], sa, sb, **knobs, cells=turn_cells.get(metric.key)))

    score_a, score_b = score_trials(runs_a), score_trials(runs_b)
    scores = []
    if any(score_a.values()) and any(score_b.values()):
        scores.append(metric_delta(SCORE, scopes[0], score_a, score_b, **knobs))
        samples[SCORE.key] = (SCORE, score_a, score_b)
    else:
        notes.append("judged score: a run was not judged; quality rests on checks and completion")

    outcomes = []
    for name, outcome in OUTCOMES:
        for kind, label, ids in scopes:
            if kind == "scenario":
                continue
            pairs = pairs_of(ids, runs_a, runs_b, outcome)
            if pairs or kind == "all":
                outcomes.append(outcome_delta(name, kind, label, pairs, alpha))
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
        speed += [metric_delta(metric, scope, sa, sb, **knobs, cells=turn_cells.get(key))
                  for scope in scopes if scope[0] == "scenario"]
    promoted = [d for d in speed if d.metric in few and d.scope == "scenario"]
    all_outcomes = [o for o in outcomes if o.scope == "all"]
    decide(headline + promoted, better, alpha, all_outcomes)
    detectable = detectable_changes(
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
                metric_delta(metric, scope, sa, sb, **knobs, tested=d.verdict.beyond_noise,
                       cells=turn_cells.get(d.metric))
                for scope in scopes if scope[0] == kind
            ]
            decide(family, better, alpha)
            deltas += family
    # Headline rows of metrics not measured on both sides stay first; order: all, categories,
    # scenarios per metric, as before.
    order = {"all": 0, "category": 1, "scenario": 2}
    keys = [m.key for m in SPEED_METRICS]
    speed.sort(key=lambda r: (keys.index(r.metric), order[r.scope]))
    for o in all_outcomes:
        drill = [x for x in outcomes if x.outcome == o.outcome and x.scope == "category"]
        if o.verdict.beyond_noise:
            decide([], better, alpha, drill)
        else:
            for x in drill:
                if x.verdict is not Change.TOO_FEW:
                    x.verdict = Change.NO_CHANGE
                    x.note = NOT_TESTED

    rows = [scenario_quality(s, runs_a[s], runs_b[s]) for s in common]
    k, hat_a, hat_b = suite_pass_k(rows)
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
