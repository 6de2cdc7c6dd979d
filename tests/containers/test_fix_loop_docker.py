"""Fix mode end to end, offline, against a real Docker engine (llm-cpu, agent-ui and fixer images).

The fixture agent `archivist` is broken on purpose (it registers no tool and its prompt forbids
searching), so the scenario's `tool_called query_documents` check fails with no judge at all.
The LLM server forces the first model call of a turn to `query_documents` whenever a request
offers that tool (SmolLM2-135M never picks one by itself): once the agent offers the tool again,
the check passes. The `command` fixer is tests/fixtures/broken_agent/fixer/repair.py, copied into
the fix sandbox and run there over a copy of the agent directory.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import typer
from typer.testing import CliRunner

from runner.cli.fix import fix_command
from runner.fix._patch import tree_hash
from runner.report import read_any_scorecard

if TYPE_CHECKING:
    from labelled_containers import LlmCpu

docker = pytest.importorskip("docker")

pytestmark = [pytest.mark.containers, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "broken_agent"
AGENTS = FIXTURE / "agents"

app = typer.Typer()
app.command("fix")(fix_command)


@app.command("version")
def _version() -> None:  # a second command keeps `fix` a sub-command, as in trialbox's app
    print("test")


@pytest.fixture(scope="module", autouse=True)
def images_built() -> None:
    client = docker.from_env()
    for image in ("trialbox/agent-ui:dev", "trialbox/llm-cpu:dev", "trialbox/fixer:dev"):
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            pytest.fail(f"{image} is not built — `trialbox images`")


@pytest.fixture(scope="module")
def llm_cpu_environment() -> dict[str, str]:
    """The module's llm-cpu server (`llm_cpu`, tests/conftest.py) has the forced-tool switch on."""
    return {"TRIALBOX_LLM_FORCE_TOOL": "query_documents"}


@pytest.fixture(scope="module")
def llm(llm_cpu: LlmCpu) -> tuple[str, str]:
    """(container name, URL) of the module's llm-cpu server."""
    return llm_cpu.name, llm_cpu.url


def _fix(llm: tuple[str, str], results: Path, *args: str) -> tuple[int, str]:
    name, url = llm
    command = ["fix", str(FIXTURE / "eval" / "scenarios"), "--agent-dir", str(AGENTS),
               "--llm-container", name, "--llm-url", url, "--device", "cpu", "--judge-provider", "none",
               "--simulator", "scripted", "--results", str(results), *args]
    outcome = CliRunner().invoke(app, command)
    return outcome.exit_code, outcome.output + (repr(outcome.exception) if outcome.exception else "")


@pytest.fixture(scope="module")
def repaired(llm: tuple[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One whole loop: phase A fails, the command fixer repairs, iteration 1 passes."""
    results = tmp_path_factory.mktemp("results")
    before = tree_hash(AGENTS)
    started = time.perf_counter()
    code, output = _fix(llm, results, "--fixer", "command",
                        "--fixer-cmd", str(FIXTURE / "fixer" / "repair.py"), "--max-iterations", "2")
    wall = time.perf_counter() - started
    [run_dir] = [p for p in results.iterdir() if p.is_dir()]
    return {"code": code, "output": output, "run_dir": run_dir, "before": before, "after": tree_hash(AGENTS),
            "wall": wall}


def test_iteration_1_passes_what_iteration_0_failed(repaired: dict) -> None:
    assert repaired["code"] == 0, repaired["output"]
    run_dir = repaired["run_dir"]
    [first] = read_any_scorecard(run_dir).scenarios
    assert first.status.value == "FAIL" and first.decided_by == "checks"
    assert [c.type for c in first.failed_checks()] == ["tool_called"]
    report = json.loads((run_dir / "fix" / "fix.json").read_text())
    assert report["baseline_failing"] == ["crane_repair_date"] and report["baseline_pass_rate"] == 0.0
    [iteration] = report["iterations"]  # nothing failed any more: no second iteration
    assert iteration["improved"] == ["crane_repair_date"] and iteration["pass_rate"] == 1.0
    assert report["stop_reason"] == "nothing fails"
    [after] = read_any_scorecard(Path(iteration["run_dir"])).scenarios
    assert after.status.value == "NOT_JUDGED" and after.gates.checks_ok and after.gates.checks_run >= 2
    assert "query_documents" in [t.name for t in after.turns[0].tool_calls]
    assert iteration["fixer"]["problems"] == [] and iteration["fixer"]["changed_files"] == ["archivist/agent.py"]
    assert report["fixer_target"] is None  # the command fixer had no network at all
    # Phase times are recorded; print them for the README's closing note.
    print("\nwall time per phase:", report["phase_s"], "whole loop:", round(repaired["wall"], 1), "s")


def test_the_patch_applies_to_a_copy_and_the_host_tree_is_untouched(repaired: dict, tmp_path: Path) -> None:
    fix_dir = repaired["run_dir"] / "fix"
    assert repaired["before"] == repaired["after"]
    report = json.loads((fix_dir / "fix.json").read_text())
    assert report["host_tree_sha256_before"] == report["host_tree_sha256_after"] == repaired["before"]
    copy = tmp_path / "agents"
    shutil.copytree(AGENTS, copy)
    patch = fix_dir / "final.patch"
    assert patch.read_text() == (fix_dir / "iter-1" / "patch.diff").read_text()
    subprocess.run(["git", "apply", "--check", str(patch)], cwd=copy, check=True)
    subprocess.run(["git", "apply", str(patch)], cwd=copy, check=True)
    assert tree_hash(copy) == tree_hash(fix_dir / "iter-1" / "agent")
    assert "self.register_rag_tools()" in (copy / "archivist" / "agent.py").read_text()
    log = json.loads((fix_dir / "iter-1" / "fix_log.json").read_text())
    assert log == [{"fix_id": 1, "file": "archivist/agent.py",
                    "change_summary": "register GAIA's RAG tools; let the prompt ask for a document search",
                    "targets_scenario": ["crane_repair_date"],
                    "rationale": "tool_called query_documents failed: the agent offered the model no tool",
                    "lines_changed": 5}]
    for name in ("transcript.log", "proxy.log", "fixer.json", "fixer-prompt.md", "comparison.json", "comparison.txt"):
        assert (fix_dir / "iter-1" / name).is_file(), name
    assert "repair: registered the RAG tools" in (fix_dir / "iter-1" / "transcript.log").read_text()
    assert "crane_repair_date" in (fix_dir / "iter-1" / "comparison.txt").read_text()


def test_the_summary_shows_it(repaired: dict) -> None:
    summary = (repaired["run_dir"] / "fix" / "summary.md").read_text()
    assert "| 0 (run) | 0% |" in summary and "| 1 | 100% | 1 | crane_repair_date |" in summary
    assert "Host tree: unchanged" in summary and "git apply" in summary
    assert "+        self.register_rag_tools()" in summary
    assert "Wall time per phase (A run, B fix, C re-run, D compare)" in summary
    assert summary in repaired["output"].replace("\r", "") or "Fix mode" in repaired["output"]


@pytest.mark.parametrize(("command", "problems"), [
    ("true", ["no_change"]),
    ("echo 'def broken(:' >> archivist/agent.py", ["import_broken"]),
    ("echo stray > /var/tmp/stray.txt", ["wrote_outside_workspace", "no_change"]),
    ("exit 7", ["fixer_failed", "no_change"]),
])
def test_a_fixer_that_does_nothing_useful_is_reported(repaired: dict, llm: tuple[str, str], tmp_path: Path,
                                                      command: str, problems: list[str]) -> None:
    # --from the repaired loop's phase-A run: no phase A again, and no re-run for these.
    run_dir = tmp_path / repaired["run_dir"].name
    shutil.copytree(repaired["run_dir"], run_dir, ignore=shutil.ignore_patterns("fix"))
    code, output = _fix(llm, tmp_path / "unused", "--from", str(run_dir), "--fixer", "command",
                        "--fixer-cmd", command, "--max-iterations", "1")
    assert code == 1, output  # below the target: nothing was fixed
    report = json.loads((run_dir / "fix" / "fix.json").read_text())
    [iteration] = report["iterations"]
    assert iteration["fixer"]["problems"] == problems
    assert iteration["run_dir"] is None and report["best_iteration"] is None
    summary = (run_dir / "fix" / "summary.md").read_text()
    assert "No iteration was re-run" in summary
    if "import_broken" in problems:
        assert "SyntaxError" in iteration["fixer"]["import_errors"]["archivist/agent.py"]
    if "wrote_outside_workspace" in problems:
        assert iteration["fixer"]["outside_writes"] == ["/var/tmp/stray.txt"]
    assert tree_hash(AGENTS) == repaired["before"]


def _phase_a_copy(repaired: dict, tmp_path: Path) -> Path:
    run_dir = tmp_path / repaired["run_dir"].name
    shutil.copytree(repaired["run_dir"], run_dir, ignore=shutil.ignore_patterns("fix"))
    return run_dir


def test_the_bundled_model_as_openai_fixer_is_contained_and_reported(repaired: dict, llm: tuple[str, str],
                                                                      tmp_path: Path) -> None:
    """SmolLM2-135M through the tool loop: whatever it does stays in the sandbox, every request
    goes to the stack's LLM server through the proxy, and the outcome is on record."""
    run_dir = _phase_a_copy(repaired, tmp_path)
    code, output = _fix(llm, tmp_path / "unused", "--from", str(run_dir), "--fixer", "openai",
                        "--fixer-url", "http://llm:13305/api/v1", "--fixer-model", "SmolLM2-135M-Instruct-GGUF",
                        "--fixer-max-steps", "4", "--max-iterations", "1")
    assert code in (0, 1), output
    report = json.loads((run_dir / "fix" / "fix.json").read_text())
    assert report["fixer_target"] == "llm:13305"
    [iteration] = report["iterations"]
    fixer = iteration["fixer"]
    iter_dir = run_dir / "fix" / "iter-1"
    events = [json.loads(line) for line in (iter_dir / "transcript.log").read_text().splitlines() if line.startswith("{")]
    assert events and events[-1]["event"] in ("finish", "stopped", "error")
    decisions = [json.loads(line) for line in (iter_dir / "proxy.log").read_text().splitlines() if line.startswith("{")]
    used = [d for d in decisions if "decision" in d]
    assert used and {d["target"] for d in used} == {"llm:13305"} and {d["decision"] for d in used} == {"allowed"}
    if not fixer["changed_files"]:
        assert "no_change" in fixer["problems"] and iteration["run_dir"] is None
    if events[-1]["event"] != "finish":
        assert "fixer_failed" in fixer["problems"]
    assert fixer["outside_writes"] == [] or "wrote_outside_workspace" in fixer["problems"]
    assert tree_hash(AGENTS) == repaired["before"]
    print("\nbundled model as fixer:", fixer["problems"], events[-1])


def test_scope_gaia_exposes_gaia_source_and_returns_its_own_diff(repaired: dict, llm: tuple[str, str],
                                                                  tmp_path: Path) -> None:
    run_dir = _phase_a_copy(repaired, tmp_path)
    edit = "test -f gaia_src/gaia/version.py && echo '# touched by the fixer' >> gaia_src/gaia/version.py"
    code, output = _fix(llm, tmp_path / "unused", "--from", str(run_dir), "--scope", "gaia", "--fixer", "command",
                        "--fixer-cmd", edit, "--max-iterations", "1")
    assert code == 1, output
    iter_dir = run_dir / "fix" / "iter-1"
    report = json.loads((run_dir / "fix" / "fix.json").read_text())
    [iteration] = report["iterations"]
    assert iteration["fixer"]["gaia_changed_files"] == ["gaia/version.py"]
    assert iteration["fixer"]["problems"] == [] and iteration["run_dir"] is None
    assert (iter_dir / "patch.diff").read_text() == ""  # the agent directory's patch: nothing
    gaia_diff = (iter_dir / "gaia.diff").read_text()
    assert "+++ b/gaia/version.py" in gaia_diff and "+# touched by the fixer" in gaia_diff
    assert "gaia.diff" in (run_dir / "fix" / "summary.md").read_text()
