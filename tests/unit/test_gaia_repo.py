"""A GAIA user's repository (tests/fixtures/gaia_repo, written by us in the shape of GAIA's
0.23-era `eval/` tree) loads as it is: no --corpus needed, GAIA's keys are schema, paths
relative to the repository root and captured absolute paths resolve, the optional
real_world/manifest.json is merged, and documents in no manifest only warn."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest

from runner.scenarios import (
    Level,
    Scenario,
    Suite,
    find_corpus,
    load_suite,
    missing_documents,
    select,
)

REPO = Path(__file__).resolve().parents[1] / "fixtures" / "gaia_repo"
SCENARIOS = REPO / "eval" / "scenarios"
CORPUS = REPO / "eval" / "corpus"
ALL_IDS = [  # sorted by file path
    "empty_minutes_decision", "captured_library_cap", "captured_orchard_crates",
    "library_followup", "harbour_march_catch", "ferry_last_departure",
    "footbridge_load_limit", "harbour_chart_colours"]


@pytest.fixture(scope="module")
def suite() -> Suite:
    return load_suite([SCENARIOS], find_corpus([SCENARIOS]))


def _scenario(suite: Suite, scenario_id: str) -> Scenario:
    return next(s for s in suite.scenarios if s.id == scenario_id)


def _warnings_for(suite: Suite, name: str) -> list[str]:
    return [f"{p.field}: {p.message}" for p in suite.warnings if p.file.name == name]


def test_the_whole_tree_loads_without_errors(suite: Suite) -> None:
    assert [str(p) for p in suite.errors] == []
    assert [s.id for s in suite.scenarios] == ALL_IDS
    assert suite.rejected == []
    assert suite.corpus_root == CORPUS


def test_small_enough_to_run_end_to_end(suite: Suite) -> None:
    assert 6 <= len(suite.scenarios) <= 8
    assert max(len(s.turns) for s in suite.scenarios) <= 3
    documents = [p for p in CORPUS.rglob("*") if p.is_file() and p.name != "manifest.json"]
    assert all(p.stat().st_size < 1024 for p in documents)


@pytest.mark.parametrize("start", [".", "eval", "eval/scenarios/captured",
                                   "eval/corpus/documents", "/"])
def test_validates_without_a_corpus_flag_from_any_directory(
        start: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO / start if start != "/" else "/")
    for given in (SCENARIOS, SCENARIOS / "captured" / "captured_orchard_crates.yaml",
                  Path(os.path.relpath(SCENARIOS / "rag_quality", Path.cwd()))):
        corpus = find_corpus([given])
        assert corpus.samefile(CORPUS), (start, given)
        assert load_suite([given], corpus).ok


def test_the_only_warnings_are_gaia_facts_not_mistakes(suite: Suite) -> None:
    by_file = {p.file.name for p in suite.warnings}
    assert by_file == {"manifest.json", "footbridge_load_limit.yaml"}
    assert _warnings_for(suite, "manifest.json") == [
        "version: unknown key 'version' is ignored"]


def test_real_world_manifest_is_merged(suite: Suite) -> None:
    manifest = suite.manifest
    assert manifest is not None
    assert manifest.source_files == [CORPUS / "manifest.json",
                                     CORPUS / "real_world" / "manifest.json"]
    ferry = manifest.document("ferry_timetable_2025")
    assert ferry is not None and ferry.real_world
    assert ferry.fact("last_island_departure") is not None
    # Named relative to its own manifest's folder, found there.
    assert ferry.locate(CORPUS) == CORPUS / "real_world" / "ferry_timetable_2025.md"
    assert manifest.is_adversarial("empty_minutes")


def test_document_in_no_manifest_warns_once_when_its_file_is_there(suite: Suite) -> None:
    (warning,) = _warnings_for(suite, "footbridge_load_limit.yaml")
    assert warning == (
        "setup.index_documents[0].corpus_doc: document 'bridge_inspection_notes' is in no "
        "corpus manifest; its file real_world/bridge_inspection_notes.md is used as it is, "
        "and its facts cannot be checked")
    scenario = _scenario(suite, "footbridge_load_limit")
    assert missing_documents(scenario, CORPUS) == []


def test_repository_relative_paths_resolve(suite: Suite) -> None:
    document = _scenario(suite, "harbour_march_catch").setup_documents[0]
    assert document.path == "eval/corpus/documents/harbour_catch_log.md"
    assert document.relative_path == PurePosixPath("documents/harbour_catch_log.md")


def test_captured_path_strings_become_setup_documents(suite: Suite) -> None:
    absolute = _scenario(suite, "captured_orchard_crates").setup_documents[0]
    relative = _scenario(suite, "captured_library_cap").setup_documents[0]
    assert absolute.corpus_doc is None and absolute.is_absolute
    assert absolute.path == "/home/dev/gaia/eval/corpus/documents/orchard_sales.csv"
    assert absolute.relative_path == PurePosixPath("documents/orchard_sales.csv")
    assert relative.relative_path == PurePosixPath("documents/library_hours.md")
    assert not relative.is_absolute


def test_gaia_keys_are_typed(suite: Suite) -> None:
    harbour = _scenario(suite, "harbour_march_catch")
    assert harbour.agent_type == "doc"
    assert harbour.expected_behavior == (
        "Answers from the harbour log only, with the figures as written.")
    second = harbour.turns[1]
    assert second.fact_ids == ["quarter_catch", "march_species"]
    assert second.expected_phrases == ["66.1", "mackerel"]
    assert second.expected_behavior == "Gives both facts in one reply without re-asking."
    library = _scenario(suite, "library_followup")
    assert library.setup.memory_clear is True
    assert library.turns[1].persona == "confused_user" and library.turns[0].persona is None
    assert library.turns[1].note is not None and "there" in library.turns[1].note
    captured = _scenario(suite, "captured_orchard_crates")
    assert captured.captured_from == {"session_id": "3b91e07c",
                                      "captured_at": "2025-09-12T16:40:00",
                                      "database": "gaia_chat.db"}
    assert captured.turns[0].expected_tools == ["query_specific_file"]
    assert all(s.extra_keys == {} and all(t.extra_keys == {} for t in s.turns)
               for s in suite.scenarios)


def test_missing_expected_answer_is_not_null(suite: Suite) -> None:
    """Missing: no expected answer given. Null: the agent must say it does not know."""
    absent = _scenario(suite, "library_followup").turns[1].ground_truth
    null = _scenario(suite, "empty_minutes_decision").turns[0].ground_truth
    given = _scenario(suite, "captured_orchard_crates").turns[0].ground_truth
    assert absent is not None and null is not None and given is not None
    assert (absent.has_expected_answer, absent.must_say_unknown) == (False, False)
    assert (null.has_expected_answer, null.must_say_unknown) == (True, True)
    assert (given.has_expected_answer, given.must_say_unknown) == (True, False)
    assert given.expected_answer == 55


def test_turns_without_user_message_keep_the_quoted_question(suite: Suite) -> None:
    turn = _scenario(suite, "harbour_march_catch").turns[0]
    assert turn.user_message is None
    assert turn.objective == "Ask 'What was the harbour's total catch in March?'"
    silent = [t for s in suite.scenarios for t in s.turns if t.user_message is None]
    assert len(silent) >= 8


def test_required_capabilities_from_gaia_tags(suite: Suite) -> None:
    assert _scenario(suite, "harbour_chart_colours").required_capabilities == {"vision"}
    assert _scenario(suite, "harbour_march_catch").required_capabilities == set()
    audio = Scenario.model_validate({
        "id": "a", "category": "c", "persona": "casual_user",
        "tags": ["requires_asr", "requires_vlm", "voice"],
        "turns": [{"turn": 1, "objective": "o", "success_criteria": "s"}]})
    assert audio.required_capabilities == {"audio", "vision"}


def test_selection_by_gaia_category(suite: Suite) -> None:
    chosen = select(suite.scenarios, categories=["real_world"])
    assert [s.id for s in chosen] == ["ferry_last_departure", "footbridge_load_limit"]


def test_real_world_file_missing_is_a_skip_warning(tmp_path: Path) -> None:
    """In a real_world/ folder a missing file skips the scenario, even with no manifest entry."""
    import shutil
    shutil.copytree(REPO, tmp_path / "repo")
    corpus = tmp_path / "repo" / "eval" / "corpus"
    (corpus / "real_world" / "bridge_inspection_notes.md").unlink()
    suite = load_suite([tmp_path / "repo" / "eval" / "scenarios"], corpus)
    assert suite.ok, [str(p) for p in suite.errors]
    (warning,) = [p for p in suite.problems if p.file.name == "footbridge_load_limit.yaml"]
    assert warning.level is Level.WARNING and "SKIPPED_NO_DOCUMENT" in warning.message
    scenario = next(s for s in suite.scenarios if s.id == "footbridge_load_limit")
    assert [d.corpus_doc for d in missing_documents(scenario, corpus)] == [
        "bridge_inspection_notes"]


def test_kept_keys_are_json_safe_whatever_yaml_built(tmp_path: Path) -> None:
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "odd.yaml").write_text(
        "id: odd\ncategory: c\npersona: casual_user\nraw: !!binary /w==\n"
        "seen: 2025-04-02T09:15:00\nlabels: !!set {b, a}\n"
        "captured_from: {captured_at: 2025-04-02}\n"
        "turns: [{turn: 1, objective: o, success_criteria: s}]\n")
    suite = load_suite([tmp_path / "scenarios"], CORPUS)
    (scenario,) = suite.scenarios
    assert scenario.extra_keys == {"raw": "base64:/w==", "seen": "2025-04-02T09:15:00",
                                   "labels": ["a", "b"]}
    assert scenario.captured_from == {"captured_at": "2025-04-02"}
    assert '"raw":"base64:/w=="' in scenario.model_dump_json()
