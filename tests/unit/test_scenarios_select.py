"""Selection refuses unknown names before anything runs, suggesting the closest real ones."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runner.scenarios import (
    Problem,
    Scenario,
    SelectionError,
    Suite,
    load_suite,
    rejected_in_selection,
    select,
)

GAIA_TREE = Path(__file__).parents[1] / "fixtures" / "gaia_tree"


@pytest.fixture(scope="module")
def scenarios() -> list[Scenario]:
    suite = load_suite([GAIA_TREE / "scenarios"], GAIA_TREE / "corpus")
    assert suite.ok
    return suite.scenarios


def _ids(chosen: list[Scenario]) -> list[str]:
    return [s.id for s in chosen]


def test_no_filter_selects_everything_in_suite_order(scenarios: list[Scenario]) -> None:
    assert _ids(select(scenarios)) == _ids(scenarios)


def test_ids_keep_suite_order_not_argument_order(scenarios: list[Scenario]) -> None:
    chosen = select(scenarios, ids=["bakery_flour_stock", "blank_notes_unknown"])
    assert _ids(chosen) == ["blank_notes_unknown", "bakery_flour_stock"]


def test_id_patterns(scenarios: list[Scenario]) -> None:
    assert _ids(select(scenarios, ids=["ba*"])) == ["bakery_flour_stock"]


def test_category_and_tags_combine(scenarios: list[Scenario]) -> None:
    assert _ids(select(scenarios, categories=["rag_quality", "captured"])) == [
        "captured_greenhouse_noon", "bakery_flour_stock"]
    assert _ids(select(scenarios, tags=["numbers"])) == ["bakery_flour_stock"]
    rest = select(scenarios, exclude_tags=["rag"])
    assert "bakery_flour_stock" not in _ids(rest) and len(rest) == len(scenarios) - 1


def test_unknown_id_suggests_close_matches(scenarios: list[Scenario]) -> None:
    with pytest.raises(SelectionError) as caught:
        select(scenarios, ids=["bakery_flour_stok"])
    assert str(caught.value) == (
        "unknown scenario id 'bakery_flour_stok' — did you mean 'bakery_flour_stock'?")


def test_every_unknown_name_is_reported_in_caller_order(scenarios: list[Scenario]) -> None:
    with pytest.raises(SelectionError) as caught:
        select(scenarios, ids=["cycling_club_folowup"], categories=["rag_qualty"],
               tags=["numbrs"], exclude_tags=["zzz"])
    lines = str(caught.value).splitlines()
    assert lines[0] == ("unknown scenario id 'cycling_club_folowup' — "
                        "did you mean 'cycling_club_followup'?")
    assert lines[1].startswith("unknown category 'rag_qualty' — did you mean 'rag_quality'")
    assert lines[2].startswith("unknown tag 'numbrs' — did you mean 'numbers'")
    assert lines[3] == "unknown excluded tag 'zzz' — known: numbers, rag"


def test_filters_that_exclude_everything_are_an_error(scenarios: list[Scenario]) -> None:
    with pytest.raises(SelectionError, match="no scenario matches all the filters"):
        select(scenarios, categories=["captured"], tags=["rag"])


def test_empty_filter_lists_mean_no_filter(scenarios: list[Scenario]) -> None:
    assert len(select(scenarios, ids=[], categories=[])) == len(scenarios)


# --- rejected files and the selection -----------------------------------------------------

@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    """The GAIA-format tree plus three files that cannot be used."""
    root = tmp_path_factory.mktemp("mixed")
    shutil.copytree(GAIA_TREE / "scenarios", root / "scenarios")
    (root / "scenarios" / "rag_quality" / "broken_syntax.yaml").write_text(
        "id: broken\ncategory: rag_quality\ntags: [numbers\n")
    (root / "scenarios" / "captured" / "bad_turns.yaml").write_text(
        "id: captured_bad\ncategory: captured\npersona: casual_user\ntags: [rag, replay]\n"
        "turns: not a list\n")
    (root / "scenarios" / "personality" / "zz_duplicate.yaml").write_text(
        "id: cheerful_bakery_tone\ncategory: personality\npersona: casual_user\n"
        "turns:\n  - {turn: 1, objective: o, success_criteria: s}\n")
    return load_suite([root / "scenarios"], GAIA_TREE / "corpus")


def _files(problems: list[Problem]) -> list[str]:
    return sorted({p.file.name for p in problems})


def test_rejected_files_carry_best_guesses(mixed: Suite) -> None:
    assert [(r.file.name, r.id, r.category, r.tags) for r in mixed.rejected] == [
        ("bad_turns.yaml", "captured_bad", "captured", ["rag", "replay"]),
        ("zz_duplicate.yaml", "cheerful_bakery_tone", "personality", []),
        ("broken_syntax.yaml", "broken_syntax", "rag_quality", None),  # stem, folder
    ]
    assert all(r.problems and all(p.is_error for p in r.problems) for r in mixed.rejected)
    assert len(mixed.scenarios) == 6  # the usable ones still load
    assert mixed.tree_errors == []


def test_no_filter_includes_every_rejected_file(mixed: Suite) -> None:
    assert _files(rejected_in_selection(mixed)) == [
        "bad_turns.yaml", "broken_syntax.yaml", "zz_duplicate.yaml"]


def test_a_selection_elsewhere_is_not_blocked(mixed: Suite) -> None:
    assert rejected_in_selection(mixed, categories=["adversarial"]) == []
    assert rejected_in_selection(mixed, ids=["bakery_flour_stock"]) == []


def test_ids_match_the_written_id_or_the_file_stem(mixed: Suite) -> None:
    assert _files(rejected_in_selection(mixed, ids=["captured_bad"])) == ["bad_turns.yaml"]
    assert _files(rejected_in_selection(mixed, ids=["bad_turns"])) == ["bad_turns.yaml"]
    assert _files(rejected_in_selection(mixed, ids=["broken_*"])) == ["broken_syntax.yaml"]
    assert _files(rejected_in_selection(mixed, ids=["cheerful_bakery_tone"])) == [
        "zz_duplicate.yaml"]


def test_unreadable_tags_count_as_matching(mixed: Suite) -> None:
    assert _files(rejected_in_selection(mixed, tags=["numbers"])) == ["broken_syntax.yaml"]
    assert _files(rejected_in_selection(mixed, tags=["replay"])) == [
        "bad_turns.yaml", "broken_syntax.yaml"]
    assert _files(rejected_in_selection(mixed, categories=["captured"],
                                        exclude_tags=["replay"])) == []


def test_tree_errors_are_the_ones_no_selection_avoids(tmp_path: Path) -> None:
    suite = load_suite([GAIA_TREE / "scenarios", tmp_path / "missing"], tmp_path)
    assert {p.message for p in suite.tree_errors} == {"corpus manifest not found",
                                                      "no such file or folder"}
