"""The results folder: scorecard.json, summary.md, junit.xml, report.html, traces/.

Pydantic models own every file (JSON Schemas in runner/report/schemas/); `RunWriter` keeps the
folder readable after every scenario; `compare` diffs a run against a baseline.
"""

from runner.report._assemble import build_scorecard, scenario_result, trace_name, trace_of
from runner.report._compare import (
    EXIT_MODELS_DIFFER,
    EXIT_OK,
    EXIT_REGRESSION,
    Comparison,
    ComparisonEntry,
    compare,
)
from runner.report._html import render_html
from runner.report._junit import render_junit
from runner.report._models import (
    SCHEMA_VERSION,
    Cost,
    Performance,
    PerformanceStats,
    RunConfig,
    ScenarioResult,
    Scorecard,
    Trace,
    TurnResult,
)
from runner.report._performance import percentile
from runner.report._summary_md import render_summary_md
from runner.report._writer import RunWriter, atomic_write, read_scorecard

__all__ = [
    "EXIT_MODELS_DIFFER",
    "EXIT_OK",
    "EXIT_REGRESSION",
    "SCHEMA_VERSION",
    "Comparison",
    "ComparisonEntry",
    "Cost",
    "Performance",
    "PerformanceStats",
    "RunConfig",
    "RunWriter",
    "ScenarioResult",
    "Scorecard",
    "Trace",
    "TurnResult",
    "atomic_write",
    "build_scorecard",
    "compare",
    "percentile",
    "read_scorecard",
    "render_html",
    "render_junit",
    "render_summary_md",
    "scenario_result",
    "trace_name",
    "trace_of",
]
