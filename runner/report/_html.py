"""report.html: one self-contained static page (inline CSS, no script, no external asset).

Scenario rows are <details> elements, so they expand to turns without JavaScript, and the page
works from a file:// URL, an artifact store or an air-gapped machine. Every text from the run
(agent answers, tool arguments, judge reasoning) is escaped: it is untrusted input.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from html import escape

from runner.records.judgments import DIMENSIONS, ClaimJudgment, ClaimLabel
from runner.records.outcomes import CheckResult
from runner.records.status import Status
from runner.records.transcript import ToolCall
from runner.report._charts import charts
from runner.report._identity import model_line, served_model
from runner.report._models import ScenarioResult, Scorecard, TurnResult
from runner.report._performance import (
    SETUP_PHASES,
    embedding_cache_text,
    indexing_text,
    overhead_text,
    phase_seconds,
    pool_text,
    run_wall_text,
    turn_embedding_text,
)
from runner.report._summary_md import TURN_JUDGING_ON, agent_text, user_messages_text
from runner.verdict import (
    CHECKS_PASSED_NOT_JUDGED,
    checks_passed_not_judged,
    decided_pass_rate,
    unmeasured_count,
)

_CSS = """
:root{--pass:#1a7f37;--fail:#cf222e;--warn:#9a6700;--muted:#57606a;--line:#d0d7de;--bg:#f6f8fa}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1200px;
padding:24px;color:#1f2328}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 10px}
.muted{color:var(--muted)}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:10px}
.card{border:1px solid var(--line);border-radius:8px;padding:10px 12px;background:var(--bg)}
.card .v{font-size:22px;font-weight:600}.card .k{color:var(--muted);font-size:12px}
table{border-collapse:collapse;width:100%;margin:6px 0}
th,td{border-bottom:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top}
th{background:var(--bg);font-weight:600}td.n,th.n{text-align:right}
.badge{display:inline-block;border-radius:10px;padding:1px 8px;font-size:12px;font-weight:600;
color:#fff;background:var(--warn)}
.badge.PASS{background:var(--pass)}.badge.FAIL,.badge.BLOCKED_BY_ARCHITECTURE{background:var(--fail)}
.badge.NOT_JUDGED{background:var(--muted)}
details.scenario{border:1px solid var(--line);border-radius:8px;margin:6px 0}
details.scenario>summary{cursor:pointer;padding:8px 12px;display:flex;gap:12px;align-items:center}
details.scenario>div{padding:4px 16px 12px}
.turn{border-left:3px solid var(--line);padding:4px 12px;margin:10px 0}
.turn.turn-pass{border-color:var(--pass)}.turn.turn-fail{border-color:var(--fail)}
pre{white-space:pre-wrap;word-break:break-word;background:var(--bg);padding:8px;border-radius:6px;
margin:4px 0;max-height:360px;overflow:auto}
.ok{color:var(--pass)}.bad{color:var(--fail)}
table.kv th{width:200px}
.note{background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;padding:8px 12px}
.headline{font-size:15px;margin:6px 0}
figure.chart-figure{margin:12px 0;border:1px solid var(--line);border-radius:8px;padding:8px;
overflow-x:auto}
figure.chart-figure figcaption{color:var(--muted);font-size:12px}
svg.chart text{fill:#1f2328}
.derived{font-size:11px;color:var(--muted);border:1px solid var(--line);border-radius:8px;
padding:0 5px;margin-left:4px}
"""


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _score(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _pct(rate: float | None) -> str:
    return "—" if rate is None else f"{rate * 100:.0f}%"


def _badge(status: Status) -> str:
    return f'<span class="badge {status.value}">{_e(status.value)}</span>'


def _mark(ok: bool | None) -> str:
    if ok is None:
        return '<span class="muted">n/a</span>'
    return '<span class="ok">✔ yes</span>' if ok else '<span class="bad">✘ no</span>'


def _card(value: str, label: str) -> str:
    return (
        f'<div class="card"><div class="v">{_e(value)}</div><div class="k">{_e(label)}</div></div>'
    )


def _summary_cards(card: Scorecard) -> str:
    s = card.summary
    rate, rate_name = decided_pass_rate(s)
    cards = [
        _card(str(s.total_scenarios), "scenarios"),
        _card(str(s.checks_failed), "checks-decided FAIL"),
        _card(str(s.checks_passed_not_judged), CHECKS_PASSED_NOT_JUDGED),
        _card(str(s.not_judged), "NOT_JUDGED (all)"),
        _card(str(s.passed), "passed"),
        _card(str(s.failed - s.checks_failed), "failed (judge)"),
        _card(str(s.blocked), "blocked"),
        _card(str(s.infrastructure - s.not_judged), "infrastructure"),
        _card(_pct(s.checks_pass_rate), f"checks pass rate ({s.checks_all_passed}/{s.checked})"),
        _card(_pct(s.judged_pass_rate), f"judged pass rate ({s.judged} judged)"),
        _card(_pct(rate), f"quality gate: {rate_name}"),
        _card(_score(s.avg_score), "avg score (FAIL ≤ 5.99)"),
        _card(f"${card.cost.estimated_total_usd:.4f}", "judge cost"),
    ]
    sources = (
        f'<p id="user-messages"><b>User turns ({s.user_messages.total}):</b> '
        f"{_e(user_messages_text(s.user_messages))}</p>"
    )
    return f'<div class="cards">{"".join(cards)}</div>{sources}'


def _distinct(values: Iterable[str | None]) -> str:
    """The distinct recorded values, sorted (each scenario row names its own)."""
    return ", ".join(sorted({v for v in values if v})) or "not recorded"


def _config(card: Scorecard) -> str:
    c = card.config
    rows = {
        "judge": " / ".join(x for x in (c.judge_provider or "none", c.judge_model) if x),
        "simulator": " / ".join(x for x in (c.simulator_mode, c.simulator_model) if x),
        "agent model (requested)": c.agent_model or "not recorded",
        "served as": served_model(c) or "not reported by the LLM server",
        "device": c.device or "unknown",
        "agents": _distinct(r.agent_id for r in card.scenarios),
        "GAIA version (Agent UI)": _distinct(r.gaia_version for r in card.scenarios),
        "derived checks": "on" if c.derived_checks else "off (--no-derived-checks)",
        "backend": c.backend or "unknown",
        "trials": str(c.trials),
        "concurrency": str(c.concurrency),
    }
    if c.forced_tool:
        rows["forced first tool"] = c.forced_tool
    cells = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows.items())
    return f'<table class="kv">{cells}</table>'


def _categories(card: Scorecard) -> str:
    head = (
        "<tr><th>Category</th><th class=n>Total</th><th class=n>Passed</th>"
        "<th class=n>Failed</th><th class=n>Blocked</th><th class=n>Checks-decided FAIL</th>"
        "<th class=n>Checks passed, not judged</th><th class=n>Not judged</th>"
        "<th class=n>Unmeasured</th><th class=n>Checks pass rate</th><th class=n>Avg score</th></tr>"
    )
    rows = []
    for name, c in card.summary.by_category.items():
        rows.append(
            f"<tr><td>{_e(name)}</td><td class=n>{c.total}</td><td class=n>{c.passed}</td>"
            f"<td class=n>{c.failed}</td><td class=n>{c.blocked}</td>"
            f"<td class=n>{c.checks_failed}</td><td class=n>{c.checks_passed_not_judged}</td>"
            f"<td class=n>{c.not_judged}</td><td class=n>{unmeasured_count(c)}</td>"
            f"<td class=n>{_pct(c.checks_pass_rate)}</td><td class=n>{_score(c.avg_score)}</td></tr>"
        )
    return f"<table>{head}{''.join(rows)}</table>"


def _checks(checks: list[CheckResult]) -> str:
    if not checks:
        return ""
    derived = (
        '<span class="derived" title="derived from ground_truth.expected_answer">derived</span>'
    )
    rows = "".join(
        f"<tr><td>{_mark(c.passed)}</td><td>{_e(c.type)}{derived if c.derived else ''}</td>"
        f"<td>{_e(c.diagnostic)}</td></tr>"
        for c in checks
    )
    return f"<table><tr><th>Check</th><th>Type</th><th>Diagnostic</th></tr>{rows}</table>"


def _claims(claims: list[ClaimJudgment]) -> str:
    if not claims:
        return ""
    rows = "".join(
        f"<tr><td>{_mark(c.label is ClaimLabel.ENTAILED)} {_e(c.label.value)}</td>"
        f"<td>{_e(c.name)}</td><td>{_e(c.claim)}</td><td>{_e(c.rationale)}</td></tr>"
        for c in claims
    )
    return (
        f"<table><tr><th>Label</th><th>Claim</th><th>Text</th><th>Rationale</th></tr>{rows}</table>"
    )


def _tool_calls(calls: list[ToolCall]) -> str:
    if not calls:
        return '<p class="muted">No tool call.</p>'
    rows = "".join(
        f"<tr><td>{i}</td><td><code>{_e(c.name)}</code></td>"
        f"<td><pre>{_e(json.dumps(c.arguments, ensure_ascii=False, indent=1))}</pre></td>"
        f"<td>{_e(c.error or c.result_summary)}</td></tr>"
        for i, c in enumerate(calls, 1)
    )
    return f"<table><tr><th>#</th><th>Tool</th><th>Arguments</th><th>Result</th></tr>{rows}</table>"


def _dims(turn: TurnResult) -> str:
    if turn.dims is None:
        return ""
    head = "".join(f"<th class=n>{_e(d.replace('_', ' '))}</th>" for d in DIMENSIONS)
    cells = "".join(f"<td class=n>{getattr(turn.dims, d):g}</td>" for d in DIMENSIONS)
    return f"<table><tr>{head}</tr><tr>{cells}</tr></table>"


def _source(turn: TurnResult) -> str:
    """Where the user message came from, beside the message (nothing when not recorded)."""
    if turn.user_message_source is None:
        return ""
    by = f" by {turn.simulator_model}" if turn.simulator_model else ""
    return f' <span class="derived">{_e(turn.user_message_source + by)}</span>'


def _turn(turn: TurnResult) -> str:
    state = "" if turn.passed is None else ("turn-pass" if turn.passed else "turn-fail")
    perf = turn.performance
    speed = f" · {perf.wall_s:.2f} s" if perf else ""
    parts = [
        (
            f'<div class="turn {state}"><h4>Turn {turn.turn} · score {_score(turn.score)}'
            f" · pass {_mark(turn.passed)}{speed}</h4>"
        ),
        f"<div><b>User</b>{_source(turn)}<pre>{_e(turn.user_message)}</pre></div>",
        f"<div><b>Agent</b><pre>{_e(turn.answer)}</pre></div>",
    ]
    if turn.error:
        parts.append(f'<p class="bad">Error: {_e(turn.error)}</p>')
    parts += [_tool_calls(turn.tool_calls), _dims(turn)]
    if turn.reasoning:
        parts.append(f"<div><b>Judge</b><pre>{_e(turn.reasoning)}</pre></div>")
    parts += [_checks(turn.checks), _claims(turn.claims), "</div>"]
    return "".join(parts)


def _scenario(r: ScenarioResult) -> str:
    trial = f" (trial {r.trial})" if r.trial is not None else ""
    wall = "—" if r.wall_s is None else f"{r.wall_s:.1f} s"
    summary = (
        f"<summary>{_badge(r.status)}<b>{_e(r.id)}</b>{_e(trial)}"
        f'<span class="muted">{_e(r.name)} · {_e(r.category)} · {_e(r.severity)}</span>'
        f'<span class="agent">{_e(agent_text(r))}</span>'
        f"<span>score {_score(r.score)}</span><span class=muted>{_e(wall)}</span></summary>"
    )
    decided = ""
    if r.decided_by == "checks":
        decided = " · <b>decided by exact checks</b> (no judge ran)"
    elif checks_passed_not_judged(r):
        decided = f" · <b>{_e(CHECKS_PASSED_NOT_JUDGED)}</b>"
    gates = (
        f"<p>Rubric {_mark(r.gates.rubric_ok)} · Checks {_mark(r.gates.checks_ok)} "
        f"({r.gates.checks_run} run) · Claims {_mark(r.gates.claims_ok)}{decided}</p>"
    )
    body = [gates]
    if r.error:
        body.append(f'<p class="bad">Error: {_e(r.error)}</p>')
    for label, text in (("Root cause", r.root_cause), ("Recommended fix", r.recommended_fix)):
        if text:
            body.append(f"<p><b>{label}:</b> {_e(text)}</p>")
    if r.notes:
        body.append("<ul>" + "".join(f"<li>{_e(n)}</li>" for n in r.notes) + "</ul>")
    body += [_checks(r.checks), _claims(r.claims), *(_turn(t) for t in r.turns)]
    if r.trace:
        body.append(f'<p class="muted">Trace: <code>{_e(r.trace)}</code></p>')
    # The id sits inside the <details> so that opening report.html#<key> expands that row.
    return (
        f'<details class="scenario">{summary}<div id="{_e(r.key)}">{"".join(body)}</div></details>'
    )


def _trials(card: Scorecard) -> str:
    if not card.trials:
        return ""
    rows = "".join(
        f"<tr><td>{_e(sid)}</td><td class=n>{t.passes}/{t.judged}</td>"
        f"<td class=n>{_score(t.pass_hat_k.get(t.judged))}</td>"
        f"<td class=n>{_score(t.pass_at_k.get(t.judged))}</td>"
        f"<td class=n>{_score(t.score_mean)}</td><td class=n>{_score(t.score_stdev)}</td>"
        f"<td>{_e(t.label.value)}</td></tr>"
        for sid, t in card.trials.items()
    )
    return (
        f"<h2>Trials ({card.config.trials} per scenario)</h2><table><tr><th>Scenario</th>"
        "<th class=n>Passes</th><th class=n>pass^k</th><th class=n>pass@k</th>"
        f"<th class=n>Score mean</th><th class=n>Stdev</th><th>Label</th></tr>{rows}</table>"
    )


def _performance(card: Scorecard) -> str:
    t = card.performance.totals
    cells = [
        ("wall s", _score(t.wall_s)),
        ("turns", str(t.turns)),
        ("turn mean s", _score(t.turn_wall_s_mean)),
        ("turn p50 s", _score(t.turn_wall_s_p50)),
        ("turn p90 s", _score(t.turn_wall_s_p90)),
        ("TTFT s", _score(t.ttft_s_mean)),
        ("tokens/s", _score(t.tokens_per_s_mean)),
        ("tokens in/out", f"{t.input_tokens}/{t.output_tokens}"),
        ("agent indexing s", _score(t.agent_indexing_s)),
        ("wall ÷ agent time", _score(t.overhead_ratio)),
    ]
    return (
        '<div class="cards">'
        + "".join(_card(v, k) for k, v in cells)
        + f'</div><p class="headline" id="run-wall">{_e(run_wall_text(card))}</p>'
        + f'<p class="headline" id="overhead">{_e(overhead_text(card))}</p>'
        + f'<p class="headline" id="indexing">{_e(indexing_text(card))}</p>'
        + f'<p class="headline" id="turn-embedding">{_e(turn_embedding_text(card))}</p>'
        + "".join(f'<p class="headline" id="embedding-cache">{_e(cached)}</p>'
                  for cached in [embedding_cache_text(card)] if cached)
        + _setup(card)
    )


def _setup(card: Scorecard) -> str:
    """Set-up phases over the run (median, p90), then each scenario's, collapsed."""
    setup = card.performance.setup
    if not setup.scenarios:
        return (
            '<h3>Set-up</h3><p class="muted" id="setup">Set-up timings: n/a (no scenario of this '
            "run recorded them: traces written before set-up was timed, or no sandbox opened).</p>"
        )
    rows = "".join(
        f"<tr><td>{_e(label)}</td><td class=n>{_score(stats.median_s)}</td>"
        f"<td class=n>{_score(stats.p90_s)}</td><td class=n>{stats.measured}</td></tr>"
        for label, stats in ((label, setup.phase(phase)) for phase, label in SETUP_PHASES.items())
    )
    head = "".join(f"<th class=n>{_e(label)} s</th>" for label in SETUP_PHASES.values())
    per_scenario = "".join(
        f"<tr><td>{_e(key)}</td><td>{_mark(stats.setup.pool_hit)}</td>"
        + "".join(
            f"<td class=n>{_score(phase_seconds(stats.setup, phase))}</td>"
            for phase in SETUP_PHASES
        )
        + "</tr>"
        for key, stats in card.performance.scenarios.items()
        if stats.setup is not None
    )
    return (
        f'<h3>Set-up</h3><p id="setup">Recorded for {setup.scenarios} of '
        f"{len(card.scenarios)} scenarios · warm pool hits: {_e(pool_text(setup))}</p>"
        "<table><tr><th>Phase</th><th class=n>Median s</th><th class=n>p90 s</th>"
        f"<th class=n>Scenarios timed</th></tr>{rows}</table>"
        "<details><summary>Set-up by scenario</summary><table><tr><th>Scenario</th>"
        f"<th>Pool hit</th>{head}</tr>{per_scenario}</table></details>"
    )


def render_html(card: Scorecard) -> str:
    state = "finished" if card.finished else "in progress — partial results"
    no_judge = (
        ""
        if card.config.judged
        else (
            '<p class="note">No judge was configured: exact checks decided what they could (a '
            "failed check is a FAIL; all checks passing stays NOT_JUDGED), performance was "
            "recorded, but no score was given. To turn judging on: "
            f"{_e(TURN_JUDGING_ON.replace('`', ''))}.</p>"
        )
    )
    warnings = "".join(f'<p class="note">{_e(w)}</p>' for w in card.warnings)
    scenarios = "".join(_scenario(r) for r in card.scenarios) or "<p>No scenario finished yet.</p>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>trialbox {_e(card.run_id)}</title><style>{_CSS}</style></head>
<body>
<h1>trialbox run {_e(card.run_id)}</h1>
<p class="muted">{_e(card.timestamp.isoformat())} · {_e(state)}</p>
<p class="headline" id="agent-model"><b>Agent model:</b> {_e(model_line(card.config))}</p>
{no_judge}{warnings}
<h2>Summary</h2>{_summary_cards(card)}
<h2>Configuration</h2>{_config(card)}
<h2>By category</h2>{_categories(card)}
<h2 id="charts">Charts</h2>{charts(card.summary, card.scenarios, card.performance)}
<h2>Scenarios</h2>{scenarios}
{_trials(card)}
<h2>Performance</h2>{_performance(card)}
</body></html>
"""
