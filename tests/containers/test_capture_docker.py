"""Capture round trip in Docker sandboxes: run → capture the sandbox's gaia_chat.db → validate →
run the captured scenario again, in containers.

A container's Agent UI indexes documents at its own corpus mount, a path that does not exist on
the host; capture maps them back to the host corpus by their bytes (GAIA's file_hash).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

from runner.capture import capture

if TYPE_CHECKING:
    from labelled_containers import LlmCpu

docker = pytest.importorskip("docker")

pytestmark = [pytest.mark.containers, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "fixtures" / "engine_suite"
CORPUS = SUITE / "corpus"


@pytest.fixture(scope="module")
def llm_cpu_environment() -> dict[str, str]:
    """The module's llm-cpu server forces query_documents, so the replies have tool steps."""
    return {"TRIALBOX_LLM_FORCE_TOOL": "query_documents"}


def trialbox(llm: LlmCpu, results: Path, *args: str) -> Path:
    container, url = llm.name, llm.url
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "TRIALBOX_JUDGE_URL")}
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "run", *args, "--corpus", str(CORPUS), "--device", "cpu",
         "--llm-url", url, "--llm-container", container, "--judge-provider", "none",
         "--simulator", "scripted", "--results", str(results), "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1400,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    run_dir = Path(json.loads(done.stdout)["run_dir"])
    leftovers = docker.from_env().containers.list(all=True, filters={"label": f"trialbox.run={run_dir.name}"})
    assert leftovers == [], f"left behind: {[x.name for x in leftovers]}"
    return run_dir


def test_a_docker_sandbox_session_round_trips(llm_cpu: LlmCpu, tmp_path: Path) -> None:
    first = trialbox(llm_cpu, tmp_path / "results-1", str(SUITE / "scenarios"), "-s", "orchard_apples")
    database = first / "artifacts" / "orchard_apples" / "gaia_chat.db"
    with sqlite3.connect(database) as conn:
        [(indexed_at,)] = conn.execute("SELECT filepath FROM documents").fetchall()
    assert not Path(indexed_at).exists(), "the container's own corpus path, not the host's"

    tree = tmp_path / "eval" / "scenarios"
    result = capture(database, out_dir=tree / "captured", corpus_root=CORPUS)
    assert result.errors == [], result.problems
    data = yaml.safe_load(result.path.read_text())
    assert data["setup"]["index_documents"] == ["documents/orchard_report.md"]
    assert [t.get("expected_tools") for t in data["turns"]] == [["query_documents"]] * 2

    validated = subprocess.run([sys.executable, "-m", "runner.cli", "validate", str(tree), "--corpus",
                                str(CORPUS)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert validated.returncode == 0, validated.stdout + validated.stderr

    second = trialbox(llm_cpu, tmp_path / "results-2", str(tree))
    [row] = json.loads((second / "scorecard.json").read_text())["scenarios"]
    assert row["id"] == result.scenario_id and row["status"] in ("NOT_JUDGED", "FAIL")
    tool_checks = [c for turn in row["turns"] for c in turn["checks"] if c["type"] == "expected_tools"]
    assert len(tool_checks) == 2 and all(c["passed"] for c in tool_checks), tool_checks
    assert (second / "artifacts" / result.scenario_id / "gaia_chat.db").is_file()
