"""GAIA's staged fixtures, live: a scenario that reads ``~/gaia-eval/...`` passes in a sandbox.

The tree is ours (tests/fixtures/gaia_staged_repo), in the shape of GAIA's newer one: each file
opens with a ``# FIXTURE-SYNC: tests/fixtures/gaia/<folder>/`` comment, ``setup.notes`` says where
the folder is staged, and the turns name the staged paths (one with a space in its name). The
run finds the fixture tree beside the scenarios (no --fixtures), as a user's GAIA checkout has
it. The correct agent is the self-test's oracle: a real GAIA agent that reads the file the user
names through GAIA's own tools (index_document, query_specific_file) and answers only with what
that reading brought back — so a pass proves the file was staged where the scenario says.

Null and planted, one sandbox each: the fixture as committed → the checks pass; the same tree
with --fixtures pointing at a copy whose count is changed → the oracle cannot find its answer in
what it read, and the check fails. The missing fixture and the `live` scenario need no sandbox.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from runner.scenarios import default_fixtures_root, load_suite
from runner.selftest._live import NOT_ANSWERABLE, ORACLE, write_agents

if TYPE_CHECKING:
    from labelled_containers import LlmCpu

docker = pytest.importorskip("docker")

pytestmark = [pytest.mark.containers, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[1] / "fixtures" / "gaia_staged_repo"
TREE = REPO / "eval" / "scenarios"
FIXTURES = REPO / "tests" / "fixtures" / "gaia"
TRIALBOX = Path(sys.executable).with_name("trialbox")
STAGED = "~/gaia-eval/shelf_files/ledger/pantry count.txt"


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Path:
    suite = load_suite([TREE], REPO / "eval" / "corpus")
    assert default_fixtures_root([TREE]) == FIXTURES
    return write_agents(suite.scenarios, suite.manifest, tmp_path_factory.mktemp("agents"),
                        FIXTURES)


def run(llm: LlmCpu, agents: Path, results: Path, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    done = subprocess.run(
        [str(TRIALBOX), "run", str(TREE), "--agent-dir", str(agents), "--agent", ORACLE,
         "--device", "cpu", "--llm-url", llm.url, "--llm-container", llm.name,
         "--judge-provider", "none", "--results", str(results), "--json", *args],
        cwd=results.parent, env=env, capture_output=True, text=True, timeout=800,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr[-4000:]
    run_dir = Path(json.loads(done.stdout)["run_dir"])
    card = json.loads((run_dir / "scorecard.json").read_text())
    leftovers = docker.from_env().containers.list(
        all=True, filters={"label": f"trialbox.run={run_dir.name}"})
    assert leftovers == [], f"left behind: {[x.name for x in leftovers]}"
    rows = {row["id"]: row for row in card["scenarios"]}
    for row in rows.values():
        if row.get("trace"):
            row["transcript"] = json.loads((run_dir / row["trace"]).read_text())["transcript"]
    return rows


def reads_of_the_staged_file(row: dict) -> list[dict]:
    first = row["transcript"]["turns"][0]
    return [call for call in first["tool_calls"]
            if call["name"] in ("index_document", "query_specific_file")]


def test_a_scenario_that_reads_a_staged_fixture_passes_its_checks(
    llm_cpu: LlmCpu, agents: Path, tmp_path: Path
) -> None:
    rows = run(llm_cpu, agents, tmp_path / "results", "-s", "shelf_read_ledger",
               "-s", "shelf_missing_fixture", "-s", "shelf_live_lookup")
    ledger = rows["shelf_read_ledger"]
    reads = reads_of_the_staged_file(ledger)
    assert [call["name"] for call in reads] == ["index_document", "query_specific_file"]
    assert all(call["error"] is None for call in reads), reads
    assert all(call["arguments"]["file_path"].endswith("gaia-eval/shelf_files/ledger/pantry count.txt")
               for call in reads), reads
    checks = [check for turn in ledger["turns"] for check in turn["checks"]]
    assert checks and all(check["passed"] for check in checks), checks
    assert ledger["turns"][0]["answer"] == "17"
    # A folder the tree names and the fixture tree lacks: skipped, naming the path, not a FAIL.
    missing = rows["shelf_missing_fixture"]
    assert missing["status"] == "SKIPPED_NO_DOCUMENT", missing
    assert str(FIXTURES / "shelf_files" / "attic") in missing["error"]
    # GAIA's `live` tag on a machine without the internet: skipped with the reason.
    assert rows["shelf_live_lookup"]["status"] == "SKIPPED_NO_MODEL"


def test_the_staged_copy_is_the_fixture_tree_the_run_was_given(
    llm_cpu: LlmCpu, agents: Path, tmp_path: Path
) -> None:
    changed = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, changed)
    (changed / "shelf_files" / "ledger" / "pantry count.txt").write_text(
        "Pantry count on 3 March: 18 jars of quince jam.\n", encoding="utf-8")
    rows = run(llm_cpu, agents, tmp_path / "results", "-s", "shelf_read_ledger",
               "--fixtures", str(changed))
    ledger = rows["shelf_read_ledger"]
    assert all(call["error"] is None for call in reads_of_the_staged_file(ledger))
    answer = ledger["turns"][0]["answer"]
    assert answer.startswith(NOT_ANSWERABLE) and "17" not in answer, answer  # never quoted
    assert not all(check["passed"] for turn in ledger["turns"] for check in turn["checks"])
