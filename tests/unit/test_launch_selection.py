"""Selection before validation: a broken file blocks only itself, unless --strict.

The tree is a copy of our GAIA-format fixture repository with one scenario file broken the way
hand edits break files (a turn without an objective).
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runner.report import RunConfig, Scorecard, build_scorecard
from runner.run.errors import EXIT_INFRA, EXIT_OK, EXIT_USAGE, UsageError
from runner.run.gate import exit_code
from runner.run.prepare import REJECTED_WARNING, selected_scenarios
from runner.run.settings import RunSettings, Selection

REPO = Path(__file__).parents[1] / "fixtures" / "gaia_repo"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    copy = tmp_path / "gaia"
    shutil.copytree(REPO, copy)
    broken = copy / "eval" / "scenarios" / "captured" / "captured_orchard_crates.yaml"
    broken.write_text(broken.read_text().replace("objective:", "objectve:", 1))
    return copy / "eval"


def settings_for(tree: Path, strict: bool = False, **selection: list[str]) -> RunSettings:
    return RunSettings(run_id="20261130-120000-beef", suite_paths=[tree / "scenarios"],
                       corpus_root=tree / "corpus", selection=Selection(**selection), strict=strict)


def test_another_category_runs_without_a_word_about_the_broken_file(tree: Path) -> None:
    chosen, _, rejected = selected_scenarios(settings_for(tree, categories=["rag_quality"]))
    assert [s.category for s in chosen] == ["rag_quality"]
    assert rejected == []


def test_the_broken_files_category_runs_the_rest_and_reports_the_file(tree: Path) -> None:
    said: list[str] = []
    chosen, _, rejected = selected_scenarios(settings_for(tree, categories=["captured"]), said.append)
    assert [s.id for s in chosen] == ["captured_library_cap"]
    assert len(rejected) >= 1 and "captured_orchard_crates.yaml" in rejected[0]
    assert "objective" in " ".join(rejected)
    assert any("rejected and not run" in line for line in said)


def test_strict_stops_before_anything_runs(tree: Path) -> None:
    with pytest.raises(UsageError, match="captured_orchard_crates.yaml"):
        selected_scenarios(settings_for(tree, strict=True, categories=["captured"]))


def test_asking_for_only_the_broken_scenario_is_a_usage_error(tree: Path) -> None:
    with pytest.raises(UsageError, match="no runnable scenario"):
        selected_scenarios(settings_for(tree, ids=["captured_orchard_crates"]))


def card_with(warnings: list[str], statuses: list[str]) -> Scorecard:
    from runner.report import ScenarioResult

    results = [ScenarioResult(id=f"s{n}", status=status) for n, status in enumerate(statuses)]
    return build_scorecard(run_id="r", timestamp=datetime(2026, 11, 30, tzinfo=UTC), config=RunConfig(), results=results,
                           finished=True, judge_agreement=None, warnings=warnings)


def test_exit_code_says_files_were_rejected_after_the_rest_ran() -> None:
    assert exit_code(card_with([], ["NOT_JUDGED"]), None) == EXIT_OK
    assert exit_code(card_with([REJECTED_WARNING + "x.yaml:3: ..."], ["NOT_JUDGED"]), None) == EXIT_USAGE
    # An infrastructure stop is the harder failure and wins.
    assert exit_code(card_with([REJECTED_WARNING + "x"], ["NOT_RUN"]), None) == EXIT_INFRA
