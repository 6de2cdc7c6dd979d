"""Scenario files: the vocabulary (pydantic models), loading and validation, and selection.

GAIA 0.25.1's scenario format is accepted as is, plus trialbox's additions (per-turn checks
and claims, tags, timeout, reference, scenario-level checks); see design/architecture.md.
"""

from runner.scenarios._checks import (
    CHECK_MODELS,
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
from runner.scenarios._corpus import CorpusNotFound, corpus_candidates, find_corpus
from runner.scenarios._fixtures import (
    FixtureStaging,
    declared_folders,
    default_fixtures_root,
    fixture_stagings,
)
from runner.scenarios._lanes import (
    LANES_FILE,
    CiLanes,
    LanesError,
    find_lanes,
    lane_categories,
    load_lanes,
    unclaimed,
)
from runner.scenarios._load import RejectedFile, Suite, discover, load_scenario_file, load_suite
from runner.scenarios._manifest import CorpusDocument, Fact, Manifest
from runner.scenarios._manifest_load import (
    MANIFEST_NAME,
    load_manifest,
    manifest_files,
    path_escape,
)
from runner.scenarios._models import (
    CAPABILITY_TAGS,
    KNOWN_PERSONAS,
    MAX_TURNS,
    OFFLINE_ABSENT,
    ClaimSpec,
    GroundTruth,
    Scenario,
    Setup,
    SetupDocument,
    Severity,
    Turn,
    capability_of_tag,
    corpus_relative,
    default_timeout_s,
    lacking_reason,
)
from runner.scenarios._problems import Level, Problem
from runner.scenarios._references import corpus_files, is_real_world, missing_documents
from runner.scenarios._regex import user_regex_search
from runner.scenarios._select import SelectionError, rejected_in_selection, select
from runner.scenarios._source import (
    MAX_ALIAS_EXPANSION,
    MAX_ALIASES,
    MAX_DEPTH,
    MAX_JSON_BYTES,
    MAX_YAML_BYTES,
)
from runner.scenarios._validate import MAX_ID_LENGTH

__all__ = [
    "OFFLINE_ABSENT",
    "capability_of_tag",
    "lacking_reason",
    "FixtureStaging",
    "declared_folders",
    "default_fixtures_root",
    "fixture_stagings",
    "AnswerContains",
    "AnswerNotContains",
    "AnswerNumber",
    "ArgumentMatcher",
    "CAPABILITY_TAGS",
    "CHECK_MODELS",
    "CHECK_TYPES",
    "Check",
    "ClaimSpec",
    "CorpusDocument",
    "CorpusNotFound",
    "MAX_TURNS",
    "CiLanes",
    "LANES_FILE",
    "LanesError",
    "find_lanes",
    "lane_categories",
    "load_lanes",
    "unclaimed",
    "DocumentsIndexed",
    "Fact",
    "GroundTruth",
    "KNOWN_PERSONAS",
    "Level",
    "MANIFEST_NAME",
    "MAX_ALIASES",
    "MAX_ALIAS_EXPANSION",
    "MAX_DEPTH",
    "MAX_ID_LENGTH",
    "MAX_JSON_BYTES",
    "MAX_YAML_BYTES",
    "Manifest",
    "MaxToolCalls",
    "Problem",
    "RejectedFile",
    "Scenario",
    "SelectionError",
    "Setup",
    "SetupDocument",
    "Severity",
    "Suite",
    "ToolCalled",
    "ToolNotCalled",
    "ToolStep",
    "ToolsExact",
    "ToolsInOrder",
    "Turn",
    "corpus_candidates",
    "corpus_files",
    "corpus_relative",
    "default_timeout_s",
    "discover",
    "find_corpus",
    "is_real_world",
    "load_manifest",
    "load_scenario_file",
    "load_suite",
    "manifest_files",
    "missing_documents",
    "path_escape",
    "rejected_in_selection",
    "select",
    "user_regex_search",
]
