"""Scenario files: the vocabulary (pydantic models), loading and validation, and selection.

GAIA 0.25.1's scenario format is accepted as is, plus trialbox's additions (per-turn checks
and claims, tags, timeout, reference, scenario-level checks); see design/architecture.md.
"""

from runner.scenarios._checks import (
    CHECK_TYPES,
    AnswerContains,
    AnswerNotContains,
    AnswerNumber,
    ArgumentMatcher,
    Check,
    DocumentsIndexed,
    MaxToolCalls,
    ToolCalled,
    ToolNotCalled,
    ToolsExact,
    ToolsInOrder,
    ToolStep,
)
from runner.scenarios._load import (
    Suite,
    discover,
    is_real_world,
    load_manifest,
    load_scenario_file,
    load_suite,
    missing_documents,
    path_escape,
)
from runner.scenarios._manifest import CorpusDocument, Fact, Manifest
from runner.scenarios._models import (
    KNOWN_PERSONAS,
    ClaimSpec,
    GroundTruth,
    Scenario,
    Setup,
    SetupDocument,
    Severity,
    Turn,
    default_timeout_s,
)
from runner.scenarios._problems import Level, Problem
from runner.scenarios._select import SelectionError, select

__all__ = [
    "CHECK_TYPES", "KNOWN_PERSONAS",
    "AnswerContains", "AnswerNotContains", "AnswerNumber", "ArgumentMatcher", "Check",
    "ClaimSpec", "CorpusDocument", "DocumentsIndexed", "Fact", "GroundTruth", "Level",
    "Manifest", "MaxToolCalls", "Problem", "Scenario", "SelectionError", "Setup",
    "SetupDocument", "Severity", "Suite", "ToolCalled", "ToolNotCalled", "ToolStep",
    "ToolsExact", "ToolsInOrder", "Turn",
    "default_timeout_s", "discover", "is_real_world", "load_manifest", "load_scenario_file",
    "load_suite", "missing_documents", "path_escape", "select",
]
