"""Quality gates for the scenario suite in eval/scenarios, loaded by the real loader.

The corpus is built into a temporary copy first (generated documents are not committed), so
`load_suite` sees the tree exactly as a run would after `python -m runner.corpus build`.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from runner.corpus import build_corpus, normalise, read_manifest
from runner.scenarios import (
    AnswerContains,
    AnswerNumber,
    Scenario,
    Suite,
    ToolCalled,
    ToolNotCalled,
    ToolsExact,
    ToolsInOrder,
    load_suite,
)
from runner.verdict.literals import literal_in
from runner.verdict.numbers import find_numbers

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "eval" / "scenarios"
CORPUS = REPO / "eval" / "corpus"

MINIMUM_PER_CATEGORY = {
    "rag_quality": 7, "context_retention": 4, "tool_selection": 4, "error_recovery": 3,
    "adversarial": 3, "personality": 3, "vision": 3, "real_world": 19, "web_system": 6,
    "memory": 10, "mcp_reliability": 6, "captured": 2,
}

# Tool names of amd-gaia 0.25.1 (gaia/agents/tools: rag_tools, file_tools, browser_tools,
# shell_tools, screenshot_tools). A check naming any other tool could never pass or fail.
GAIA_TOOLS = {
    "query_documents", "query_specific_file", "search_indexed_chunks", "evaluate_retrieval",
    "index_document", "list_indexed_documents", "rag_status", "summarize_document",
    "dump_document", "index_directory", "search_file", "search_directory", "read_file",
    "search_file_content", "write_file", "edit_file", "browse_directory", "get_file_info",
    "analyze_data_file", "list_recent_files", "fetch_page", "search_web", "download_file",
    "run_shell_command", "take_screenshot",
    # MemoryMixin's tools (gaia/agents/base/memory.py), offered to an agent built with memory.
    "remember", "recall", "update_memory", "forget", "search_past_conversations",
}
# Keys the corpus adds to the manifest (runner/corpus/_manifest.py) which the loader's base
# models do not declare yet: they may only warn.
CORPUS_ONLY_KEYS = ("'absent_terms'", "'expected_behavior'")


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    corpus = tmp_path_factory.mktemp("corpus")
    shutil.copy2(CORPUS / "manifest.json", corpus / "manifest.json")
    shutil.copytree(CORPUS / "documents", corpus / "documents")
    report = build_corpus(corpus, cache_dir=REPO / ".cache" / "corpus")
    assert report.ok
    return load_suite([SCENARIOS], corpus)


@pytest.fixture(scope="module")
def scenarios(suite: Suite) -> list[Scenario]:
    return suite.scenarios


def test_the_whole_tree_loads_without_errors(suite: Suite) -> None:
    assert [str(p) for p in suite.errors] == []
    files = sorted(SCENARIOS.rglob("*.yaml"))
    assert len(suite.scenarios) == len(files)


def test_the_only_warnings_are_corpus_keys_or_missing_real_world_texts(suite: Suite) -> None:
    for problem in suite.warnings:
        text = str(problem)
        assert any(key in text for key in CORPUS_ONLY_KEYS) or "SKIPPED_NO_DOCUMENT" in text, text


def test_every_category_meets_its_count(scenarios: list[Scenario]) -> None:
    counts = Counter(s.category for s in scenarios)
    for category, minimum in MINIMUM_PER_CATEGORY.items():
        assert counts[category] >= minimum, (category, counts[category])
    assert set(counts) == set(MINIMUM_PER_CATEGORY)
    assert sum(counts.values()) >= 52


def test_scenario_ids_are_unique_and_match_file_names(scenarios: list[Scenario]) -> None:
    ids = [s.id for s in scenarios]
    assert len(ids) == len(set(ids))
    for scenario in scenarios:
        assert scenario.source_file is not None
        assert scenario.source_file.stem == scenario.id
        assert scenario.source_file.parent.name == scenario.category


def test_every_turn_runs_offline_and_can_be_judged(scenarios: list[Scenario]) -> None:
    for scenario in scenarios:
        for turn in scenario.turns:
            where = f"{scenario.id} turn {turn.turn}"
            assert turn.objective.strip() and (turn.user_message or "").strip(), where
            assert turn.ground_truth is not None or (turn.success_criteria or "").strip(), where
            assert turn.success_criteria, where  # the judge gets both when both exist
            assert turn.claims or turn.checks, where


def test_most_scenarios_are_short(scenarios: list[Scenario]) -> None:
    lengths = Counter(len(s.turns) for s in scenarios)
    assert max(lengths) <= 3
    assert sum(n for turns, n in lengths.items() if turns <= 2) / len(scenarios) > 0.8


def test_every_ground_truth_names_a_manifest_fact_with_the_same_answer(
        scenarios: list[Scenario]) -> None:
    manifest = read_manifest(CORPUS)
    for scenario in scenarios:
        for turn in scenario.turns:
            truth = turn.ground_truth
            if truth is None:
                continue
            where = f"{scenario.id} turn {turn.turn}"
            assert "expected_answer" in truth.model_fields_set, where
            if truth.doc_id is None and truth.fact_id is None:
                # A derived answer (arithmetic on facts, what the memory holds): no manifest
                # fact states it, so the turn states it itself, and the self-test proves it.
                assert truth.expected_answer is not None, where
                continue
            entry = manifest.document(truth.doc_id or "")
            assert entry is not None, where
            fact = next((f for f in entry.facts if f.id == truth.fact_id), None)
            assert fact is not None, where
            # The turn may state the fact in the form it asks for (a date as the user wants it
            # written, the owner with the deadline): the fact's answer must still be in it.
            expected, stated = truth.expected_answer, fact.answer
            assert expected == stated or (
                isinstance(expected, str) and isinstance(stated, str) and literal_in(stated, expected)
            ), where


def test_setup_documents_name_their_manifest_entry_and_its_path(
        scenarios: list[Scenario]) -> None:
    manifest = read_manifest(CORPUS)
    for scenario in scenarios:
        for document in scenario.setup_documents:
            entry = manifest.document(document.corpus_doc or "")
            assert entry is not None and entry.filename == document.path, scenario.id


def test_answer_checks_agree_with_the_ground_truth(scenarios: list[Scenario]) -> None:
    """A check must pass on the expected answer, or the suite would fail correct agents."""
    for scenario in scenarios:
        for turn in scenario.turns:
            expected = " ".join(filter(None, [
                str(turn.ground_truth.expected_answer) if turn.ground_truth
                and turn.ground_truth.expected_answer is not None else "",
                turn.success_criteria or ""]))
            for check in turn.checks:
                where = f"{scenario.id} turn {turn.turn}: {check.type}"
                if isinstance(check, AnswerNumber):
                    found = [n.value for n in find_numbers(expected)]
                    assert any(abs(v - check.value) <= abs(check.value) * check.tolerance + 1e-9
                               for v in found), (where, found)
                elif isinstance(check, AnswerContains):
                    haystack = expected.lower() if check.ignore_case else expected
                    needle = check.text.lower() if check.ignore_case else check.text
                    assert needle in haystack, where


def test_unanswerable_turns_never_require_a_specific_answer(scenarios: list[Scenario]) -> None:
    for scenario in scenarios:
        for turn in scenario.turns:
            if turn.ground_truth is not None and turn.ground_truth.must_say_unknown:
                assert not any(isinstance(c, (AnswerNumber, AnswerContains))
                               for c in turn.checks), scenario.id
                assert turn.claims, scenario.id


def test_checks_name_only_real_gaia_tools(scenarios: list[Scenario]) -> None:
    for scenario in scenarios:
        checks = [*scenario.checks, *(c for t in scenario.turns for c in t.checks)]
        for check in checks:
            if isinstance(check, (ToolCalled, ToolNotCalled)):
                assert check.tool in GAIA_TOOLS, (scenario.id, check.tool)
            elif isinstance(check, (ToolsInOrder, ToolsExact)):
                assert {step.tool for step in check.tools} <= GAIA_TOOLS, scenario.id
        for turn in scenario.turns:
            assert set(turn.expected_tools or []) <= GAIA_TOOLS, scenario.id


def test_capability_scenarios_forbid_pretending(scenarios: list[Scenario]) -> None:
    """vision and web_system: a claim that the agent admits the missing capability."""
    for scenario in scenarios:
        if scenario.category not in {"vision", "web_system"}:
            continue
        claims = " ".join(c.claim for t in scenario.turns for c in t.claims).lower()
        assert re.search(r"cannot|did not|does not", claims), scenario.id
        assert "capability_honesty" in scenario.tags or "safety" in scenario.tags, scenario.id


def test_hallucination_scenarios_are_critical(scenarios: list[Scenario]) -> None:
    critical = [s for s in scenarios if s.severity.value == "critical"]
    assert len(critical) >= 5
    for scenario in scenarios:
        if "hallucination" in scenario.tags:
            assert scenario.severity.value in {"critical", "high"}, scenario.id


def test_real_world_scenarios_use_only_real_world_documents(scenarios: list[Scenario]) -> None:
    manifest = read_manifest(CORPUS)
    for scenario in scenarios:
        if scenario.category != "real_world":
            continue
        assert scenario.setup_documents, scenario.id
        for document in scenario.setup_documents:
            entry = manifest.document(document.corpus_doc or "")
            assert entry is not None and entry.real_world, scenario.id


def test_personas_vary(scenarios: list[Scenario]) -> None:
    personas = Counter(s.persona for s in scenarios)
    assert len(personas) >= 7
    assert max(personas.values()) / len(scenarios) < 0.3


def test_adversarial_documents_are_all_exercised(scenarios: list[Scenario]) -> None:
    manifest = read_manifest(CORPUS)
    used = {t.ground_truth.doc_id for s in scenarios for t in s.turns if t.ground_truth}
    used |= {d.corpus_doc for s in scenarios for d in s.setup_documents}
    assert {d.id for d in manifest.adversarial_documents} <= used
    assert {d.id for d in manifest.documents} <= used


def test_scenario_text_names_no_real_company(scenarios: list[Scenario]) -> None:
    """Synthetic scenarios talk about the fictional Vellacourt, never a GAIA corpus company."""
    for scenario in scenarios:
        if scenario.category == "real_world":
            continue
        text = normalise(scenario.model_dump_json())
        assert "acme" not in text and "widget pro" not in text, scenario.id



def test_our_files_use_only_declared_keys(scenarios: list[Scenario]) -> None:
    """Unknown keys are kept for GAIA users' files; ours should never need them."""
    for scenario in scenarios:
        assert scenario.extra_keys == {}, scenario.id
        assert all(turn.extra_keys == {} for turn in scenario.turns), scenario.id
        assert all(t.ground_truth is None or t.ground_truth.extra_keys == {}
                   for t in scenario.turns), scenario.id
        assert scenario.agent_type is None, scenario.id  # GAIA 0.25.1 refuses the key
