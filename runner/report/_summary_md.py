"""summary.md: the run at a glance, for a terminal, a PR comment or a CI step summary."""

from __future__ import annotations

from runner.records.status import Status
from runner.report._driver_samples import UNFORCED, unforced_turns
from runner.report._identity import model_line
from runner.report._models import ScenarioResult, Scorecard, node_differences
from runner.report._performance import (
    BENCHMARK_OVERHEAD,
    SETUP_PHASES,
    embedding_cache_text,
    indexing_text,
    overhead_text,
    pool_text,
    reference_decode_text,
    run_wall_text,
    turn_embedding_text,
)
from runner.report._performance_models import PerformanceStats
from runner.verdict import (
    CHECKS_PASSED_NOT_JUDGED,
    JudgeAgreement,
    UserMessageCounts,
    check_note,
    checks_passed_not_judged,
    decided_pass_rate,
    unmeasured_count,
)
from runner.verdict.trials import Stability

ICONS = {
    Status.PASS: "✅",
    Status.FAIL: "❌",
    Status.BLOCKED_BY_ARCHITECTURE: "🚫",
    Status.NOT_JUDGED: "⚪",
    Status.TIMEOUT: "⏱️",
    Status.BUDGET_EXCEEDED: "💸",
    Status.INFRA_ERROR: "⚠️",
    Status.SETUP_ERROR: "⚠️",
    Status.ERRORED: "⚠️",
    Status.SKIPPED_NO_DOCUMENT: "⏭️",
    Status.SKIPPED_NO_MODEL: "⏭️",
    Status.NOT_RUN: "⏭️",
}

TURN_JUDGING_ON = (
    "`export ANTHROPIC_API_KEY=…` (or `--judge-provider openai --judge-url …` for a local judge)"
)


def _cell(text: object) -> str:
    """A markdown table cell: pipes and newlines would break the row."""
    return str(text).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _pct(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate * 100:.0f}%"


def _num(value: float | None, unit: str = "", digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{unit}"


def _score(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}/10"


def user_messages_text(counts: UserMessageCounts) -> str:
    """`5 verbatim · 2 extracted from the objective · 3 simulated (by SmolLM2 ×3)`."""
    parts = [f"{counts.verbatim} verbatim", f"{counts.extracted} extracted from the objective"]
    by = ", ".join(f"{model} ×{n}" for model, n in counts.simulated_by.items())
    parts.append(f"{counts.simulated} simulated" + (f" (by {by})" if by else ""))
    if counts.not_recorded:
        parts.append(f"{counts.not_recorded} source not recorded")
    return " · ".join(parts)


def agent_text(r: ScenarioResult) -> str:
    """`agent doc_agent, GAIA 0.25.1` — which agent answered, on which Agent UI ("" if unknown)."""
    parts = []
    if r.agent_id:
        parts.append(f"agent {r.agent_id}")
    if r.gaia_version:
        parts.append(f"GAIA {r.gaia_version}")
    return ", ".join(parts)


def _decided_lines(card: Scorecard) -> list[str]:
    """The first lines a reader (or the console) sees: what was decided, and by what."""
    s = card.summary
    plain = s.not_judged - s.checks_passed_not_judged
    return [
        (
            f"- **Checks-decided FAIL:** {s.checks_failed} · "
            f"**Checks passed, not judged:** {s.checks_passed_not_judged} · "
            f"**NOT_JUDGED:** {s.not_judged} ({plain} without any exact check)"
        ),
        f"- **Agent model:** {model_line(card.config)}",
        (
            f"- **Checks pass rate:** {_pct(s.checks_pass_rate)} "
            f"({s.checks_all_passed} of {s.checked} scenarios whose checks ran) · "
            f"**Judged pass rate:** {_pct(s.judged_pass_rate)} ({s.judged} judged)"
        ),
    ]


def _decoding_line(card: Scorecard) -> list[str]:
    """A run that asked for repeatable decoding: how many turns had a request the front door
    did not force (their speed stands for no build; the driver report leaves them out)."""
    counted = unforced_turns(card)
    if counted is None:
        return []
    unforced, turns = counted
    if not unforced:
        return [f"- **Repeatable decoding:** forced on every request of {turns} turn(s) that "
                "called the LLM"]
    return [f"- **⚠️ Repeatable decoding lapsed:** {unforced} of {turns} turn(s) with {UNFORCED}: "
            "their speed figures are left out of driver-build comparisons"]


def _summary(card: Scorecard) -> list[str]:
    s = card.summary
    state = "finished" if card.finished else "in progress (partial results)"
    rate, rate_name = decided_pass_rate(s)
    # A cluster run over unlike nodes: said in the head, before any figure is read as one machine's.
    differ = node_differences(card.scenarios)
    lines = [
        f"# trialbox run `{card.run_id}`",
        "",
        f"{card.timestamp.isoformat()} · {state}",
        "",
        "## Summary",
        "",
        *_decided_lines(card),
        *([f"- **⚠️ {_cell(differ)}**"] if differ else []),
        *_decoding_line(card),
        # Where this run's time went: beside the agent's own time (turns and its indexing), and
        # that indexing on its own (the lines above are what was decided).
        f"- **{_cell(run_wall_text(card))}**",
        *([f"- **{_cell(reference)}**"] if (reference := reference_decode_text(card)) else []),
        f"- **{_cell(overhead_text(card))}**",
        f"- **{_cell(indexing_text(card))}**",
        f"- **{_cell(turn_embedding_text(card))}**",
        *([f"- **{_cell(cached)}**"] if (cached := embedding_cache_text(card)) else []),
        f"- **Scenarios:** {s.total_scenarios}",
        f"- **User turns ({s.user_messages.total}):** {user_messages_text(s.user_messages)}",
        (
            f"- **Passed:** {s.passed} · **Failed:** {s.failed} "
            f"({s.checks_failed} by checks, {s.failed - s.checks_failed} by the judge) · "
            f"**Blocked:** {s.blocked}"
        ),
        (
            f"- **Pass rate:** {_pct(s.pass_rate)} of all · "
            f"**Quality gate (--min-pass-rate) applies to:** {rate_name}"
            + (f" = {_pct(rate)}" if rate is not None else "")
        ),
        f"- **Average score (judged, FAIL capped at 5.99):** {_score(s.avg_score)}",
        (
            f"- **Timeout:** {s.timeout} · "
            f"**Budget exceeded:** {s.budget_exceeded} · **Infra error:** {s.infra_error} · "
            f"**Errored:** {s.errored} · **Skipped:** {s.skipped} · **Not run:** {s.not_run}"
        ),
        *([f"- **⚠️ Judge unavailable:** {s.judge_unavailable} scenario(s) kept unjudged "
            "(NOT_JUDGED, conversations kept): `trialbox rescore` on this run's folder judges "
            "them once the judge answers"] if s.judge_unavailable else []),
        (
            f"- **Judge:** {card.config.judge_provider or 'none'}"
            f"{' / ' + card.config.judge_model if card.config.judge_model else ''} · "
            f"**Derived checks:** {'on' if card.config.derived_checks else 'off'}"
        ),
    ]
    if card.config.forced_tool:
        lines.append(f"- **Forced first tool call:** `{card.config.forced_tool}` (test switch on)")
    if not card.config.judged:
        lines += [
            "",
            (
                "No judge was configured: exact checks decided what they could (a failed check "
                "is a FAIL; all checks passing stays NOT_JUDGED), performance was recorded, "
                f"but no score was given. To turn judging on: {TURN_JUDGING_ON}."
            ),
        ]
    if card.warnings:
        lines += ["", *[f"> ⚠️ {_cell(w)}" for w in card.warnings]]
    return lines


def _by_category(card: Scorecard) -> list[str]:
    lines = [
        "## By Category",
        "",
        (
            "| Category | Total | Passed | Failed | Blocked | Checks-decided FAIL | "
            "Checks passed, not judged | Not judged | Unmeasured | Checks pass rate | Avg score |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, c in card.summary.by_category.items():
        lines.append(
            f"| {_cell(name)} | {c.total} | {c.passed} | {c.failed} | {c.blocked} | "
            f"{c.checks_failed} | {c.checks_passed_not_judged} | {c.not_judged} | {unmeasured_count(c)} | "
            f"{_pct(c.checks_pass_rate)} | {_score(c.avg_score)} |"
        )
    return lines


MAX_LISTED_CHECKS = 3  # per scenario in summary.md; the rest are in report.html and the trace


def _failed_checks(r: ScenarioResult) -> list[str]:
    failed = r.failed_checks()
    lines = [f"  - {_cell(check_note(c))}" for c in failed[:MAX_LISTED_CHECKS]]
    if len(failed) > MAX_LISTED_CHECKS:
        lines.append(f"  - … {len(failed) - MAX_LISTED_CHECKS} more in `{_cell(r.trace)}`")
    return lines


def _checks(count: int) -> str:
    return f"{count} check" if count == 1 else f"{count} checks"


def _scenario_line(r: ScenarioResult) -> str:
    trial = f" (trial {r.trial})" if r.trial is not None else ""
    failed = r.gates.failed()
    gates = f" — failed: {', '.join(failed)}" if failed else ""
    if r.decided_by == "checks":
        gates += " (decided by checks, no judge)"
    elif checks_passed_not_judged(r):
        gates = f" — {CHECKS_PASSED_NOT_JUDGED} ({_checks(r.gates.checks_run)})"
    error = f" — {_cell(r.error)}" if r.error else ""
    agent = f" · {_cell(agent_text(r))}" if agent_text(r) else ""
    return (
        f"- {ICONS[r.status]} **{_cell(r.id)}**{trial} `{r.status.value}` {_score(r.score)}"
        f" · {_num(r.wall_s, ' s', 1)}{agent}{gates}{error}"
    )


def _scenarios(card: Scorecard) -> list[str]:
    lines = ["## Scenarios", ""]
    for r in card.scenarios:
        lines.append(_scenario_line(r))
        lines += _failed_checks(r)
    if not card.scenarios:
        lines.append("(no scenario finished yet)")
    return lines


def _perf_row(label: str, p: PerformanceStats) -> str:
    return (
        f"| {_cell(label)} | {_num(p.wall_s, ' s', 1)} | {p.turns} | "
        f"{_num(p.turn_wall_s_mean, ' s')} | {_num(p.turn_wall_s_p50, ' s')} | "
        f"{_num(p.turn_wall_s_p90, ' s')} | {_num(p.ttft_s_mean, ' s', 3)} | "
        f"{_num(p.tokens_per_s_mean, '', 1)} | {p.input_tokens} | {p.output_tokens} | "
        f"{_num(p.turn_embedding_s, ' s', 1)} | "
        f"{_num(p.agent_indexing_s, ' s', 1)} | {_simulated(p)} | {_num(p.overhead_ratio)} |"
    )


def _simulated(p: PerformanceStats) -> str:
    """"3 · 12.4 s": the turns the simulator's model wrote and its time writing them."""
    if not p.simulated_turns:
        return "–"
    return f"{p.simulated_turns} · {_num(p.simulator_s, ' s', 1)}"


def _performance(card: Scorecard) -> list[str]:
    perf = card.performance
    lines = [
        "## Performance",
        "",
        (
            "| Scenario | Wall | Turns | Turn mean | Turn p50 | Turn p90 | TTFT | Tokens/s | In | "
            "Out | Embedding in turns | Indexing (agent) | Simulated turns | Wall ÷ agent time |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [_perf_row(key, stats) for key, stats in perf.scenarios.items()]
    lines.append(_perf_row("**total**", perf.totals))
    note = (
        "Agent time is the agent's turns plus its own indexing of the setup documents (in the "
        "Agent UI): neither is the harness's. Embedding in turns is the part of the turns spent "
        "in embeddings requests (front door): GAIA's agent embeds its session documents again "
        "on its first turn. Simulated turns are the user messages the simulator's model wrote "
        "and its time writing them, before each turn's clock: in the wall, outside agent time. "
        "The "
        f"{BENCHMARK_OVERHEAD} is measured side by side against one Agent UI already running; "
        "see the README."
    )
    return lines + ["", note, "", *_setup(card)]


def _setup(card: Scorecard) -> list[str]:
    """Where set-up time went: each phase's median and p90 over the scenarios that timed it."""
    setup = card.performance.setup
    lines = ["### Set-up", ""]
    if not setup.scenarios:
        return lines + [
            "Set-up timings: n/a (no scenario of this run recorded them: traces written before "
            "set-up was timed, or no sandbox opened)."
        ]
    lines += [
        (
            f"- **Recorded for:** {setup.scenarios} of {len(card.scenarios)} scenarios · "
            f"**Warm pool hits:** {pool_text(setup)}"
        ),
        "",
        "| Phase | Median | p90 | Scenarios timed |",
        "|---|---:|---:|---:|",
    ]
    for phase, label in SETUP_PHASES.items():
        stats = setup.phase(phase)
        lines.append(
            f"| {label} | {_num(stats.median_s, ' s')} | {_num(stats.p90_s, ' s')} | "
            f"{stats.measured} |"
        )
    return lines


def _cost(card: Scorecard) -> list[str]:
    c = card.cost
    return [
        "## Cost",
        "",
        f"- **Estimated judge cost:** ${c.estimated_total_usd:.4f}",
        (
            f"- **Judge tokens:** {c.judge_input_tokens} in, {c.judge_output_tokens} out, "
            f"{c.judge_cache_read_tokens} cache read, {c.judge_cache_write_tokens} cache write "
            f"({c.judge_requests} requests)"
        ),
    ]


def _trials(card: Scorecard) -> list[str]:
    if not card.trials:
        return []
    k = card.config.trials
    lines = [
        f"## Trials ({k} per scenario)",
        "",
        "| Scenario | Passes | pass^k | pass@k | Score mean | Stdev | Label |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for sid, t in card.trials.items():
        top = t.judged
        lines.append(
            f"| {_cell(sid)} | {t.passes}/{t.judged} | {_num(t.pass_hat_k.get(top))} | "
            f"{_num(t.pass_at_k.get(top))} | {_num(t.score_mean)} | {_num(t.score_stdev)} | "
            f"{t.label.value} |"
        )
    flaky = [sid for sid, t in card.trials.items() if t.label is Stability.FLAKY]
    lines += ["", f"**Flaky scenarios:** {', '.join(flaky) if flaky else 'none'}"]
    return lines


def _agreement(card: Scorecard) -> list[str]:
    a = card.judge_agreement
    if a is None:
        return []
    kappa = (
        "undefined (every judgment gave the same verdict)" if a.kappa is None else f"{a.kappa:.3f}"
    )
    return [
        f"## Judge agreement ({a.repeats} judgments per transcript)",
        "",
        f"- **Cohen's κ (PASS/FAIL, mean over pairs):** {kappa}",
        f"- **Observed agreement:** {_pct(a.observed_agreement)}",
        f"- **Mean dimension spread (max − min):** {_num(a.mean_spread)}",
        f"- **Verdict changed on:** {', '.join(a.unstable_scenarios) or 'none'}",
        f"- **Judge sampling:** temperature {_sampled(a.temperature)}, seed "
        f"{'none sent' if a.seed is None else a.seed}",
        *_from_the_cache(a),
        *_at_temperature_zero(a.temperature),
    ]


def _from_the_cache(a: JudgeAgreement) -> list[str]:
    """How many of the K judgings' replies were replayed: a cached reply agrees with the run
    that stored it by construction, so κ over them is not a new measurement."""
    line = f"- **Replies from the judge cache:** {a.cached_replies} of {a.replies}"
    if a.cached_replies:
        line += (" — replayed from an earlier run, they agree with it by construction; for a "
                 "fresh measurement run with another judge cache folder (XDG_CACHE_HOME)")
    return [line]


def _sampled(temperature: float | None) -> str:
    return "the provider's default" if temperature is None else f"{temperature:g}"


def _at_temperature_zero(temperature: float | None) -> list[str]:
    """What κ means when the judge samples greedily: its K replies differ only where the
    server is not deterministic, so agreement says little about how sure the judge is."""
    if temperature != 0:
        return []
    return ["- At temperature 0 the K judgings differ only where the judge server is not "
            "deterministic: κ measures that server's repeatability, not the judge's certainty"]


def render_summary_md(card: Scorecard) -> str:
    sections = [
        _summary(card),
        _by_category(card),
        _scenarios(card),
        _trials(card),
        _agreement(card),
        _performance(card),
        _cost(card),
    ]
    return "\n\n".join("\n".join(s) for s in sections if s) + "\n"
