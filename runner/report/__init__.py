"""The results folder: scorecard.json, summary.md, junit.xml, report.html, traces/.

Pydantic models own every file (JSON Schemas in runner/report/schemas/); `RunWriter` keeps the
folder readable after every scenario (and writes scorecard.gaia.json, GAIA's format);
`read_any_scorecard` reads ours or GAIA's; `compare` diffs a run against a baseline;
`save_baseline` writes one both tools can read; `driver_report` compares two driver builds.
"""

from runner.report._assemble import build_scorecard, scenario_result, trace_name, trace_of
from runner.report._baseline import baseline_meta, save_baseline
from runner.report._compare import (
    EXIT_MODELS_DIFFER,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_UNREADABLE,
    Comparison,
    ComparisonEntry,
    compare,
)
from runner.report._driver import driver_report
from runner.report._driver_models import (
    Change,
    DecodingMismatchError,
    DeviceMismatchError,
    DriverReport,
    FingerprintRow,
    MetricDelta,
    OutcomeDelta,
    ScenarioQuality,
)
from runner.report._driver_render import render_driver_html, render_driver_md
from runner.report._driver_setup import SAMPLED_DECODING
from runner.report._folder import GAIA_SCORECARD, atomic_write, read_scorecard
from runner.report._from_gaia import gaia_to_scorecard
from runner.report._gaia import BaselineMeta, GaiaScorecard
from runner.report._html import render_html
from runner.report._identity import served_model_of
from runner.report._inspect import InspectUnavailable, export_run
from runner.report._junit import render_junit
from runner.report._load import ScorecardError, read_any_scorecard, read_trace, read_traces
from runner.report._models import (
    SCHEMA_VERSION,
    Cost,
    NodeIdentity,
    ReferenceDecode,
    RunConfig,
    ScenarioResult,
    Scorecard,
    Trace,
    TurnResult,
)
from runner.report._performance import RESCORED_FROM, percentile, scenario_stats
from runner.report._performance_models import Performance, PerformanceStats
from runner.report._summary_md import render_summary_md
from runner.report._to_gaia import gaia_json, scorecard_to_gaia
from runner.report._writer import RunWriter, declared_order

__all__ = [
    "BaselineMeta",
    "Change",
    "Comparison",
    "ComparisonEntry",
    "Cost",
    "DecodingMismatchError",
    "DeviceMismatchError",
    "DriverReport",
    "EXIT_MODELS_DIFFER",
    "EXIT_OK",
    "EXIT_REGRESSION",
    "EXIT_UNREADABLE",
    "FingerprintRow",
    "GAIA_SCORECARD",
    "GaiaScorecard",
    "InspectUnavailable",
    "MetricDelta",
    "NodeIdentity",
    "OutcomeDelta",
    "Performance",
    "PerformanceStats",
    "ReferenceDecode",
    "RunConfig",
    "RunWriter",
    "SAMPLED_DECODING",
    "SCHEMA_VERSION",
    "ScenarioQuality",
    "ScenarioResult",
    "Scorecard",
    "ScorecardError",
    "Trace",
    "TurnResult",
    "atomic_write",
    "baseline_meta",
    "build_scorecard",
    "compare",
    "declared_order",
    "driver_report",
    "export_run",
    "gaia_json",
    "gaia_to_scorecard",
    "RESCORED_FROM",
    "percentile",
    "scenario_stats",
    "read_any_scorecard",
    "read_scorecard",
    "read_trace",
    "read_traces",
    "render_driver_html",
    "render_driver_md",
    "render_html",
    "render_junit",
    "render_summary_md",
    "save_baseline",
    "scenario_result",
    "scorecard_to_gaia",
    "served_model_of",
    "trace_name",
    "trace_of",
]
