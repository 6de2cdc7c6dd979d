"""A captured sandbox session round-trips: run → capture → validate → run again.

Real parts only: `trialbox run --backend local` (GAIA's Agent UI and MCP bridge as host processes
from .venv-gaia) against the real llm-cpu server with TRIALBOX_LLM_FORCE_TOOL=query_documents
(SmolLM2-135M never picks a tool itself, and capture must see real tool steps); the chat
database the sandbox left in results/<run>/artifacts/<id>/ is captured, the captured scenario is
validated by the real CLI, then run again in a fresh sandbox, and that run's database is
captured once more.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from runner.capture import capture

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "fixtures" / "engine_suite"
CORPUS = SUITE / "corpus"


@pytest.fixture(scope="module")
def forced_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from conftest import running_llm_server

    with running_llm_server(tmp_path_factory.mktemp("llm-capture"),
                            {"TRIALBOX_LLM_FORCE_TOOL": "query_documents"}) as url:
        yield url


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "TRIALBOX_JUDGE_URL")}
    return subprocess.run([sys.executable, "-m", "runner.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env=env)


def run_suite(tree: Path, results: Path, llm_url: str, *select: str) -> Path:
    done = cli("run", str(tree), "--corpus", str(CORPUS), "--backend", "local", "--device", "cpu",
               "--llm-url", llm_url, "--judge-provider", "none", "--simulator", "scripted",
               "--results", str(results), *select)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [run_dir] = [p for p in results.iterdir() if p.is_dir()]
    return run_dir


def test_run_capture_validate_run_again(tmp_path: Path, forced_llm: str, gaia_python: Path) -> None:
    first = run_suite(SUITE / "scenarios", tmp_path / "results-1", forced_llm, "-s", "orchard_apples")
    database = first / "artifacts" / "orchard_apples" / "gaia_chat.db"
    assert database.is_file()

    tree = tmp_path / "eval" / "scenarios"
    result = capture(database, out_dir=tree / "captured", corpus_root=CORPUS)
    assert result.errors == [], result.problems
    captured = yaml.safe_load(result.path.read_text())
    original = yaml.safe_load((SUITE / "scenarios" / "rag_quality" / "orchard_apples.yaml").read_text())
    assert [t["user_message"] for t in captured["turns"]] == [t["user_message"] for t in original["turns"]]
    assert [t.get("expected_tools") for t in captured["turns"]] == [["query_documents"]] * 2
    assert captured["setup"]["index_documents"] == ["documents/orchard_report.md"]
    trace = json.loads((first / "traces" / "orchard_apples.json").read_text())
    answers = [turn["answer"] for turn in trace["transcript"]["turns"]]
    assert [t["success_criteria"] for t in captured["turns"]] == [
        "Answers like the captured session did: " + _quoted(answer) for answer in answers]

    validated = cli("validate", str(tree), "--corpus", str(CORPUS))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "1 scenario(s) valid, 0 error(s)" in validated.stdout

    second = run_suite(tree, tmp_path / "results-2", forced_llm)
    card = json.loads((second / "scorecard.json").read_text())
    [row] = card["scenarios"]
    assert row["id"] == result.scenario_id == "captured_trialbox_orchard_apples"
    assert row["status"] in ("NOT_JUDGED", "FAIL")  # no judge: checks decide, never a score
    tool_checks = [c for turn in row["turns"] for c in turn["checks"] if c["type"] == "expected_tools"]
    assert len(tool_checks) == 2 and all(c["passed"] for c in tool_checks), tool_checks

    again = capture(second / "artifacts" / result.scenario_id / "gaia_chat.db",
                    out_dir=tmp_path / "again", corpus_root=CORPUS)
    recaptured = yaml.safe_load(again.path.read_text())
    assert [t["user_message"] for t in recaptured["turns"]] == [t["user_message"] for t in captured["turns"]]
    assert recaptured["setup"] == captured["setup"]


def _quoted(answer: str) -> str:
    flat = " ".join(answer.split())
    return flat if len(flat) <= 200 else flat[:200].rstrip() + "…"
