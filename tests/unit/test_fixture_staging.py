"""What fixture staging leaves out of ``~/gaia-eval`` (GAIA's own staging script's exclusions),
planned and run: the staging script runs here against a temporary folder, as it runs in a
sandbox (no Docker). And what a path named only in a turn gets: nothing staged, unless declared.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest

from runner.sandbox._fixtures import staging_script
from runner.scenarios import fixture_stagings, load_suite
from runner.scenarios._fixtures import NOT_AGENT_FACING, agent_facing, left_out_of

REPO = Path(__file__).parents[1] / "fixtures" / "gaia_staged_repo"
TREE = REPO / "eval" / "scenarios"
CORPUS = REPO / "eval" / "corpus"
FIXTURES = REPO / "tests" / "fixtures" / "gaia"
LEDGER = FIXTURES / "shelf_files" / "ledger"


def _scenario(scenario_id: str, tree: Path = TREE):  # type: ignore[no-untyped-def]
    suite = load_suite([tree], CORPUS)
    return next(s for s in suite.scenarios if s.id == scenario_id)


def _files(root: Path) -> set[str]:
    return {path.relative_to(root).as_posix() for path in root.rglob("*")}


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A fixture tree with every kind of answer file (``mount``), and an empty home."""
    mount, home = tmp_path / "mount", tmp_path / "home"
    shutil.copytree(FIXTURES, mount)
    ledger = mount / "shelf_files" / "ledger"
    (ledger / "__pycache__").mkdir()
    (ledger / "__pycache__" / "_gen_ledger.cpython-311.pyc").write_bytes(b"\0")
    (ledger / "older").mkdir()
    (ledger / "older" / "pantry count 2025.txt").write_text("Pantry count: 9 jars.\n")
    (ledger / "older" / "ground_truth.json").write_text('{"jars": 9}\n')
    (ledger / "older" / "_gen_older").mkdir()
    (ledger / "older" / "_gen_older" / "seed.txt").write_text("9\n")
    (ledger / "older").chmod(0o555)  # a read-only folder in the source still loses its answers
    home.mkdir()
    yield mount, home
    for root in (mount, home):  # give tmp_path's cleanup back what the staging locked
        for folder, dirs, _ in os.walk(root):
            for name in dirs:
                Path(folder, name).chmod(0o755)
        root.chmod(0o755)


def test_the_exclusions_are_gaias_and_match_names_not_paths():
    # GAIA's stage_eval_env.py: shutil.ignore_patterns("_gen_*", "ground_truth.json", "__pycache__")
    assert NOT_AGENT_FACING == ("_gen_*", "ground_truth.json", "__pycache__")
    assert not agent_facing("ground_truth.json") and not agent_facing("_gen_sales.py")
    assert not agent_facing("__pycache__")
    assert agent_facing("pantry count.txt") and agent_facing("my_gen_notes.txt")
    assert agent_facing("Ground_Truth.json")  # case-sensitive, as GAIA's glob on Linux


def test_the_plan_says_what_is_left_out_of_a_staged_folder():
    [staging], missing = fixture_stagings(_scenario("shelf_read_ledger"), FIXTURES)
    assert missing == [] and staging.excluded == NOT_AGENT_FACING
    assert left_out_of(staging.source) == [LEDGER / "_gen_ledger.py", LEDGER / "ground_truth.json"]


def test_the_script_copies_then_removes_the_answers_then_sets_the_mode():
    [staging], _ = fixture_stagings(_scenario("shelf_read_ledger"), FIXTURES)
    lines = staging_script([staging], home="/home/gaia", mount="/fixtures").splitlines()
    target = "/home/gaia/gaia-eval/shelf_files/ledger"
    assert lines == [
        "set -e",
        "mkdir -p /home/gaia/gaia-eval/shelf_files",
        f"rm -rf {target}",
        f"cp -R /fixtures/shelf_files/ledger {target}",
        f"chmod -R u+rwX {target}",
        f"find {target} -mindepth 1 \\( -name '_gen_*' -o -name ground_truth.json "
        "-o -name __pycache__ \\) -prune -exec rm -rf {} +",
        f"chmod -R a-w,u+rX {target}",
    ]


def test_the_script_run_here_stages_no_answer_file(sandbox: tuple[Path, Path]):
    mount, home = sandbox
    [ledger], _ = fixture_stagings(_scenario("shelf_read_ledger"), mount)
    [settings], _ = fixture_stagings(_scenario("shelf_copy_settings"), mount)
    assert left_out_of(ledger.source) == sorted(
        mount / "shelf_files" / "ledger" / name
        for name in ("__pycache__", "_gen_ledger.py", "ground_truth.json",
                     "older/_gen_older", "older/ground_truth.json"))
    script = staging_script([ledger, settings], home=str(home), mount=str(mount))
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr

    staged = home / "gaia-eval" / "shelf_files"
    assert _files(staged / "ledger") == {"pantry count.txt", "older", "older/pantry count 2025.txt"}
    assert _files(staged / "settings") == {"kiln.ini"}
    assert (staged / "ledger" / "pantry count.txt").read_text() == (
        LEDGER / "pantry count.txt").read_text()
    # The source is untouched; the reading scenario's copy is read-only, the writing one's not.
    assert (mount / "shelf_files" / "ledger" / "ground_truth.json").is_file()
    assert not stat.S_IMODE((staged / "ledger" / "pantry count.txt").stat().st_mode) & 0o222
    assert stat.S_IMODE((staged / "settings" / "kiln.ini").stat().st_mode) & stat.S_IWUSR

    # Staged again (a reused home): the same copy, nothing of the earlier one in the way.
    again = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30)
    assert again.returncode == 0, again.stderr
    assert _files(staged / "ledger") == {"pantry count.txt", "older", "older/pantry count 2025.txt"}


def test_a_declared_folder_that_is_itself_an_answer_is_never_staged():
    scenario = _scenario("shelf_read_ledger").model_copy(
        update={"fixtures": ["shelf_files/ledger/__pycache__", "shelf_files/_gen_shelves"]})
    stagings, missing = fixture_stagings(scenario, FIXTURES)
    assert stagings == []
    assert missing == [
        f"{LEDGER / '__pycache__'} (holds answers: GAIA never stages it)",
        f"{FIXTURES / 'shelf_files' / '_gen_shelves'} (holds answers: GAIA never stages it)"]


SCENARIO = """\
id: shelf_turn_only
name: "Shelf — A Path Named Only in the Turn"
category: gaia_files
persona: casual_user
setup:
  index_documents: []
{fixtures}turns:
  - turn: 1
    objective: "Ask how many jars the pantry count says"
    user_message: "how many jars does ~/gaia-eval/shelf_files/ledger/pantry count.txt say?"
    ground_truth:
      expected_answer: "17"
    success_criteria: "Agent reads the file and answers 17."
"""


def test_a_path_named_only_in_a_turn_is_staged_only_when_declared(tmp_path: Path):
    # GAIA's harness stages its fixture folders before any scenario, reading no scenario; trialbox
    # stages what a scenario declares, and the turns' words are not a declaration.
    tree = tmp_path / "scenarios" / "gaia_files"
    tree.mkdir(parents=True)
    (tree / "shelf_turn_only.yaml").write_text(SCENARIO.format(fixtures=""))
    bare = _scenario("shelf_turn_only", tmp_path / "scenarios")
    assert bare.fixtures == [] and fixture_stagings(bare, FIXTURES) == ([], [])

    (tree / "shelf_turn_only.yaml").write_text(
        SCENARIO.format(fixtures="fixtures: [shelf_files/ledger]\n"))
    declared = _scenario("shelf_turn_only", tmp_path / "scenarios")
    [staging], missing = fixture_stagings(declared, FIXTURES)
    assert missing == [] and staging.inside == PurePosixPath("gaia-eval/shelf_files/ledger")
