"""The driver-build report as Markdown and as one self-contained HTML page.

The HTML page has inline CSS and inline SVG charts (deltas with their intervals, a vertical
line at "no change"), no script and no external asset, so it opens from a file:// URL, an
artifact store or an air-gapped lab machine. Every value from a run is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from runner.report._driver import detectable_text, scope_text
from runner.report._driver_models import Change, DriverReport, MetricDelta, OutcomeDelta
from runner.report._driver_setup import differing_settings

_COLOURS = {
    Change.FASTER: "#1a7f37",
    Change.BETTER: "#1a7f37",
    Change.SLOWER: "#cf222e",
    Change.WORSE: "#cf222e",
    Change.NO_CHANGE: "#57606a",
    Change.TOO_FEW: "#afb8c1",
}


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _num(value: float | None, unit: str = "") -> str:
    if value is None:
        return "—"
    return f"{value:.3g} {unit}".strip()


def _change(delta: MetricDelta, value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value * 100:+.1f}%" if delta.relative else f"{value:+.2f}"


def _interval(delta: MetricDelta) -> str:
    if delta.ci_low is None:
        return "—"
    return f"[{_change(delta, delta.ci_low)}, {_change(delta, delta.ci_high)}]"


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.0f}%"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _cell(value: str | None) -> str:
    # A value with a pipe or a newline would break the Markdown table.
    return "—" if value is None else value.replace("|", "\\|").replace("\n", " ")


def _statuses(values: Sequence[object]) -> str:
    return " ".join(getattr(v, "value", str(v)) for v in values) or "—"


# --- Markdown ------------------------------------------------------------------------------


def _md_metric_rows(deltas: Sequence[MetricDelta]) -> list[str]:
    rows = []
    for d in deltas:
        verdict = d.verdict.value + (f" ({d.note})" if d.note else "")
        rows.append(
            f"| {d.label} | {scope_text(d.scope, d.name)} | {d.scenarios} | {d.n_a} | {d.n_b} | "
            f"{_num(d.mean_a, d.unit)} | {_num(d.mean_b, d.unit)} | {_change(d, d.change)} | "
            f"{_interval(d)} | {_p(d.p_value)} | {_p(d.p_adjusted)} | {verdict} |"
        )
    return rows


_METRIC_HEAD = [
    "| metric | scope | scenarios | trials A | trials B | mean A | mean B | change | interval | p "
    "| p (BH) | verdict |",
    "|---|---|--:|--:|--:|--:|--:|--:|---|--:|--:|---|",
]


def _md_outcomes(outcomes: Sequence[OutcomeDelta]) -> list[str]:
    lines = [
        "| outcome | scope | pairs | A | B | lost | gained | McNemar p | p (BH) | verdict |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for o in outcomes:
        verdict = o.verdict.value + (f" ({o.note})" if o.note else "")
        lines.append(
            f"| {o.outcome} | {scope_text(o.scope, o.name)} | {o.pairs} | {_rate(o.a_rate)} | "
            f"{_rate(o.b_rate)} | {o.a_only} | {o.b_only} | {o.p_value:.3g} | {_p(o.p_adjusted)} | "
            f"{verdict} |"
        )
    return lines


def nothing_found(report: DriverReport) -> str:
    """The line for a report without a finding: a clean bill only where a change could have
    been found; where the n could not show one, it says that instead."""
    blind = [d.label for d in report.detectable if d.detectable is None and d.reason
             and d.reason != "not simulated"]
    if blind and len(blind) == len(report.detectable):
        return ("no finding, and none was possible: at this n no speed change of any size "
                "could be shown (see the smallest detectable change); run more scenarios")
    if blind:
        return (f"no finding beyond noise; {', '.join(blind)}: no change of any size could be "
                "shown at this n")
    return "no detectable change: every difference is within the noise of these samples"


def _units(r: DriverReport) -> str:
    """What the headline intervals resample: an A/B's block pairs (its speeds), or scenarios."""
    if any(d.block_pairs is not None for d in r.speed):
        return "A/B block pairs (speeds over all scenarios) and scenarios"
    return "scenarios"


def render_driver_md(report: DriverReport) -> str:
    """The report as Markdown (for a terminal, a PR comment or a job summary)."""
    r = report
    conf = f"{r.confidence * 100:.0f}%"
    lines = [
        f"# Driver-build comparison: A `{r.a_label}` vs B `{r.b_label}`",
        "",
        "## Beyond noise",
    ]
    lines += [f"- {f}" for f in r.beyond_noise] or [f"- {nothing_found(r)}"]
    lines += ["", "## Smallest detectable change"]
    lines += [f"- {detectable_text(d)}" for d in r.detectable] or [
        "- not computed: too few paired scenarios to estimate the noise"
    ]
    lines += ["", "## Run rules"] + [f"- {rule}" for rule in r.rules]
    differ, rest = differing_settings(r.fingerprint)
    lines += ["", "## Setup: what differs"]
    lines += ["| setting | A | B |", "|---|---|---|"] if differ else []
    lines += [f"| **{row.key}** | {_cell(row.a)} | {_cell(row.b)} |" for row in differ]
    lines += ["", rest] if rest else []
    overall = [d for d in r.speed if d.scope != "scenario"]
    per_scenario = [d for d in r.speed if d.scope == "scenario"]
    lines += ["", f"## Speed: B vs A, {conf} cluster-bootstrap interval over {_units(r)}", ""]
    lines += _METRIC_HEAD + _md_metric_rows(overall) if overall else ["(no speed measured)"]
    if per_scenario:
        lines += ["", "### Per scenario", ""] + _METRIC_HEAD + _md_metric_rows(per_scenario)
    lines += ["", f"## Quality: paired outcomes, exact McNemar test at {r.alpha:g}", ""]
    lines += _md_outcomes(r.outcomes)
    if r.pass_k:
        lines += [
            "",
            (
                f"pass^{r.pass_k} (every one of {r.pass_k} tries passes), mean over scenarios: "
                f"A {_pct(r.pass_hat_k_a)}, B {_pct(r.pass_hat_k_b)}"
            ),
        ]
    if r.scores:
        lines += ["", "### Judged score (absolute change)", ""]
        lines += _METRIC_HEAD + _md_metric_rows(r.scores)
    lines += [
        "",
        "### Per scenario",
        "",
        "| scenario | category | A | B | pass^k A | pass^k B | score A | score B |",
        "|---|---|---|---|--:|--:|--:|--:|",
    ]
    for s in r.scenarios:
        lines.append(
            f"| {s.scenario_id} | {s.category} | {_statuses(s.statuses_a)} | "
            f"{_statuses(s.statuses_b)} | {_pct(s.pass_hat_k_a)} | {_pct(s.pass_hat_k_b)} | "
            f"{_pct(s.score_mean_a)} | {_pct(s.score_mean_b)} |"
        )
    notes = list(r.notes)
    if r.only_in_a:
        notes.append(f"only on A (not compared): {', '.join(r.only_in_a)}")
    if r.only_in_b:
        notes.append(f"only on B (not compared): {', '.join(r.only_in_b)}")
    notes.append(f"bootstrap: {r.resamples} resamples, seed {r.seed}, clustered by {_units(r)}")
    lines += ["", "## Notes"] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


# --- HTML ----------------------------------------------------------------------------------

_ROW_H = 22
_LABEL_W = 260
_PLOT_W = 440
_PAD = 16


def _nice(value: float) -> float:
    """The next 1, 2 or 5 × 10^k at or above `value`, so axis ticks read as round numbers."""
    step = math.pow(10.0, math.floor(math.log10(value)))
    return next(m * step for m in (1.0, 2.0, 5.0, 10.0) if m * step >= value)


def forest_svg(deltas: Sequence[MetricDelta], title: str) -> str:
    """One inline SVG: a row per scope, the point estimate and its interval around zero."""
    span = max(
        [abs(v) for d in deltas for v in (d.ci_low, d.ci_high, d.change) if v is not None]
        or [0.0]
    )
    relative = bool(deltas) and deltas[0].relative
    span = _nice(max(span * 1.05, 0.05 if relative else 0.5))
    width = _LABEL_W + _PLOT_W + 2 * _PAD + 210  # room for "+0.0% no detectable change"
    height = _PAD * 2 + _ROW_H * (len(deltas) + 1)
    x0 = _LABEL_W + _PAD

    def x(value: float) -> float:
        return x0 + (value + span) / (2 * span) * _PLOT_W

    def tick(value: float) -> str:
        if relative:
            return f"{value * 100:+.1f}%" if span < 0.1 else f"{value * 100:+.0f}%"
        return f"{value:+.2f}" if span < 1 else f"{value:+.1f}"

    parts = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" font-size="12" '
            f'font-family="system-ui,sans-serif"><title>{_e(title)}</title>'
        ),
        (
            f'<line x1="{x(0):.1f}" y1="{_PAD}" x2="{x(0):.1f}" '
            f'y2="{height - _PAD - _ROW_H + 6}" stroke="#1f2328" stroke-dasharray="3,3"/>'
        ),
    ]
    axis_y = height - _PAD
    for value in (-span, -span / 2, 0.0, span / 2, span):
        parts.append(
            f'<text x="{x(value):.1f}" y="{axis_y}" text-anchor="middle" fill="#57606a">'
            f"{_e(tick(value))}</text>"
        )
    for i, d in enumerate(deltas):
        y = _PAD + _ROW_H * i + _ROW_H / 2
        colour = _COLOURS[d.verdict]
        parts.append(
            f'<text x="{_LABEL_W}" y="{y + 4:.1f}" text-anchor="end">'
            f"{_e(scope_text(d.scope, d.name))}</text>"
        )
        if d.change is None or d.ci_low is None or d.ci_high is None:
            parts.append(
                f'<text x="{x(0) + 6:.1f}" y="{y + 4:.1f}" fill="{colour}">{_e(d.verdict.value)}'
                f"</text>"
            )
            continue
        tip = f"{d.name}: {_change(d, d.change)} {_interval(d)} {d.verdict.value}"
        parts.append(
            f'<g><title>{_e(tip)}</title><line x1="{x(d.ci_low):.1f}" y1="{y:.1f}" '
            f'x2="{x(d.ci_high):.1f}" y2="{y:.1f}" stroke="{colour}" stroke-width="3"/>'
            f'<circle cx="{x(d.change):.1f}" cy="{y:.1f}" r="4.5" fill="{colour}"/></g>'
            f'<text x="{x0 + _PLOT_W + 10}" y="{y + 4:.1f}" fill="{colour}">'
            f"{_e(_change(d, d.change) + ' ' + d.verdict.value)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1200px;
padding:24px;color:#1f2328}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}h3{font-size:15px}
table{border-collapse:collapse;width:100%;margin:6px 0}
th,td{border-bottom:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.n{text-align:right}
tr.differs td{background:#fff8c5;font-weight:600}
.faster,.better{color:#1a7f37;font-weight:600}.slower,.worse{color:#cf222e;font-weight:600}
.muted{color:#57606a}figure{margin:10px 0}figcaption{font-weight:600}
"""


def _cls(change: Change) -> str:
    return change.name.lower().replace("_", "-")


def _html_metric_table(deltas: Sequence[MetricDelta]) -> str:
    head = "".join(
        f"<th>{h}</th>"
        for h in ("scope", "scenarios", "trials A", "trials B", "mean A", "mean B", "change",
                  "interval", "p", "p (BH)", "verdict")
    )
    body = "".join(
        f"<tr><td>{_e(scope_text(d.scope, d.name))}</td><td class=n>{d.scenarios}</td>"
        f"<td class=n>{d.n_a}</td>"
        f"<td class=n>{d.n_b}</td><td class=n>{_e(_num(d.mean_a, d.unit))}</td>"
        f"<td class=n>{_e(_num(d.mean_b, d.unit))}</td><td class=n>{_e(_change(d, d.change))}"
        f"</td><td>{_e(_interval(d))}</td><td class=n>{_p(d.p_value)}</td>"
        f"<td class=n>{_p(d.p_adjusted)}</td><td class={_cls(d.verdict)}>{_e(d.verdict.value)}"
        f"{' — ' + _e(d.note) if d.note else ''}</td></tr>"
        for d in deltas
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _html_outcomes(outcomes: Sequence[OutcomeDelta]) -> str:
    head = "".join(
        f"<th>{h}</th>"
        for h in ("outcome", "scope", "pairs", "A", "B", "lost", "gained", "McNemar p", "p (BH)",
                  "verdict")
    )
    body = "".join(
        f"<tr><td>{_e(o.outcome)}</td><td>{_e(scope_text(o.scope, o.name))}</td>"
        f"<td class=n>{o.pairs}</td><td class=n>{_rate(o.a_rate)}</td>"
        f"<td class=n>{_rate(o.b_rate)}</td><td class=n>{o.a_only}</td>"
        f"<td class=n>{o.b_only}</td><td class=n>{o.p_value:.3g}</td>"
        f"<td class=n>{_p(o.p_adjusted)}</td>"
        f"<td class={_cls(o.verdict)}>{_e(o.verdict.value)}"
        f"{' — ' + _e(o.note) if o.note else ''}</td></tr>"
        for o in outcomes
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _charts(deltas: Sequence[MetricDelta], caption: str) -> str:
    by_metric: dict[str, list[MetricDelta]] = {}
    for d in deltas:
        by_metric.setdefault(d.metric, []).append(d)
    figures = []
    for rows in by_metric.values():
        title = f"{rows[0].label}: {caption}"
        figures.append(
            f"<figure><figcaption>{_e(title)}</figcaption>{forest_svg(rows, title)}"
            f"{_html_metric_table(rows)}</figure>"
        )
    return "".join(figures)


def render_driver_html(report: DriverReport) -> str:
    """The report as one self-contained HTML page with inline SVG charts."""
    r = report
    conf = f"{r.confidence * 100:.0f}%"
    findings = "".join(f"<li>{_e(f)}</li>" for f in r.beyond_noise) or (
        f"<li>{_e(nothing_found(r))}</li>"
    )
    differ, rest = differing_settings(r.fingerprint)
    setup = "".join(
        f"<tr class=differs><td>{_e(row.key)}</td>"
        f"<td>{_e(row.a or '—')}</td><td>{_e(row.b or '—')}</td></tr>"
        for row in differ
    ) + (f"<tr class=same><td colspan=3>{_e(rest)}</td></tr>" if rest else "")
    scenarios = "".join(
        f"<tr><td>{_e(s.scenario_id)}</td><td>{_e(s.category)}</td>"
        f"<td>{_e(_statuses(s.statuses_a))}</td><td>{_e(_statuses(s.statuses_b))}</td>"
        f"<td class=n>{_pct(s.pass_hat_k_a)}</td><td class=n>{_pct(s.pass_hat_k_b)}</td>"
        f"<td class=n>{_pct(s.score_mean_a)}</td><td class=n>{_pct(s.score_mean_b)}</td></tr>"
        for s in r.scenarios
    )
    pass_k = (
        f"<p>pass^{r.pass_k}, mean over scenarios: A {_pct(r.pass_hat_k_a)}, "
        f"B {_pct(r.pass_hat_k_b)}</p>"
        if r.pass_k
        else ""
    )
    detectable = "".join(f"<li>{_e(detectable_text(d))}</li>" for d in r.detectable) or (
        "<li>not computed: too few paired scenarios to estimate the noise</li>"
    )
    rules = "".join(f"<li>{_e(rule)}</li>" for rule in r.rules)
    notes = list(r.notes) + [
        f"bootstrap: {r.resamples} resamples, seed {r.seed}, clustered by {_units(r)}"
    ]
    if r.only_in_a or r.only_in_b:
        notes.append(
            f"not compared — only on A: {', '.join(r.only_in_a) or 'none'}; "
            f"only on B: {', '.join(r.only_in_b) or 'none'}"
        )
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>Driver-build comparison {_e(r.a_label)} vs {_e(r.b_label)}</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<h1>Driver-build comparison</h1><p>A (reference) <code>{_e(r.a_label)}</code> · "
        f"B (under test) <code>{_e(r.b_label)}</code></p>"
        f"<h2>Beyond noise</h2><ul>{findings}</ul>"
        f"<h2>Smallest detectable change</h2><ul>{detectable}</ul>"
        f"<h2>Run rules</h2><ul>{rules}</ul>"
        f"<h2>Setup</h2><p class=muted>The settings that differ between A and B.</p>"
        f"<table><tr><th>setting</th><th>A</th><th>B</th></tr>{setup}</table>"
        f"<h2>Speed</h2><p class=muted>B vs A; points are the change in the mean, bars the "
        f"{conf} cluster-bootstrap interval over {_units(r)} (unadjusted); the verdict uses the "
        f"Benjamini–Hochberg adjusted p; the dashed line is no change.</p>"
        f"{_charts(r.speed, 'B vs A') or '<p>no speed measured</p>'}"
        f"<h2>Quality</h2><p class=muted>Paired outcomes (same scenario, same trial), exact "
        f"McNemar test at {r.alpha:g}.</p>{_html_outcomes(r.outcomes)}{pass_k}"
        f"{_charts(r.scores, 'B − A') if r.scores else ''}"
        f"<h3>Per scenario</h3><table><tr><th>scenario</th><th>category</th><th>A</th>"
        f"<th>B</th><th>pass^k A</th><th>pass^k B</th><th>score A</th><th>score B</th></tr>"
        f"{scenarios}</table>"
        f"<h2>Notes</h2><ul>{''.join(f'<li>{_e(n)}</li>' for n in notes)}</ul>"
        f"</body></html>\n"
    )
