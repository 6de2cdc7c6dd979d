"""--lane NAME reads GAIA's eval/ci_lanes.json beside the tree: its categories run, the ones the
tree lacks and the tree's categories no lane measures are said, and a bad file or name is one
usage error naming the file and the fix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.run.errors import EXIT_USAGE, UsageError
from runner.run.prepare import selected_scenarios
from runner.run.settings import RunSettings, Selection, new_run_id

TREE = Path(__file__).parents[1] / "fixtures" / "gaia_tree"

# Our own lanes, in the shape of GAIA's file: a comment list, lanes, and excluded categories.
LANES = {
    "$comment": ["Which categories each CI lane runs; vision reads the screen, so no lane may."],
    "lanes": [
        {"lane": "retrieval", "categories": ["rag_quality", "memory", "captured"]},
        {"lane": "conversation", "categories": ["personality", "adversarial"]},
    ],
    "excluded": {"vision": "reads the runner's screen into a public scorecard"},
}


def tree_with(tmp_path: Path, lanes: object) -> Path:
    """A copy of our GAIA-shaped tree as GAIA lays out eval/: scenarios/, corpus/, ci_lanes.json."""
    root = tmp_path / "eval"
    shutil.copytree(TREE, root)
    if lanes is not None:
        text = lanes if isinstance(lanes, str) else json.dumps(lanes, indent=2)
        (root / "ci_lanes.json").write_text(text)
    return root


def chosen(root: Path, lane: str, said: list[str] | None = None) -> list[str]:
    settings = RunSettings(run_id=new_run_id(), suite_paths=[root / "scenarios"],
                           corpus_root=root / "corpus", results_root=root.parent / "results",
                           selection=Selection(lane=lane))
    scenarios, _, _ = selected_scenarios(settings, say=(said.append if said is not None else None))
    return sorted({s.category for s in scenarios})


def test_a_lane_runs_its_categories_and_says_which_the_tree_lacks(tmp_path):
    root = tree_with(tmp_path, LANES)
    said: list[str] = []
    assert chosen(root, "retrieval", said) == ["captured", "rag_quality"]
    assert said[0] == (f"lane retrieval ({root / 'ci_lanes.json'}): rag_quality, captured; "
                       "not in this tree: memory")
    # The tree's categories no lane claims and none excludes: no CI lane would measure them.
    assert said[1].endswith("no lane runs context_retention, real_world and none excludes them — "
                            "no CI lane measures those categories")
    assert chosen(root, "conversation") == ["adversarial", "personality"]


@pytest.mark.parametrize(("lanes", "lane", "says"), [
    (LANES, "retreival", "has no such lane (lanes: retrieval, conversation)"),
    ({**LANES, "lanes": [{"lane": "far", "categories": ["gaia_shell"]}]}, "far",
     "none of its categories (gaia_shell) is in the tree given"),
    ({**LANES, "lanes": [{"lane": "screen", "categories": ["vision", "rag_quality"]}]}, "screen",
     "lane screen claims vision, which the file excludes (reads the runner's screen"),
    ({"lanes": [{"lane": "x", "categories": []}]}, "x", "lanes.0.categories: List should have"),
    ('{"lanes": [', "x", "not JSON"),
    ({"lanes": [{"name": "x"}]}, "x", "lanes.0.lane: Field required"),
    (None, "retrieval", "no ci_lanes.json beside the scenarios folder"),
])
def test_a_bad_lanes_file_or_name_is_one_usage_error_naming_it(tmp_path, lanes, lane, says):
    root = tree_with(tmp_path, lanes)
    with pytest.raises(UsageError) as raised:
        chosen(root, lane)
    assert says in str(raised.value)
    assert "\n" not in str(raised.value)


def test_lane_and_category_together_are_refused():
    result = CliRunner().invoke(app, ["run", "--lane", "tools", "--category", "rag_quality"])
    assert result.exit_code == EXIT_USAGE
    assert "--lane and --category both choose the categories to run: give one" in result.output
