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

What the agent can reach, seen from inside the null run's own sandbox (no sandbox of its own):
the moment the run's staging exec ends, the test runs a probe in that sandbox as its user, the
agent's, while the conversation goes on — no `/fixtures` (the fixture tree is never mounted), the
declared folder staged and read-only, and no answer file nor any other scenario's fixture
anywhere on the filesystem.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

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


#: Run in the sandbox as its own user (the agent's): who it is, whether /fixtures exists, what
#: the mount table says, what ~/gaia-eval holds, and where on the whole filesystem an answer file
#: or the other scenario's fixture (kiln.ini, shelf_copy_settings') is (find's errors ignored;
#: /proc and /sys, the kernel's own, skipped so the probe ends well within the conversation).
INSIDE = r"""
import json, os, subprocess
home = os.path.expanduser("~/gaia-eval")
staged = sorted(os.path.relpath(os.path.join(folder, name), home)
                for folder, dirs, files in os.walk(home) for name in dirs + files)
found = subprocess.run(["find", "/", "-path", "/proc", "-prune", "-o", "-path", "/sys", "-prune",
                        "-o", "(", "-name", "ground_truth.json", "-o", "-name", "_gen_ledger.py",
                        "-o", "-name", "kiln.ini", ")", "-print"],
                       capture_output=True, text=True).stdout.split("\n")
ledger = os.path.join(home, "shelf_files", "ledger")
print(json.dumps({
    "uid": os.getuid(), "fixtures": os.path.lexists("/fixtures"),
    "mounts": open("/proc/self/mountinfo").read(), "staged": staged,
    "found": [path for path in found if path],
    "writable": [path for path in (ledger, os.path.join(ledger, "pantry count.txt"))
                 if os.access(path, os.W_OK)],
    "text": open(os.path.join(ledger, "pantry count.txt")).read()}))
"""


class InsideTheSandbox(threading.Thread):
    """Watches the engine's events for `scenario`'s sandbox; when its staging exec (``sh -c``
    into ``~/gaia-eval``) ends, runs INSIDE there and keeps what it printed (``seen``) or what
    failed."""

    def __init__(self, scenario: str) -> None:
        super().__init__(daemon=True)
        self.client = docker.from_env()
        self.events = self.client.events(decode=True, filters={
            "type": "container", "label": f"trialbox.scenario={scenario}"})
        self.seen: dict[str, Any] | None = None
        self.failed: str | None = None

    def run(self) -> None:
        staging = None
        try:
            for event in self.events:
                action, attributes = event.get("Action", ""), event["Actor"]["Attributes"]
                if action.startswith("exec_start: sh -c") and "gaia-eval" in action:
                    staging = attributes["execID"]
                elif action == "exec_die" and staging and attributes["execID"] == staging:
                    if attributes.get("exitCode") != "0":
                        self.failed = f"the staging exec failed: {attributes}"
                        return
                    done = self.client.containers.get(event["id"]).exec_run(["python", "-c", INSIDE])
                    if done.exit_code != 0:
                        self.failed = done.output.decode(errors="replace")
                        return
                    self.seen = json.loads(done.output.decode().strip().splitlines()[-1])
                    return
        except Exception as exc:  # noqa: BLE001 — said by the test, with the run's own result
            self.failed = self.failed or repr(exc)

    def stop(self) -> None:
        self.events.close()
        self.join(30)


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
    inside = InsideTheSandbox("shelf_read_ledger")
    inside.start()
    try:
        rows = run(llm_cpu, agents, tmp_path / "results", "-s", "shelf_read_ledger",
                   "-s", "shelf_missing_fixture", "-s", "shelf_live_lookup")
    finally:
        inside.stop()
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

    # What the agent's user could reach in that sandbox, once its fixtures were staged.
    seen = inside.seen
    assert seen is not None, inside.failed
    assert seen["uid"] == 10002  # the image's user, whom GAIA's agent runs as
    assert seen["fixtures"] is False and str(FIXTURES) not in seen["mounts"]
    assert seen["staged"] == ["shelf_files", "shelf_files/ledger",
                              "shelf_files/ledger/pantry count.txt"]
    assert seen["text"] == (FIXTURES / "shelf_files" / "ledger" / "pantry count.txt").read_text()
    assert seen["writable"] == []  # a reading scenario's folder and file are read-only
    assert seen["found"] == []  # no ground_truth.json, no generator, no kiln.ini anywhere


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
