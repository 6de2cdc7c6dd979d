"""Charts for report.html as inline SVG: no script, no library, no external asset.

Why SVG written by hand: the page must work from file://, an artifact store or an air-gapped
machine under a `default-src 'none'` policy, and a few bar charts need nothing more. Each chart
is an <svg> with a known id and a <title> (its accessible name), labelled axes, and a <title>
on every bar so hovering shows the exact number. Missing measurements say "not measured"
rather than draw a zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from runner.report._models import ScenarioResult
from runner.report._performance_models import Performance
from runner.verdict import CategorySummary, Summary

WIDTH = 760
LABEL_W = 190  # room for category / scenario names left of horizontal bars
FONT = 'font-family="system-ui,sans-serif" font-size="12"'

STATUS_SEGMENTS: tuple[tuple[str, str, str], ...] = (
    # (key, legend label, colour)
    ("passed", "PASS", "#1a7f37"),
    ("judge_failed", "FAIL (judge)", "#cf222e"),
    ("checks_failed", "FAIL (checks)", "#e16f24"),
    ("blocked", "BLOCKED", "#8250df"),
    ("checks_passed_not_judged", "checks passed, not judged", "#54aeff"),
    ("plain_not_judged", "NOT_JUDGED (no check)", "#8c959f"),
    ("infrastructure", "infrastructure", "#9a6700"),
)


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def nice_step(top: float, ticks: int = 5) -> float:
    """A round tick step (1, 2 or 5 × 10^k) giving about `ticks` intervals up to `top`."""
    if top <= 0:
        return 1.0
    raw = top / ticks
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _fmt(value: float) -> str:
    return f"{value:g}" if value >= 1 or value == 0 else f"{value:.2g}"


def _svg(chart_id: str, title: str, height: int, body: list[str]) -> str:
    return (
        f'<svg id="{_e(chart_id)}" class="chart" role="img" aria-labelledby="{_e(chart_id)}-title"'
        f' viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" {FONT}'
        f'><title id="{_e(chart_id)}-title">{_e(title)}</title>' + "".join(body) + "</svg>"
    )


def _empty(chart_id: str, title: str, message: str) -> str:
    return _svg(chart_id, title, 40, [f'<text x="8" y="24" fill="#57606a">{_e(message)}</text>'])


def _x_axis(x0: float, width: float, y: float, top: float, step: float, label: str) -> list[str]:
    """A horizontal value axis from 0 to `top` with round ticks and a title underneath."""
    parts = [f'<line x1="{x0}" y1="{y}" x2="{x0 + width}" y2="{y}" stroke="#57606a"/>']
    ticks = round(top / step)
    for i in range(ticks + 1):
        x = x0 + width * i / ticks
        parts.append(f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 4}" stroke="#57606a"/>')
        parts.append(f'<text x="{x:.1f}" y="{y + 16}" text-anchor="middle">{_fmt(i * step)}</text>')
    parts.append(
        f'<text class="axis-title" x="{x0 + width / 2:.1f}" y="{y + 32}" text-anchor="middle"'
        f' font-weight="600">{_e(label)}</text>'
    )
    return parts


def _segments(c: CategorySummary) -> dict[str, int]:
    infra = c.timeout + c.budget_exceeded + c.infra_error + c.errored + c.skipped + c.not_run
    return {
        "passed": c.passed,
        "judge_failed": c.failed - c.checks_failed,
        "checks_failed": c.checks_failed,
        "blocked": c.blocked,
        "checks_passed_not_judged": c.checks_passed_not_judged,
        "plain_not_judged": c.not_judged - c.checks_passed_not_judged,
        "infrastructure": infra,
    }


def status_by_category(summary: Summary) -> str:
    """Stacked horizontal bars: per category, how many scenarios ended in each status group."""
    chart_id, title = "chart-status-by-category", "Scenario status by category"
    rows = {name: _segments(c) for name, c in summary.by_category.items()}
    if not rows:
        return _empty(chart_id, title, "No scenario finished yet.")
    top_count = max(sum(r.values()) for r in rows.values())
    step = nice_step(top_count, 5) if top_count > 5 else 1.0
    top: float = math.ceil(top_count / step) * step
    bar_w, row_h, legend_h = WIDTH - LABEL_W - 30, 24, 44
    body: list[str] = []
    for i, (_, label, colour) in enumerate(STATUS_SEGMENTS):  # legend, two rows
        lx, ly = 8 + (i % 4) * 185, 14 + (i // 4) * 18
        body.append(
            f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{colour}"/>'
            f'<text x="{lx + 17}" y="{ly}">{_e(label)}</text>'
        )
    for row, (name, counts) in enumerate(rows.items()):
        y = legend_h + row * row_h
        body.append(
            f'<text x="{LABEL_W - 8}" y="{y + 16}" text-anchor="end">{_e(_short(name))}'
            f"<title>{_e(name)}</title></text>"
        )
        x: float = LABEL_W
        for key, label, colour in STATUS_SEGMENTS:
            count = counts[key]
            if count <= 0:
                continue
            width = bar_w * count / top
            body.append(
                f'<rect class="bar" x="{x:.1f}" y="{y + 4}" width="{width:.1f}" height="{row_h - 8}"'
                f' fill="{colour}"><title>{_e(name)}: {count} {_e(label)}</title></rect>'
            )
            x += width
    axis_y = legend_h + len(rows) * row_h + 4
    body += _x_axis(LABEL_W, bar_w, axis_y, top, step, "scenarios")
    return _svg(chart_id, title, int(axis_y + 40), body)


def turn_latency_histogram(results: Sequence[ScenarioResult]) -> str:
    """How long turns took: a histogram of every measured turn's wall time."""
    chart_id, title = "chart-turn-latency", "Turn latency distribution (wall time per turn)"
    walls = [t.performance.wall_s for r in results for t in r.turns if t.performance is not None]
    if not walls:
        return _empty(chart_id, title, "No turn was measured.")
    step = nice_step(max(walls), 10)
    bins = max(1, math.ceil(max(walls) / step + 1e-9))
    counts = [0] * bins
    for wall in walls:
        counts[min(int(wall / step), bins - 1)] += 1
    x0, y0, plot_w, plot_h = 60, 16, WIDTH - 90, 200
    top_count = max(counts)
    y_step = nice_step(top_count, 4) if top_count > 4 else 1.0
    y_top = math.ceil(top_count / y_step) * y_step
    body = [f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y0 + plot_h}" stroke="#57606a"/>']
    for i in range(round(y_top / y_step) + 1):
        y = y0 + plot_h - plot_h * i * y_step / y_top
        body.append(
            f'<line x1="{x0 - 4}" y1="{y:.1f}" x2="{x0 + plot_w}" y2="{y:.1f}" stroke="#d0d7de"/>'
            f'<text x="{x0 - 8}" y="{y + 4:.1f}" text-anchor="end">{_fmt(i * y_step)}</text>'
        )
    body.append(
        f'<text class="axis-title" transform="translate(16 {y0 + plot_h / 2}) rotate(-90)"'
        f' text-anchor="middle" font-weight="600">turns</text>'
    )
    bin_w = plot_w / bins
    for i, count in enumerate(counts):
        if count == 0:
            continue
        height = plot_h * count / y_top
        body.append(
            f'<rect class="bar" x="{x0 + i * bin_w + 1:.1f}" y="{y0 + plot_h - height:.1f}"'
            f' width="{max(bin_w - 2, 1):.1f}" height="{height:.1f}" fill="#0969da">'
            f"<title>{count} turn(s) took {_fmt(i * step)}–{_fmt((i + 1) * step)} s</title></rect>"
        )
    body += _x_axis(x0, plot_w, y0 + plot_h, bins * step, step, "turn wall time (s)")
    return _svg(chart_id, title, y0 + plot_h + 42, body)


def _short(name: str, width: int = 28) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def scenario_bars(
    performance: Performance,
    metric: str,
    chart_id: str,
    title: str,
    unit: str,
    axis: str,
    colour: str,
) -> str:
    """One horizontal bar per scenario for `metric` (a PerformanceStats field)."""
    values = {key: getattr(stats, metric) for key, stats in performance.scenarios.items()}
    if not values:
        return _empty(chart_id, title, "No scenario finished yet.")
    measured = [v for v in values.values() if v is not None]
    top_value = max(measured) if measured else 1.0
    step = nice_step(top_value, 5)
    top = math.ceil(top_value / step) * step or step
    bar_w, row_h, y0 = WIDTH - LABEL_W - 80, 18, 6
    body: list[str] = []
    for row, (key, value) in enumerate(values.items()):
        y = y0 + row * row_h
        body.append(
            f'<text x="{LABEL_W - 8}" y="{y + 13}" text-anchor="end">{_e(_short(key))}'
            f"<title>{_e(key)}</title></text>"
        )
        if value is None:
            body.append(f'<text x="{LABEL_W + 4}" y="{y + 13}" fill="#57606a">not measured</text>')
            continue
        width = bar_w * value / top
        body.append(
            f'<rect class="bar" x="{LABEL_W}" y="{y + 3}" width="{width:.1f}" height="{row_h - 6}"'
            f' fill="{colour}"><title>{_e(key)}: {value:.3g} {_e(unit)}</title></rect>'
            f'<text x="{LABEL_W + width + 4:.1f}" y="{y + 13}">{value:.3g}</text>'
        )
    axis_y = y0 + len(values) * row_h + 2
    body += _x_axis(LABEL_W, bar_w, axis_y, top, step, axis)
    return _svg(chart_id, title, int(axis_y + 40), body)


def charts(summary: Summary, results: Sequence[ScenarioResult], performance: Performance) -> str:
    """Every chart of the report, each in a <figure> with a caption."""
    figures = [
        ("Status by category", status_by_category(summary)),
        ("Turn latency", turn_latency_histogram(results)),
        (
            "Time to first token per scenario",
            scenario_bars(
                performance,
                "ttft_s_mean",
                "chart-ttft",
                "Mean TTFT per scenario",
                "s",
                "time to first token, mean over turns (s)",
                "#8250df",
            ),
        ),
        (
            "Generation speed per scenario",
            scenario_bars(
                performance,
                "tokens_per_s_mean",
                "chart-tokens-per-s",
                "Mean tokens/s per scenario",
                "tokens/s",
                "generated tokens per second, mean over turns",
                "#1a7f37",
            ),
        ),
    ]
    return "".join(
        f'<figure class="chart-figure">{svg}<figcaption>{_e(caption)}</figcaption></figure>'
        for caption, svg in figures
    )
