"""GAIA's fixture staging (FIXTURE-SYNC comments, setup.notes), its newer keys and tags, on our
own GAIA-shaped tree (tests/fixtures/gaia_staged_repo)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from runner.sandbox._fixtures import fixture_archive
from runner.scenarios import (
    declared_folders,
    default_fixtures_root,
    fixture_stagings,
    lacking_reason,
    load_suite,
)
from runner.selftest import selftest_suite

REPO = Path(__file__).parents[1] / "fixtures" / "gaia_staged_repo"
TREE = REPO / "eval" / "scenarios"
FIXTURES = REPO / "tests" / "fixtures" / "gaia"


def _suite():  # type: ignore[no-untyped-def]
    return load_suite([TREE], REPO / "eval" / "corpus")


def _scenario(scenario_id: str):  # type: ignore[no-untyped-def]
    return next(s for s in _suite().scenarios if s.id == scenario_id)


def test_the_header_and_the_notes_name_the_folders_to_stage():
    assert declared_folders(["FIXTURE-SYNC: tests/fixtures/gaia/a/odd/ — three files:"],
                            "odd/ staged at ~/gaia-eval/a/odd/.") == ["a/odd"]
    # A file named in the header stages its folder; a folder inside another is not staged twice.
    assert declared_folders(["FIXTURE-SYNC: tests/fixtures/gaia/a/config/app.ini"],
                            "also ~/gaia-eval/a/config/x and ~/gaia-eval/b/") == ["a/config", "b"]
    assert declared_folders([], "nothing staged") == []
    assert declared_folders(["FIXTURE-SYNC: tests/fixtures/gaia/../etc/"], None) == []


def test_a_gaia_tree_validates_without_warnings_and_keeps_notes_and_expected_behavior():
    suite = _suite()
    assert suite.problems == []
    ledger = _scenario("shelf_read_ledger")
    assert ledger.fixtures == ["shelf_files/ledger"]
    assert ledger.setup.notes == "ledger/ staged at ~/gaia-eval/shelf_files/ledger/."
    truth = ledger.turns[1].ground_truth
    assert truth is not None and truth.expected_behavior and not truth.extra_keys


def test_the_fixture_tree_beside_the_scenarios_is_the_default():
    assert default_fixtures_root([TREE]) == FIXTURES.resolve()
    assert default_fixtures_root([Path("/")]) is None


def test_a_reading_scenario_is_staged_read_only_a_writing_one_writable():
    [ledger], missing = fixture_stagings(_scenario("shelf_read_ledger"), FIXTURES)
    assert missing == [] and ledger.read_only and str(ledger.inside) == "gaia-eval/shelf_files/ledger"
    [settings], _ = fixture_stagings(_scenario("shelf_copy_settings"), FIXTURES)
    assert not settings.read_only
    with tarfile.open(fileobj=io.BytesIO(fixture_archive([ledger, settings]))) as tar:
        modes = {member.name: member.mode for member in tar.getmembers()}
    assert modes["gaia-eval/shelf_files/ledger/pantry count.txt"] == 0o444
    assert modes["gaia-eval/shelf_files/ledger"] == 0o555
    assert modes["gaia-eval/shelf_files/settings/kiln.ini"] == 0o644


def test_a_missing_fixture_folder_is_named_and_no_tree_says_pass_fixtures():
    stagings, missing = fixture_stagings(_scenario("shelf_missing_fixture"), FIXTURES)
    assert stagings == [] and missing == [str(FIXTURES / "shelf_files" / "attic")]
    _, missing = fixture_stagings(_scenario("shelf_read_ledger"), None)
    assert missing == ["tests/fixtures/gaia/shelf_files/ledger/ (no fixture folder: pass --fixtures DIR)"]


def test_live_and_local_blocked_tags_name_what_is_missing():
    live = _scenario("shelf_live_lookup")
    assert live.required_capabilities == {"internet", "embeddings"}
    assert lacking_reason(live, "internet").startswith("tag live: a sandbox has no internet")
    assert lacking_reason(live, "embeddings") == (
        "tag local_blocked_no_embedder: the LLM server serves no embeddings model")


def test_the_selftest_counts_expected_behavior_turns_as_judge_only_with_the_reason():
    suite = _suite()
    report = selftest_suite(suite.scenarios, suite.manifest)
    copy = next(item for item in report.scenarios if item.id == "shelf_copy_settings")
    assert copy.verdict.value == "judge_only"
    assert "expected_behavior" in (copy.turns[0].judge_only_reason or "")
