"""`trialbox run` with the real Lemonade Server as the stack's LLM: compose.lemonade.yaml brought
up as `trialbox up --llm-server lemonade` does it (under a project and port of the test's own),
three scenarios in Docker sandboxes whose Agent UIs reach Lemonade only through the front door,
and a scorecard that names the server that really answered and the device it served on."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from labelled_containers import new_tag

from runner.run.cleanup import cleanup
from runner.stack.compose import LlmStack, down, up_llm
from runner.stack.lemonade_image import LEMONADE_VERSION
from runner.system.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
TRIALBOX = ROOT / ".venv" / "bin" / "trialbox"
SCENARIOS = ("duplicated_sections", "two_documents_recall", "no_tool_needed")


@pytest.fixture(scope="module")
def lemonade_stack() -> Iterator[LlmStack]:
    run_id = new_tag("lemonade-stack")
    try:
        yield up_llm("cpu", run_id=run_id, port=free_port(), server="lemonade")
    finally:
        down("cpu", run_id=run_id, volumes=True, server="lemonade")
        cleanup(run_id, docker.from_env())


def test_the_stack_is_lemonade_behind_the_front_door(lemonade_stack: LlmStack) -> None:
    client = docker.from_env()
    door = client.containers.get(lemonade_stack.container)
    assert door.labels["trialbox.llm-server"] == "lemonade" and lemonade_stack.server == "lemonade"
    project = door.labels["com.docker.compose.project"]
    (lemonade,) = client.containers.list(filters={"label": [
        f"com.docker.compose.project={project}", "trialbox.role=lemonade"]})
    assert lemonade.attrs["State"]["Health"]["Status"] == "healthy"
    assert lemonade.attrs["HostConfig"]["ReadonlyRootfs"] is True
    # Only the door is published: Lemonade's port (EXPOSEd by its image) maps to no host port.
    assert not any(lemonade.attrs["NetworkSettings"]["Ports"].values())
    assert list(lemonade.attrs["NetworkSettings"]["Networks"]) == [f"{project}_stack"]


@pytest.mark.timeout(900)
def test_three_scenarios_reach_the_agent_and_the_scorecard_names_lemonade(
        lemonade_stack: LlmStack, tmp_path: Path) -> None:
    selection = [arg for scenario in SCENARIOS for arg in ("-s", scenario)]
    done = subprocess.run(
        [str(TRIALBOX), "run", str(ROOT / "eval" / "scenarios"), *selection,
         "--llm-container", lemonade_stack.container, "--llm-url", lemonade_stack.url,
         "--judge-provider", "none", "--simulator", "scripted", "--results", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=840, check=False)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    (card_path,) = tmp_path.glob("*/scorecard.json")
    card = json.loads(card_path.read_text())
    rows = {row["id"]: row for row in card["scenarios"]}
    assert set(rows) == set(SCENARIOS)
    for scenario, row in rows.items():
        # The agent answered every turn (a 135M model answers badly: FAIL is quality, not infra).
        assert row["status"] in ("PASS", "FAIL", "NOT_JUDGED"), (scenario, row["status"], row["error"])
        assert row["turns"] and all(turn["answer"] for turn in row["turns"]), scenario
    config = card["config"]
    assert config["llm_server"]["version"] == LEMONADE_VERSION
    assert config["served_on"] == "cpu"
    assert config["llm_server_build"]["lemonade-server"] == LEMONADE_VERSION
    assert config["llm_server_build"]["backends"] == "cpu"
    summary = (card_path.parent / "summary.md").read_text()
    assert (f"served as SmolLM2-135M-Instruct Q4_1 by Lemonade Server {LEMONADE_VERSION}"
            in summary)
