"""Every malformed scenario or manifest gives one clear `file:line: field:` problem, and the
good files next to it still load."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from runner.scenarios import Level, Problem, Suite, load_manifest, load_suite

FIXTURES = Path(__file__).parents[1] / "fixtures"

# file name -> (line, field, words the message or fix must contain)
EXPECTED: dict[str, tuple[int | None, str, str]] = {
    "absolute_path.yaml": (6, "setup.index_documents[0].path",
                           "looked for by its file name, 'passwd'"),
    "answer_check_scenario_level.yaml": (7, "checks[0].type", "cannot be scenario-level"),
    "bad_check_type.yaml": (9, "turns[0].checks[0]",
                            "unknown check type 'tool_caled' (did you mean 'tool_called'?)"),
    "bad_severity.yaml": (3, "severity", "got 'urgent'"),
    "binary.yaml": (None, "", "not UTF-8 text"),
    "check_bad_regex.yaml": (12, "turns[0].checks[0].arguments.filepath.matches",
                             "invalid regular expression 'budget(2026'"),
    "check_missing_type.yaml": (9, "turns[0].checks[0]", "check has no 'type'"),
    "check_negative_max.yaml": (9, "turns[0].checks[0].max", "greater than or equal to 0"),
    "check_unknown_key.yaml": (11, "turns[0].checks[0].tolerence",
                               "unknown key 'tolerence' in a check (did you mean 'tolerance'?)"),
    "documents_indexed_in_turn.yaml": (9, "turns[0].checks[0].type", "scenario-level check"),
    "dotdot_path.yaml": (6, "setup.index_documents[0].path", "goes up with '..'"),
    "dup_id_second.yaml": (2, "id", "already used by"),
    "duplicate_claim_names.yaml": (10, "turns[0].claims[1]", "claim name 'stock' is used twice"),
    "duplicate_key.yaml": (6, "turns", "duplicate key 'turns' (first written at line 4)"),
    "duplicate_turn_numbers.yaml": (8, "turns[1].turn", "turn numbered 1 where 2 was expected"),
    "empty.yaml": (None, "", "file is empty"),
    "empty_turns.yaml": (4, "turns", "at least 1 item"),
    "fact_without_doc.yaml": (8, "turns[0].ground_truth.fact_id", "without a doc_id"),
    "ground_truth_text.yaml": (7, "turns[0].ground_truth", "should be a mapping"),
    "huge.yaml": (None, "", "files over 256 KiB (262,144 bytes) are refused"),
    "id_not_snake_case.yaml": (1, "id", "`id: budget_lookup`"),
    "missing_document.yaml": (7, "setup.index_documents[0].path",
                              "did you mean 'documents/harbor_bakery_inventory.md'?"),
    "missing_objective.yaml": (5, "turns[0].objective", "required key 'objective' is missing"),
    "missing_persona.yaml": (1, "persona", "required key 'persona' is missing"),
    "missing_turns.yaml": (1, "turns", "required key 'turns' is missing"),
    "multiple_documents.yaml": (5, "", "expected a single document"),
    "negative_timeout.yaml": (4, "timeout", "greater than 0"),
    "no_truth_no_criteria.yaml": (5, "turns[0]", "neither ground_truth nor success_criteria"),
    "only_comments.yaml": (None, "", "holds no YAML document"),
    "success_criteria_dict.yaml": (7, "turns[0].success_criteria", "a valid string"),
    "symlink_path.yaml": (6, "setup.index_documents[0].path",
                          "is a symlink and leaves the corpus root"),
    "tags_not_list.yaml": (4, "tags", "a valid list"),
    "top_level_list.yaml": (1, "", "top level is a list, not a mapping"),
    "turn_number_text.yaml": (5, "turns[0].turn", "a valid integer"),
    "too_many_turns.yaml": (4, "turns", "at most 1000 items"),
    "turns_out_of_order.yaml": (8, "turns[1].turn", "turn numbered 3 where 2 was expected"),
    "unknown_doc_id.yaml": (8, "turns[0].ground_truth.doc_id",
                            "(did you mean 'harbor_bakery_inventory'?)"),
    "unknown_fact_id.yaml": (9, "turns[0].ground_truth.fact_id",
                             "(did you mean 'bread_flour_stock'?)"),
    "unknown_setup_doc.yaml": (6, "setup.index_documents[0].corpus_doc",
                               "not in the corpus manifest"),
    "yaml_syntax_error.yaml": (8, "", "quoted scalar (begun at line 6)"),
}
GOOD_IDS = ["shared_id", "good_flour"]  # dup_id_first.yaml sorts before good_flour.yaml


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The malformed tree plus the cases made here, not kept in git: a huge file, 1001 turns, a
    symlink leaving the corpus."""
    root = tmp_path_factory.mktemp("malformed")
    shutil.copytree(FIXTURES / "malformed_tree" / "scenarios", root / "scenarios")
    shutil.copytree(FIXTURES / "gaia_tree" / "corpus", root / "corpus")
    (root / "scenarios" / "huge.yaml").write_text("id: huge\n" + "# padding\n" * 120_000)
    # More turns than a trace may hold (a run of it could not be read back): 1001, 45 KB.
    (root / "scenarios" / "too_many_turns.yaml").write_text(
        "id: too_many_turns\ncategory: rag_quality\npersona: casual_user\nturns:\n" + "".join(
            f"  - {{turn: {n}, objective: Ask again., success_criteria: It answers.}}\n"
            for n in range(1, 1002)))
    (root / "outside_secret.md").write_text("not part of the corpus")
    os.symlink(root / "outside_secret.md", root / "corpus" / "documents" / "escape_link.md")
    return root


@pytest.fixture(scope="module")
def suite(tree: Path) -> Suite:
    return load_suite([tree / "scenarios"], tree / "corpus")


def _errors_for(suite: Suite, name: str) -> list[Problem]:
    return [p for p in suite.errors if p.file.name == name]


def test_every_bad_file_in_the_tree_is_covered(tree: Path) -> None:
    bad = {p.name for p in (tree / "scenarios").iterdir()} - {
        "good_flour.yaml", "dup_id_first.yaml"}
    assert bad == set(EXPECTED)
    assert len(EXPECTED) >= 25


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_file_gives_one_problem_naming_file_line_and_field(suite: Suite, name: str) -> None:
    line, field, words = EXPECTED[name]
    errors = _errors_for(suite, name)
    assert len(errors) == 1, [str(p) for p in errors]
    problem = errors[0]
    assert (problem.line, problem.field) == (line, field)
    assert words in f"{problem.message} — {problem.fix}"
    assert problem.fix, "every problem says how to fix it"
    location = f"{problem.file}:{line}:" if line is not None else f"{problem.file}:"
    prefix = f"{location} {field}:" if field else location
    assert str(problem).startswith(prefix)


def test_good_files_still_load_beside_the_bad_ones(suite: Suite) -> None:
    assert [s.id for s in suite.scenarios] == GOOD_IDS
    assert not suite.ok


def test_duplicate_id_names_both_files(suite: Suite) -> None:
    (problem,) = _errors_for(suite, "dup_id_second.yaml")
    assert "dup_id_first.yaml:1" in problem.message


def test_scenario_paths_that_do_not_exist_are_reported(tmp_path: Path) -> None:
    suite = load_suite([tmp_path / "nowhere"], FIXTURES / "gaia_tree" / "corpus")
    assert [p.message for p in suite.errors] == ["no such file or folder"]


def test_corpus_without_manifest_is_an_error(tmp_path: Path) -> None:
    suite = load_suite([FIXTURES / "gaia_tree" / "scenarios"], tmp_path)
    assert any("corpus manifest not found" in p.message for p in suite.errors)


# --- manifests ---------------------------------------------------------------------------

def _manifest_problems(name: str) -> list[str]:
    _, problems = load_manifest(FIXTURES / "manifests" / name)
    return [str(p).split(str(FIXTURES / "manifests" / name) + "/", 1)[1] for p in problems]


def test_manifest_rules_each_name_line_and_field() -> None:
    manifest, problems = load_manifest(FIXTURES / "manifests" / "rules")
    assert manifest is not None  # rule problems do not stop it loading
    found = {(p.line, p.field): p.message for p in problems}
    assert "fact id 'one' is used twice" in found[(9, "documents[0].facts[1].id")]
    assert "has changed since the manifest was written" in found[(6, "documents[0].sha256")]
    assert "document id 'present' is used twice (first at line 4)" in found[
        (13, "documents[1].id")]
    assert "file 'gone.md' not found" in found[(18, "documents[2].filename")]
    assert "leaves the corpus root" in found[(22, "documents[3].filename")]
    assert "duplicate key 'format'" in found[(29, "documents[4].format")]
    assert len(problems) == 6, "a missing real-world file is not a problem"
    assert all(p.level is Level.ERROR for p in problems)


def test_manifest_json_syntax_error_names_the_line() -> None:
    assert _manifest_problems("syntax") == [
        ("manifest.json:4: JSON syntax error: Expecting ',' delimiter — "
         "fix the JSON syntax (commas, quotes, brackets)")]


def test_manifest_wrong_types_name_each_field() -> None:
    manifest, problems = load_manifest(FIXTURES / "manifests" / "types")
    assert manifest is None
    assert [(p.line, p.field) for p in problems] == [
        (4, "documents[0].facts[0].id"), (5, "documents[1].real_world")]
    assert "required key 'id' is missing" in problems[0].message
    assert "true or false" in problems[1].fix


def test_manifest_that_is_not_an_object() -> None:
    assert _manifest_problems("not_object")[0].startswith(
        "manifest.json:1: top level is not an object")
