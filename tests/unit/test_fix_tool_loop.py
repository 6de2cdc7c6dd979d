"""The `openai` fixer's tool loop, driven end to end by a scripted OpenAI-compatible double on
loopback: it edits a file, a path outside /workspace is refused, and the requests it sends
carry the model, the five tools and every tool result."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runner.fix import _tool_loop

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "broken_agent"
sys.path.insert(0, str(FIXTURE))
from openai_double import FIXED_REGISTER, ScriptedOpenAI, repair_script  # noqa: E402


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    workspace, context = tmp_path / "workspace", tmp_path / "context"
    shutil.copytree(FIXTURE / "agents", workspace)
    context.mkdir()
    (context / "fixer-prompt.md").write_text("Fix crane_repair_date: tool_called query_documents failed.")
    (context / "failing.json").write_text(json.dumps([{"id": "crane_repair_date"}]))
    return workspace, context


def _run(tmp_path: Path, url: str, **extra: str) -> subprocess.CompletedProcess[str]:
    workspace, context = _dirs(tmp_path)
    env = {"PATH": os.environ["PATH"], "TRIALBOX_WORKSPACE": str(workspace), "TRIALBOX_CONTEXT": str(context),
           "TRIALBOX_FIXER_URL": url, "TRIALBOX_FIXER_MODEL": "coder-1.5b", "TRIALBOX_FIXER_API_KEY": "sk-test",
           "TRIALBOX_FIXER_PROMPT": str(context / "fixer-prompt.md"),
           "TRIALBOX_FIX_NOTES": str(tmp_path / "notes.json"), **extra}
    return subprocess.run([sys.executable, str(ROOT / "runner" / "fix" / "_tool_loop.py")], env=env,
                          capture_output=True, text=True, timeout=60)


def test_a_scripted_model_repairs_the_agent_through_the_tools(tmp_path: Path) -> None:
    double = ScriptedOpenAI(repair_script())
    try:
        done = _run(tmp_path, f"http://127.0.0.1:{double.port}/v1")
    finally:
        double.close()
    assert done.returncode == 0, done.stderr
    assert FIXED_REGISTER in (tmp_path / "workspace" / "archivist" / "agent.py").read_text()
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["event"] == "finish"
    results = {e["name"] + ":" + e["result"][:40] for e in events if e["event"] == "tool"}
    assert any(r.startswith("read_file:error: ../../etc/passwd: outside") for r in results)
    # What the loop sent: five requests, our model, the five tools, the key, the prompt first.
    assert len(double.requests) == 5
    first = double.requests[0]
    assert first["model"] == "coder-1.5b" and first["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in first["tools"]] == ["list_files", "read_file", "search", "write_file", "finish"]
    assert first["messages"][1] == {"role": "user", "content": "Fix crane_repair_date: tool_called query_documents failed."}
    assert double.headers[0]["Authorization"] == "Bearer sk-test"
    last = double.requests[-1]["messages"]
    tool_results = {m["tool_call_id"]: m["content"] for m in last if m["role"] == "tool"}
    assert "archivist/agent.py" in tool_results["call_1"]
    assert '"crane_repair_date"' in tool_results["call_2"]
    assert tool_results["call_4"].startswith("wrote ")
    assert "register_rag_tools" in tool_results["call_5"]
    assert tool_results["call_6"].startswith("error: ../../etc/passwd: outside /workspace or /context")
    notes = json.loads((tmp_path / "notes.json").read_text())
    assert notes[0]["file"] == "archivist/agent.py"


def test_the_step_budget_stops_a_model_that_never_finishes(tmp_path: Path) -> None:
    looping = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}]} for i in range(5)]
    double = ScriptedOpenAI(looping)
    try:
        done = _run(tmp_path, f"http://127.0.0.1:{double.port}/v1", TRIALBOX_FIXER_MAX_STEPS="3")
    finally:
        double.close()
    assert done.returncode == 3
    assert json.loads(done.stdout.splitlines()[-1]) == {"event": "stopped", "reason": "step budget spent (3 steps)"}
    assert len(double.requests) == 3


def test_an_unreachable_model_exits_4(tmp_path: Path) -> None:
    done = _run(tmp_path, "http://127.0.0.1:9/v1")
    assert done.returncode == 4
    assert json.loads(done.stdout.splitlines()[-1])["event"] == "error"


def test_tools_stay_inside_their_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace, context = _dirs(tmp_path)
    monkeypatch.setattr(_tool_loop, "WORKSPACE", workspace)
    monkeypatch.setattr(_tool_loop, "CONTEXT", context)
    (workspace / "escape").symlink_to(tmp_path)
    with pytest.raises(_tool_loop.ToolError, match="outside /workspace"):
        _tool_loop.write_file(str(context / "x.md"), "no")  # /context is read-only to the model
    with pytest.raises(_tool_loop.ToolError, match="outside"):
        _tool_loop.read_file("escape/notes.json")  # a symlink out is resolved, then refused
    assert "failing.json" in _tool_loop.list_files(str(context))
    with pytest.raises(_tool_loop.ToolError, match="pattern"):
        _tool_loop.search("(")
    with pytest.raises(_tool_loop.ToolError, match="at most"):
        _tool_loop.write_file("big.txt", "x" * (_tool_loop.MAX_WRITE + 1))
