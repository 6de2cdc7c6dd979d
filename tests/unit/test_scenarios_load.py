"""A GAIA-format tree (several categories, keys our models do not know) loads with warnings
only; the models keep what the engine, judge and report need."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runner.scenarios import (
    AnswerNumber,
    GroundTruth,
    Level,
    Scenario,
    Severity,
    Suite,
    ToolCalled,
    default_timeout_s,
    load_suite,
    missing_documents,
)

FIXTURES = Path(__file__).parents[1] / "fixtures"
GAIA_TREE = FIXTURES / "gaia_tree"


@pytest.fixture(scope="module")
def suite() -> Suite:
    return load_suite([GAIA_TREE / "scenarios"], GAIA_TREE / "corpus")


def _scenario(suite: Suite, scenario_id: str) -> Scenario:
    return next(s for s in suite.scenarios if s.id == scenario_id)


def test_gaia_tree_loads_with_warnings_only(suite: Suite) -> None:
    assert suite.ok, [str(p) for p in suite.errors]
    assert [s.id for s in suite.scenarios] == [  # sorted by file path: stable order
        "blank_notes_unknown", "captured_greenhouse_noon", "cycling_club_followup",
        "cheerful_bakery_tone", "bakery_flour_stock", "riverton_parks_budget"]
    assert {s.category for s in suite.scenarios} == {
        "adversarial", "captured", "context_retention", "personality", "rag_quality",
        "real_world"}


def test_unknown_keys_warn_with_their_line(suite: Suite) -> None:
    warned = {(p.file.name, p.line, p.field) for p in suite.warnings
              if p.message.startswith("unknown key")}
    assert ("bakery_flour_stock.yaml", 9, "min_context_window") in warned
    assert ("bakery_flour_stock.yaml", 34, "turns[1].ground_truth.source_page") in warned
    assert ("captured_greenhouse_noon.yaml", 24, "turns[0].agent_steps") in warned
    assert ("cycling_club_followup.yaml", 27, "turns[2].judge_hint") in warned
    assert ("manifest.json", 2, "version") in warned


def test_gaia_keys_are_schema_not_unknown_keys(suite: Suite) -> None:
    captured = _scenario(suite, "captured_greenhouse_noon")
    assert captured.captured_from == {"session_id": "7f3c2a", "captured_at": "2025-04-02T09:15:00"}
    assert not any(p.field == "captured_from" for p in suite.problems)


def test_unknown_keys_are_kept_verbatim_for_the_judge(suite: Suite) -> None:
    bakery = _scenario(suite, "bakery_flour_stock")
    assert bakery.extra_keys == {"min_context_window": 8192}
    truth = bakery.turns[1].ground_truth
    assert truth is not None and truth.extra_keys == {"source_page": 1}
    assert _scenario(suite, "captured_greenhouse_noon").turns[0].extra_keys == {"agent_steps": 3}
    (warning,) = [p for p in suite.warnings if p.field == "min_context_window"]
    assert "is kept as written and given to the judge" in warning.message


def test_unknown_persona_is_a_warning_naming_it(suite: Suite) -> None:
    (problem,) = [p for p in suite.warnings if p.field == "persona"]
    assert problem.level is Level.WARNING
    assert "'retired_teacher'" in problem.message
    assert _scenario(suite, "cheerful_bakery_tone").persona == "retired_teacher"


def test_misspelt_key_warning_suggests_the_known_key(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(
        "id: typo\ncategory: c\npersona: casual_user\nturns:\n"
        "  - turn: 1\n    objective: Ask.\n    success_critera: Answers.\n")
    suite = load_suite([tmp_path / "s.yaml"], GAIA_TREE / "corpus")
    messages = [str(p) for p in suite.problems if p.file.name == "s.yaml"]
    assert any(":7: turns[0].success_critera: unknown key 'success_critera' (did you mean "
               "'success_criteria'?)" in m for m in messages)
    # ...and the turn then lacks its criteria, which is the real error.
    assert any("neither ground_truth nor success_criteria" in m for m in messages)


def test_real_world_document_missing_is_a_warning_and_a_skip(suite: Suite) -> None:
    scenario = _scenario(suite, "riverton_parks_budget")
    (problem,) = [p for p in suite.problems if p.file.name == "riverton_parks_budget.yaml"]
    assert problem.level is Level.WARNING and "SKIPPED_NO_DOCUMENT" in problem.message
    assert [d.corpus_doc for d in missing_documents(scenario, GAIA_TREE / "corpus")] == [
        "riverton_city_budget_2025"]
    assert missing_documents(_scenario(suite, "bakery_flour_stock"), GAIA_TREE / "corpus") == []


def test_category_folder_mismatch_warns(tmp_path: Path) -> None:
    shutil.copytree(GAIA_TREE / "scenarios" / "adversarial", tmp_path / "scenarios" / "memory")
    suite = load_suite([tmp_path / "scenarios"], GAIA_TREE / "corpus")
    (problem,) = [p for p in suite.problems if p.field == "category"]
    assert problem.level is Level.WARNING
    assert "does not match its folder scenarios/memory/" in problem.message
    assert len(suite.scenarios) == 1


def test_gaia_repository_paths_and_corpus_paths_both_resolve(suite: Suite) -> None:
    gaia_style = _scenario(suite, "bakery_flour_stock").setup_documents[0]
    ours = _scenario(suite, "cheerful_bakery_tone").setup_documents[0]
    assert gaia_style.path.startswith("eval/corpus/")
    assert str(gaia_style.relative_path) == str(ours.relative_path) == (
        "documents/harbor_bakery_inventory.md")


def test_claims_given_as_bare_strings_are_named_by_position(suite: Suite) -> None:
    claims = _scenario(suite, "cheerful_bakery_tone").turns[0].claims
    assert [(c.name, c.claim) for c in claims] == [
        ("claim_1", "There are 310 kg of rye flour in stock."),
        ("tone", "The reply is polite.")]


def test_null_expected_answer_means_must_say_unknown(suite: Suite) -> None:
    blank = _scenario(suite, "blank_notes_unknown").turns[0].ground_truth
    numeric = _scenario(suite, "cycling_club_followup").turns[2].ground_truth
    no_answer_given = GroundTruth.model_validate({"doc_id": "d", "fact_id": "f"})
    assert blank is not None and blank.must_say_unknown
    assert numeric is not None and numeric.expected_answer == 312
    assert not numeric.must_say_unknown
    # The key is absent: no expected answer is given, which is not "must say unknown".
    assert no_answer_given.expected_answer is None and not no_answer_given.must_say_unknown


def test_checks_are_typed_models(suite: Suite) -> None:
    scenario = _scenario(suite, "bakery_flour_stock")
    first, second = scenario.turns[0].checks
    assert isinstance(first, ToolCalled) and first.tool == "query_documents"
    assert isinstance(second, AnswerNumber) and (second.value, second.tolerance) == (1240, 0.01)
    assert [c.type for c in scenario.checks] == ["documents_indexed", "tool_not_called"]


def test_source_file_and_lines_are_kept(suite: Suite) -> None:
    scenario = _scenario(suite, "bakery_flour_stock")
    assert scenario.source_file == GAIA_TREE / "scenarios/rag_quality/bakery_flour_stock.yaml"
    assert scenario.line_of("turns", 1, "objective") == 29
    assert scenario.line_of("turns", 1, "no_such_key") == 28  # falls back to the turn


def test_defaults_for_optional_gaia_keys(suite: Suite) -> None:
    scenario = _scenario(suite, "cycling_club_followup")
    assert scenario.severity is Severity.MEDIUM
    assert scenario.tags == [] and scenario.checks == [] and scenario.timeout is None
    assert _scenario(suite, "cheerful_bakery_tone").title == (
        "Friendly tone with a retired customer")


def test_manifest_is_loaded_with_adversarial_documents(suite: Suite) -> None:
    manifest = suite.manifest
    assert manifest is not None
    assert manifest.is_adversarial("blank_meeting_notes")
    assert not manifest.is_adversarial("harbor_bakery_inventory")
    bakery = manifest.document("harbor_bakery_inventory")
    assert bakery is not None
    fact = bakery.fact("cooler_repair_cost")
    assert fact is not None and fact.answer is None
    assert bakery.locate(GAIA_TREE / "corpus") == (
        GAIA_TREE / "corpus/documents/harbor_bakery_inventory.md")


@pytest.mark.parametrize(("docs", "turns", "timeout", "expected"), [
    (0, 1, None, 900),        # base wins
    (1, 3, None, 930),        # 240 + 90 + 600
    (10, 40, None, 7200),     # capped at two hours
    (1, 1, 600, 600),         # the scenario's own timeout wins
])
def test_default_timeout_follows_gaia(docs: int, turns: int, timeout: int | None,
                                      expected: int) -> None:
    scenario = Scenario.model_validate({
        "id": "t", "category": "c", "persona": "casual_user", "timeout": timeout,
        "setup": {"index_documents": [{"path": f"d{i}.md"} for i in range(docs)]},
        "turns": [{"turn": n, "objective": "o", "success_criteria": "s"}
                  for n in range(1, turns + 1)]})
    assert default_timeout_s(scenario) == expected


def test_overlapping_trees_load_each_file_once() -> None:
    suite = load_suite([GAIA_TREE / "scenarios", GAIA_TREE / "scenarios" / "captured",
                        GAIA_TREE / "scenarios" / "captured" / "captured_greenhouse_noon.yaml"],
                       GAIA_TREE / "corpus")
    assert suite.ok
    assert len(suite.scenarios) == 6


def test_hidden_folders_are_not_scanned(tmp_path: Path) -> None:
    shutil.copytree(GAIA_TREE / "scenarios" / "captured", tmp_path / "s" / "captured")
    shutil.copytree(GAIA_TREE / "scenarios" / "adversarial", tmp_path / "s" / ".backup")
    suite = load_suite([tmp_path / "s"], GAIA_TREE / "corpus")
    assert [s.id for s in suite.scenarios] == ["captured_greenhouse_noon"]


def test_json_schema_can_be_exported() -> None:
    schema = Scenario.model_json_schema()
    assert {"id", "category", "persona", "turns"} <= set(schema["required"])
    assert "_source" not in schema["properties"]


def test_yaml_documents_inside_the_corpus_are_not_scenarios(tmp_path: Path) -> None:
    shutil.copytree(GAIA_TREE, tmp_path / "eval")
    (tmp_path / "eval" / "corpus" / "documents" / "pipeline_config.yaml").write_text(
        "stages: [build, test]\n")
    suite = load_suite([tmp_path / "eval"], tmp_path / "eval" / "corpus")
    assert suite.ok, [str(p) for p in suite.errors]
    assert len(suite.scenarios) == 6
