"""Selection refuses unknown names before anything runs, suggesting the closest real ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.scenarios import Scenario, SelectionError, load_suite, select

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
