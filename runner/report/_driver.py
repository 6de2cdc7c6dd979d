"""The driver-build report: the same suite on two builds (drivers, images, devices), compared.

A hardware vendor asks three questions of runs A and B: what differs between the two machines
and stacks; is B faster or slower, beyond the noise; did quality move, beyond the noise. This
module answers them from two scorecards (and, for indexing time, their traces) into one
`DriverReport` and says its findings in sentences. Its parts: the models (_driver_models), what
differs besides the build (_driver_setup: settings, decoding, device), when the runs happened
(_driver_time: order in time, drift), the values compared (_driver_samples), the tests and
verdicts (_driver_noise, _driver_quality), the smallest change it finds (_driver_power); the
statistics are in _stats, the Markdown and HTML in _driver_render.

How:
- the scenario is the unit. Speeds and scores are compared on the scenarios both runs have,
  paired (scenario s on A against s on B), each scenario weighing the same on both sides; the
  interval is a cluster bootstrap over those scenarios (trials and turns nested inside).
  The two sides of one `trialbox ab` are paired closer: a turn-metered speed by scenario
  trial, B's trial k against A's trial k, which ran in the block beside it (`block_changes`),
  so a drift cancels in each pair and 6 scenarios × 2 trials give 12 pairs to test.
- a speed is paired by turn inside the scenario (turn t on B against turn t on A, the median
  of each turn's trials, log scale; decode speed, without tails, the mean), and the scenarios'
  changes are summed up by their 10 %-trimmed mean (decode speed: the mean). Why, measured (tests/unit/test_driver_null.py, front-door noise of this
  machine, 79 scenarios × 5 trials): TTFT +40 % was found in 7.5 % of pairs by the log ratio
  of scenario means, 78 % paired by turn with medians, 92 % with the trimmed mean on top; the
  A/A false-finding share stayed 4–4.5 %.
- one scenario alone is tested over its trials (exact permutation test of the statistic its
  change is reported by); quality by the exact McNemar test on paired trials, and pass^k.
- one family of headline questions (every metric and outcome over all scenarios), adjusted by
  Benjamini–Hochberg at 0.7 alpha; categories only for a headline that moved (gatekeeping);
  every single scenario screened at 0.1 alpha (a change confined to 7 of 79 scenarios, which
  the trimmed mean leaves out, must still be found). So when nothing changed, the chance of
  any finding at all stays below alpha (simulated: 3 % of 100 A/A pairs, a drifting machine).
- every verdict states its n; below the n that could show a change it is "too few samples",
  and every printed size is simulated from the report's own test (_driver_power).
- a finding of two runs made back to back is marked as not separable from a drift of the
  machine, unless an A/A pair on the same machine bounds the drift.
"""

from __future__ import annotations

import math
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
    SCREEN_OWN_P,
    SPEED_TRIM,
    TURN_MEDIAN,
    Knobs,
    decide,
    detectable_changes,
    headline_alpha,
    headline_changes,
    metric_delta,
    screen_alpha,
    screen_rows,
    trim_of,
)
from runner.report._driver_power import SIMULATIONS
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
    TrialTurns,
    TrialUnits,
    TrialValues,
    ab_sessions,
    incomparable_turns,
    index_trials,
    one_ab,
    scope_groups,
    score_trials,
    sources_seen,
    speed_source,
    trial_turns_of,
    turn_trials,
    unit_turns_of,
    warmup_keys,
)
from runner.report._driver_setup import (
    RUN_RULE,
    check_decoding,
    check_devices,
    fingerprint,
    served_on,
)
from runner.report._driver_time import (
    ALTERNATED,
    NOT_SEPARABLE,
    drift_of,
    drift_text,
    order_in_time,
    session_marked,
    session_test,
    session_text,
)
from runner.report._fold import group_trials
from runner.report._models import Scorecard, Trace
from runner.report._stats import adjust_bh


def scope_text(scope: str, name: str) -> str:
    return "all scenarios" if scope == "all" else f"{scope} {name}"


def _shown(delta: MetricDelta, value: float) -> str:
    return f"{value * 100:+.1f}%" if delta.relative else f"{value:+.2f}"


def _n_text(delta: MetricDelta) -> str:
    blocks = (f", paired in {delta.block_pairs} A/B block pairs"
              if delta.block_pairs is not None else "")
    return f"n = {delta.scenarios} scenario(s), {delta.n_a} vs {delta.n_b} trials{blocks}"


def _finding(delta: MetricDelta) -> str:
    assert delta.change is not None and delta.ci_low is not None and delta.ci_high is not None
    return (
        f"{delta.label} ({scope_text(delta.scope, delta.name)}, {_n_text(delta)}): "
        f"B {delta.verdict.value} {_shown(delta, delta.change)} [{_shown(delta, delta.ci_low)}, "
        f"{_shown(delta, delta.ci_high)}], adjusted p = {delta.p_adjusted:.3g}"
    )


def _scenario_findings(deltas: Sequence[MetricDelta]) -> list[tuple[list[MetricDelta], str]]:
    """Per metric and direction, one line naming the scenarios the screen found moved."""
    moved: dict[tuple[str, Change], list[MetricDelta]] = {}
    for d in deltas:
        if d.scope == "scenario" and d.verdict.beyond_noise:
            moved.setdefault((d.label, d.verdict), []).append(d)
    lines = []
    for (label, verdict), rows in moved.items():
        total = sum(1 for d in deltas if d.scope == "scenario" and d.label == label)
        names = ", ".join(
            f"{d.name} {_shown(d, d.change or 0)} (adjusted p {d.p_adjusted:.2g})" for d in rows[:5]
        ) + (" ..." if len(rows) > 5 else "")
        lines.append((rows, f"{label}: B {verdict.value} in {len(rows)} of {total} scenario(s): "
                            f"{names}"))
    return lines


def _aa_bounds(
    aa: tuple[Scorecard, Scorecard], a: Scorecard, *, alpha: float, seed: int
) -> tuple[str, dict[str, float], str] | None:
    """(a note, per speed the largest |log change| the A/A pair's interval allows, its name)
    when the pair ran on A's machine; None (with no bound) otherwise."""
    first, second = aa
    if first.config.hardware != a.config.hardware:
        return None
    report = driver_report(first, second, alpha=alpha, seed=seed, power_simulations=0)
    limits = {
        d.metric: max(abs(math.log1p(d.ci_low)), abs(math.log1p(d.ci_high)))
        for d in report.speed
        if d.scope == "all" and d.ci_low is not None and d.ci_high is not None
    }
    name = f"{first.run_id} / {second.run_id}"
    shown = ", ".join(f"{k} ±{math.expm1(v) * 100:.1f}%" for k, v in limits.items())
    return (f"drift bound: the A/A pair {name} on this machine moved at most {shown}; a "
            "back-to-back finding beyond that is not the machine's drift alone", limits, name)


def _outcome_finding(delta: OutcomeDelta) -> str:
    return (
        f"{delta.outcome} ({scope_text(delta.scope, delta.name)}, n = {delta.pairs} pairs): "
        f"B {delta.verdict.value}, {delta.a_only} pair(s) lost and {delta.b_only} gained, "
        f"McNemar p = {delta.p_value:.3g}, adjusted p = {delta.p_adjusted:.3g}"
    )


def detectable_text(d: DetectableChange) -> str:
    """'with 3 trials of 59 scenarios, a TTFT change of ±x % is found 80 % of the time ...'"""
    def size(v: float) -> str:
        if d.relative and v > 9:  # beyond ×10 the percentage says nothing more
            return "a factor of more than 10"
        return f"±{v * 100:.1f}%" if d.relative else f"±{v:.2f}"

    head = f"with {d.trials} trial(s) of {d.scenarios} scenarios" + (
        f" ({d.block_pairs} A/B block pairs)" if d.block_pairs is not None else "")
    if d.detectable is None:
        return f"{head}, no {d.label} change of any size can be shown: {d.reason}"
    floor = f" (interval half-width {size(d.noise_floor)})" if d.noise_floor is not None else ""
    return (f"{head}, a {d.label} change of {size(d.detectable)} is found "
            f"{d.power * 100:.0f}% of the time by this report{floor}; smaller ones are "
            "mostly missed")


UNCOVERED = (
    "what the intervals do not cover: a difference of the machine between the two runs "
    "(heat, other load, caches, a background job) moves every scenario of one run alike and "
    "looks like a change of the build (measured here: 9–10 % between two A/A runs); "
    "interleave A and B in time (or pair nodes with --per-node), measure an A/A pair on the "
    "same machine, and read a finding near the printed size with care"
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
    power_simulations: int = SIMULATIONS,
    aa: tuple[Scorecard, Scorecard] | None = None,
) -> DriverReport:
    """Compare run B (build under test) with run A (reference) on the scenarios both ran.

    `aa`: an A/A pair (the same build twice) from the same machine; its intervals bound the
    drift a back-to-back pair's findings must exceed. `power_simulations`: simulated runs per
    size tried for the smallest detectable change (0: not computed).

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
    for name, card in (("A", a), ("B", b)):
        if left_out := incomparable_turns(card):
            notes.append(f"{name}: {sum(left_out.values())} turn(s) left out of the speeds, not "
                         "comparable: " + "; ".join(f"{n} with {why}" for why, n in left_out.items()))
    knobs = Knobs(resamples=resamples, confidence=confidence, seed=seed)
    better: dict[str, bool | None] = {m.key: m.lower_is_better for m in (*SPEED_METRICS, SCORE)}

    speed: list[MetricDelta] = []
    samples: dict[str, tuple[Metric, TrialValues, TrialValues]] = {}
    turns: dict[str, tuple[TrialTurns, TrialTurns]] = {}
    # The two sides of one `trialbox ab`: a turn-metered speed is paired block by block.
    ab_id = one_ab(a, b)
    units: dict[str, tuple[TrialUnits, TrialUnits]] = {}
    for metric in SPEED_METRICS:
        if metric.turn_value is None:
            if not (traces_a and traces_b):
                notes.append(f"{metric.label}: needs both runs' traces; not compared")
                continue
            sa, sb = index_trials(traces_a, set(dropped_a)), index_trials(traces_b, set(dropped_b))
        else:
            sa = turn_trials(a, metric, set(dropped_a), source)
            sb = turn_trials(b, metric, set(dropped_b), source)
            turns[metric.key] = (
                trial_turns_of(a, metric, set(dropped_a), source),
                trial_turns_of(b, metric, set(dropped_b), source),
            )
            if ab_id is not None:
                units[metric.key] = (unit_turns_of(a, metric, set(dropped_a), source),
                                     unit_turns_of(b, metric, set(dropped_b), source))
        if not any(sa.get(s) for s in common) and not any(sb.get(s) for s in common):
            notes.append(f"{metric.label}: not measured on either run")
            continue
        samples[metric.key] = (metric, sa, sb)
        speed.append(metric_delta(metric, scopes[0], sa, sb, **knobs, trials=turns.get(metric.key),
                                  units=units.get(metric.key)))

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
        speed += [metric_delta(metric, scope, sa, sb, **knobs, trials=turns.get(key))
                  for scope in scopes if scope[0] == "scenario"]
    promoted = [d for d in speed if d.metric in few and d.scope == "scenario"]
    all_outcomes = [o for o in outcomes if o.scope == "all"]
    family = headline + promoted
    decide(family, better, alpha, all_outcomes)
    changes = {
        d.metric: headline_changes(
            samples[d.metric][0], [s for s in common if samples[d.metric][1].get(s)
                                   and samples[d.metric][2].get(s)],
            samples[d.metric][1], samples[d.metric][2], turns.get(d.metric), units.get(d.metric),
        )
        for d in headline if d.metric != SCORE.key
    }
    detectable = detectable_changes(
        [d for d in headline if d.metric != SCORE.key], changes,
        {key: trim_of(samples[key][0]) for key in changes},
        family=sum(d.p_value is not None for d in family)
        + sum(o.verdict is not Change.TOO_FEW for o in all_outcomes),
        trials=min(a.config.trials, b.config.trials), alpha=alpha, resamples=resamples,
        seed=seed, simulations=power_simulations,
    )
    # Categories: only where the headline moved, each metric's categories one family.
    for d in headline:
        metric, sa, sb = samples[d.metric]
        deltas = speed if d.metric != "score" else scores
        family_rows = [
            metric_delta(metric, scope, sa, sb, **knobs, tested=d.verdict.beyond_noise,
                         trials=turns.get(d.metric), units=units.get(d.metric))
            for scope in scopes if scope[0] == "category"
        ]
        decide(family_rows, better, alpha)
        deltas += family_rows
    # Single scenarios: a screen of every turn-metered speed, whatever the headline did, so
    # a change confined to a few scenarios (which the trimmed mean leaves out) is still seen.
    screened = [
        metric_delta(samples[key][0], scope, samples[key][1], samples[key][2], **knobs,
                     trials=turns[key], own_test=False)
        for key in turns if key in samples and key not in few
        for scope in scopes if scope[0] == "scenario"
    ]
    screen_rows(screened, turns, better, alpha, resamples=resamples, seed=seed)
    speed += screened
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
    drift = [
        *drift_of(a, "A", set(dropped_a), source, **knobs),
        *drift_of(b, "B", set(dropped_b), source, **knobs),
    ]
    bounds = _aa_bounds(aa, a, alpha=alpha, seed=seed) if aa is not None else None
    bound_text = None
    if bounds is not None:
        bound_text = bounds[0]
        notes.append(bound_text)
    elif aa is not None:
        # Said, not silent: a user who passed an A/A pair must learn why it lifted no mark.
        notes.append(f"the A/A pair {aa[0].run_id} / {aa[1].run_id} ran on other hardware than "
                     "A, so it bounds no drift here")
    notes.append(UNCOVERED)

    # An A/B in sessions: a speed finding must pass the test over sessions too (adjusted over
    # the speeds tested so), or it is marked as not separable from what boots differ by.
    sessions = ab_sessions(a, b)
    tested = {key: test for key, pair in units.items() if sessions is not None and (
        test := session_test(*pair, sessions, min(a.config.trials, b.config.trials)))}
    session_p = dict(zip(tested, adjust_bh([t.p_value for t in tested.values()]), strict=True))
    labels = {m.key: m.label for m in SPEED_METRICS}

    def marked(d: MetricDelta | OutcomeDelta, text: str) -> str:
        if sessions is not None and isinstance(d, MetricDelta) and d.metric in units:
            whole = d.scope != "scenario"  # the test over sessions is the suite's
            text = session_marked(text, tested.get(d.metric) if whole else None,
                                  session_p.get(d.metric) if whole else None, alpha, sessions)
        if placed == ALTERNATED:
            return text
        if bounds is not None and isinstance(d, MetricDelta) and d.change is not None:
            limit = bounds[1].get(d.metric)
            if limit is not None and abs(math.log1p(d.change)) > limit:
                return text + f" (beyond the drift the A/A pair {bounds[2]} bounds)"
        why = "runs back to back" if placed != "unknown" else "order in time unknown"
        return (f"{text} — {NOT_SEPARABLE} ({why}, and no A/A pair measured on this machine "
                "bounds the drift)")

    findings = [
        marked(d, _finding(d))
        for d in speed + scores if d.verdict.beyond_noise and d.scope != "scenario"
    ]
    findings += [marked(rows_[0], line) for rows_, line in _scenario_findings(speed)]
    findings += [marked(o, _outcome_finding(o)) for o in outcomes if o.verdict.beyond_noise]
    rules = [
        f"the unit is the A/B session pair: A and B are the two sides of `trialbox ab` {ab_id}, "
        f"run in {sessions} sessions, one side each (A B B A …), so a turn-metered speed is "
        "paired trial by trial (B's trial k against A's trial k from the session beside it, "
        "turn t against turn t) and a steady drift cancels over the session pairs; a "
        "difference between two boots does not, so each speed finding must also pass the test "
        f"with the session as the unit (the lines '… over the {sessions} sessions' means' "
        "below); the claim is about this suite's scenarios; other values are paired by scenario"
        if sessions is not None else
        f"the unit is the A/B block pair: A and B are the two sides of `trialbox ab` {ab_id}, "
        "which ran each scenario trial on both sides in blocks side by side in time, so a "
        "turn-metered speed is paired trial by trial (B's trial k against A's trial k, turn t "
        "against turn t) and a drift of the machine cancels inside each pair; the claim is "
        "about this suite's scenarios; other values are paired by scenario"
        if ab_id is not None else
        "the unit is the scenario: A and B are paired on the scenarios both ran, each weighing "
        "the same on both sides; a speed's change in a scenario is paired by turn (turn t on B "
        "against turn t on A), other values are the mean over trials",
        f"intervals: {confidence * 100:.0f}% percentile cluster bootstrap over "
        f"{'the A/B block pairs (speeds) and ' if ab_id is not None else ''}scenarios "
        f"({resamples} resamples, seed {seed}); at least {MIN_SCENARIOS} paired "
        f"{'pairs' if ab_id is not None else 'scenarios'} for a verdict; one scenario: exact "
        "permutation test over its trials",
        f"multiplicity: Benjamini–Hochberg over the all-scenarios results (speeds, score and "
        f"outcomes together) at {headline_alpha(alpha):g}; categories only for a result that "
        "moved, Benjamini–Hochberg again within each; a screen of every scenario's speeds "
        "against the noise pooled over all scenarios, Benjamini–Hochberg over all of them at "
        f"{screen_alpha(alpha):g} (a finding also needs its own trials' exact p below "
        f"{SCREEN_OWN_P:g}); "
        f"the two together keep the chance of any finding when nothing changed below "
        f"{alpha:g}; with fewer than {MIN_SCENARIOS} paired scenarios each scenario is tested "
        "over its trials as a headline question",
        f"warm-up: the first {warmup} scenario run(s) of each side have their speed figures "
        "discarded" if warmup else "warm-up: none discarded (--warmup N drops the first N "
        "scenario runs' speed figures)",
        f"speed figures compared: {compared_from}; a scenario's change is the mean over its "
        f"turns of the change of the turn's {'median' if TURN_MEDIAN else 'mean'} trial (log "
        f"scale), over scenarios their {SPEED_TRIM:.0%}-trimmed mean (decode speed, which has "
        "no tail: the mean trial and the plain mean); a scenario's own row: the change of its "
        "trials' mean per turn, the statistic its exact test uses",
        RUN_RULE,
        order_text,
        *(drift_text(d) for d in drift),
        *(session_text(labels[key], t, session_p[key], alpha, len(tested))
          for key, t in tested.items()),
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
        drift=drift,
        drift_bound=bound_text,
        sessions=sessions,
        served_on_a=served_on(a),
        served_on_b=served_on(b),
        confidence=confidence,
        alpha=alpha,
        resamples=resamples,
        seed=seed,
    )
