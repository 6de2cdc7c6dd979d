"""Where the corpus is when the user did not say (find_corpus), how several manifests merge,
and how GAIA's captured and unlisted documents resolve — each rule with its error path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from runner.scenarios import (
    CorpusNotFound,
    Level,
    Problem,
    Suite,
    corpus_candidates,
    find_corpus,
    load_manifest,
    load_suite,
)

REPO = Path(__file__).resolve().parents[1] / "fixtures" / "gaia_repo"


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


SCENARIO = ("id: s\ncategory: c\npersona: casual_user\n"
            "turns:\n  - {turn: 1, objective: o, success_criteria: s}\n")


# --- find_corpus -------------------------------------------------------------------------

def test_scenarios_folder_sibling_wins(tmp_path: Path) -> None:
    _tree(tmp_path, {"eval/scenarios/rag/s.yaml": SCENARIO, "eval/corpus/manifest.json": "{}",
                     "corpus/manifest.json": "{}"})
    assert find_corpus([tmp_path / "eval/scenarios/rag/s.yaml"]) == tmp_path / "eval/corpus"


def test_a_folder_not_named_scenarios_uses_its_sibling_corpus(tmp_path: Path) -> None:
    _tree(tmp_path, {"suite/my_tests/s.yaml": SCENARIO, "suite/corpus/manifest.json": "{}"})
    assert find_corpus([tmp_path / "suite/my_tests"]) == tmp_path / "suite/corpus"


def test_the_repository_eval_corpus_is_found_from_anywhere_inside(tmp_path: Path) -> None:
    _tree(tmp_path, {"repo/.git/HEAD": "ref", "repo/eval/corpus/manifest.json": "{}",
                     "repo/tests/extra/deep/s.yaml": SCENARIO})
    assert find_corpus([tmp_path / "repo/tests/extra/deep/s.yaml"]) == (
        tmp_path / "repo/eval/corpus")


def test_the_walk_stops_at_the_repository_top(tmp_path: Path) -> None:
    """A corpus above the repository belongs to something else: not used, and said."""
    _tree(tmp_path, {"eval/corpus/manifest.json": "{}", "inner/.git/HEAD": "ref",
                     "inner/suite/s.yaml": SCENARIO})
    with pytest.raises(CorpusNotFound) as caught:
        find_corpus([tmp_path / "inner/suite/s.yaml"])
    message = str(caught.value)
    assert isinstance(caught.value, Exception)
    for place in corpus_candidates([tmp_path / "inner/suite/s.yaml"]):
        assert f"  {place}\n" in message
    assert str(tmp_path / "inner/eval/corpus") in message
    assert str(tmp_path / "eval/corpus") not in message
    assert message.endswith("--corpus DIR")


def test_no_corpus_anywhere_lists_every_place_and_the_fix(tmp_path: Path) -> None:
    _tree(tmp_path, {"a/scenarios/x/s.yaml": SCENARIO, "b/s.yaml": SCENARIO})
    paths = [tmp_path / "a/scenarios/x/s.yaml", tmp_path / "b"]
    with pytest.raises(CorpusNotFound) as caught:
        find_corpus(paths)
    places = corpus_candidates(paths)
    assert places[:2] == [tmp_path / "a/corpus", tmp_path / "a/scenarios/x/corpus"]
    assert all(str(place) in str(caught.value) for place in places)
    assert "give the folder that holds the documents and manifest.json with --corpus DIR" in (
        str(caught.value))


def test_no_path_given_is_refused() -> None:
    with pytest.raises(CorpusNotFound, match="--corpus DIR"):
        find_corpus([])


# --- several manifests -------------------------------------------------------------------

def _corpus_with(tmp_path: Path, sub: dict[str, object]) -> Path:
    corpus = tmp_path / "corpus"
    shutil.copytree(REPO / "eval" / "corpus", corpus)
    (corpus / "real_world" / "manifest.json").write_text(json.dumps(sub, indent=2))
    return corpus


def _root_entry(corpus: Path, doc_id: str) -> dict[str, object]:
    data = json.loads((corpus / "manifest.json").read_text())
    entry: dict[str, object] = next(d for d in data["documents"] if d["id"] == doc_id)
    return entry


def test_the_same_document_in_two_manifests_is_fine(tmp_path: Path) -> None:
    corpus = _corpus_with(tmp_path, {})
    entry = _root_entry(corpus, "library_hours")
    (corpus / "real_world" / "manifest.json").write_text(json.dumps({"documents": [entry]}))
    manifest, problems = load_manifest(corpus)
    assert [p for p in problems if p.is_error] == []
    assert manifest is not None and manifest.document_ids.count("library_hours") == 1


def test_two_manifests_that_disagree_name_both_files_and_the_id(tmp_path: Path) -> None:
    corpus = _corpus_with(tmp_path, {})
    entry = dict(_root_entry(corpus, "library_hours"), domain="education")
    (corpus / "real_world" / "manifest.json").write_text(
        json.dumps({"documents": [entry]}, indent=2))
    _, problems = load_manifest(corpus)
    (error,) = [p for p in problems if p.is_error]
    assert error.file == corpus / "real_world" / "manifest.json"
    assert (error.line, error.field) == (4, "documents[0].id")
    assert error.message == (f"document id 'library_hours' is also listed in "
                             f"{corpus / 'manifest.json'} with different contents")
    assert error.fix


def test_a_broken_sub_manifest_is_reported_and_the_root_still_loads(tmp_path: Path) -> None:
    corpus = _corpus_with(tmp_path, {})
    (corpus / "real_world" / "manifest.json").write_text('{"documents": [}')
    manifest, problems = load_manifest(corpus)
    assert manifest is not None and manifest.document("harbour_catch_log") is not None
    assert [(p.file.name, p.line) for p in problems if p.is_error] == [("manifest.json", 1)]
    assert problems[-1].file == corpus / "real_world" / "manifest.json"


def test_a_missing_root_manifest_is_an_error_even_with_sub_manifests(tmp_path: Path) -> None:
    corpus = _corpus_with(tmp_path, {"documents": []})
    (corpus / "manifest.json").unlink()
    manifest, problems = load_manifest(corpus)
    assert manifest is not None  # the sub-manifest still counts
    (error,) = [p for p in problems if p.is_error]
    assert error.message == "corpus manifest not found" and "--corpus DIR" in error.fix


def test_a_real_world_manifest_file_that_is_not_there_is_no_error(tmp_path: Path) -> None:
    """GAIA's real_world documents are not committed; its manifest lists them anyway."""
    corpus = _corpus_with(tmp_path, {"documents": [
        {"id": "city_budget", "filename": "city_budget.pdf", "facts": []}]})
    _, problems = load_manifest(corpus)
    assert [p for p in problems if p.is_error] == []


def test_a_sub_manifest_file_that_is_nowhere_is_an_error(tmp_path: Path) -> None:
    corpus = _corpus_with(tmp_path, {})
    (corpus / "extra").mkdir()
    (corpus / "extra" / "manifest.json").write_text(json.dumps({"documents": [
        {"id": "gone", "filename": "gone.md", "facts": []}]}))
    _, problems = load_manifest(corpus)
    (error,) = [p for p in problems if p.is_error]
    assert (error.file, error.field) == (corpus / "extra" / "manifest.json",
                                         "documents[0].filename")
    assert f"(looked in ., documents/, adversarial/ and {corpus / 'extra'})" in error.message


# --- captured paths and unlisted documents ------------------------------------------------

def _load_one(tmp_path: Path, setup: str, turn: str = "success_criteria: s") -> Suite:
    corpus = tmp_path / "eval" / "corpus"
    if not corpus.exists():
        shutil.copytree(REPO / "eval" / "corpus", corpus)
    _tree(tmp_path, {"eval/scenarios/captured/s.yaml":
                     f"id: s\ncategory: captured\npersona: casual_user\nsetup:\n"
                     f"  index_documents:\n{setup}turns:\n  - turn: 1\n    objective: o\n"
                     f"    {turn}\n"})
    return load_suite([tmp_path / "eval" / "scenarios"], corpus)


def _problems(suite: Suite) -> list[Problem]:
    return [p for p in suite.problems if p.file.name == "s.yaml"]


def test_windows_path_with_an_eval_corpus_segment_resolves_silently(tmp_path: Path) -> None:
    suite = _load_one(
        tmp_path, "    - 'C:\\Users\\dev\\gaia\\eval\\corpus\\documents\\library_hours.md'\n")
    assert _problems(suite) == []
    assert str(suite.scenarios[0].setup_documents[0].relative_path) == "documents/library_hours.md"


def test_absolute_path_elsewhere_is_matched_by_file_name_with_a_warning(tmp_path: Path) -> None:
    suite = _load_one(tmp_path, "    - 'C:\\Users\\dev\\Downloads\\orchard_sales.csv'\n")
    (warning,) = _problems(suite)
    assert warning.level is Level.WARNING and warning.line == 6
    assert "using the corpus file of the same name, documents/orchard_sales.csv" in warning.message
    assert warning.fix == "write `path: documents/orchard_sales.csv` (relative to the corpus root)"
    assert str(suite.scenarios[0].setup_documents[0].relative_path) == "documents/orchard_sales.csv"


def test_several_files_of_that_name_are_listed(tmp_path: Path) -> None:
    corpus = tmp_path / "eval" / "corpus"
    shutil.copytree(REPO / "eval" / "corpus", corpus)
    shutil.copy(corpus / "documents" / "library_hours.md", corpus / "adversarial")
    suite = _load_one(tmp_path, "    - /mnt/share/library_hours.md\n")
    (warning,) = _problems(suite)
    assert "adversarial/library_hours.md (also found: documents/library_hours.md)" in (
        warning.message)


def test_absolute_path_found_nowhere_is_a_missing_document(tmp_path: Path) -> None:
    suite = _load_one(tmp_path, "    - /home/dev/Downloads/library_hour.md\n")
    (error,) = _problems(suite)
    assert error.is_error and error.field == "setup.index_documents[0].path"
    assert error.message.startswith("document '/home/dev/Downloads/library_hour.md' not found")
    assert error.fix == "did you mean 'documents/library_hours.md'?"
    assert [r.id for r in suite.rejected] == ["s"]


def test_a_relative_path_string_that_is_missing_is_the_usual_error(tmp_path: Path) -> None:
    suite = _load_one(tmp_path, "    - eval/corpus/documents/nothing_here.md\n")
    (error,) = _problems(suite)
    assert error.is_error and "not found under" in error.message


def test_ground_truth_document_found_only_by_file_name_warns(tmp_path: Path) -> None:
    suite = _load_one(tmp_path, "    []\n", "ground_truth: {doc_id: bridge_inspection_notes, "
                                           "expected_answer: 12 people}")
    (warning,) = _problems(suite)
    assert warning.level is Level.WARNING and warning.field == "turns[0].ground_truth.doc_id"
    assert "its file real_world/bridge_inspection_notes.md is used as it is" in warning.message


def test_ground_truth_document_found_nowhere_is_an_error(tmp_path: Path) -> None:
    suite = _load_one(tmp_path, "    []\n", "ground_truth: {doc_id: library_hour, "
                                           "expected_answer: x}")
    (error,) = _problems(suite)
    assert error.is_error and "(did you mean 'library_hours'?)" in error.message


def test_unlisted_setup_document_whose_file_is_missing_is_one_error(tmp_path: Path) -> None:
    suite = _load_one(
        tmp_path, "    - {corpus_doc: town_plan, path: eval/corpus/documents/town_plan.md}\n",
        "ground_truth: {doc_id: town_plan, expected_answer: x}")
    (error,) = _problems(suite)
    assert error.is_error and error.field == "setup.index_documents[0].path"


def test_a_known_file_under_another_id_is_an_error_naming_the_id(tmp_path: Path) -> None:
    suite = _load_one(
        tmp_path, "    - {corpus_doc: library, path: eval/corpus/documents/library_hours.md}\n")
    (error,) = _problems(suite)
    assert error.is_error and error.fix == "write `corpus_doc: library_hours`"
