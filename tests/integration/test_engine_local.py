"""`trialbox run --backend local` end to end: the real llm-cpu server, the real GAIA Agent UI and
its MCP bridge as host processes, our engine, and the results folder on disk.

Each test runs the real command line in a subprocess (as a user would) on the small fixture
suite in tests/fixtures/engine_suite, with no judge: verdicts are NOT_JUDGED and the checks and
performance are still recorded.
"""

from __future__ import annotations

import errno
import json
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "fixtures" / "engine_suite"
DECLARED = ["orchard_followup", "lighthouse_fuel", "orchard_apples"]  # suite order (sorted paths)


def trialbox(results: Path, llm_url: str, *args: str) -> list[str]:
    return [
        sys.executable, "-m", "runner.cli", "run", str(SUITE / "scenarios"),
        "--corpus", str(SUITE / "corpus"), "--backend", "local", "--device", "cpu",
        "--llm-url", llm_url, "--judge-provider", "none", "--simulator", "scripted",
        "--results", str(results), *args,
    ]  # fmt: skip


def run_cli(results: Path, llm_url: str, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(trialbox(results, llm_url, *args), cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=_env())


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.pop("ANTHROPIC_API_KEY", None)
    env.pop("TRIALBOX_JUDGE_URL", None)
    return env


def only_run(results: Path) -> Path:
    runs = [p for p in results.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def scorecard(run_dir: Path) -> dict:
    return json.loads((run_dir / "scorecard.json").read_text())


def gaia_processes() -> set[str]:
    """This checkout's Agent UI / MCP bridge processes alive now (pid and args); GAIA processes
    inside containers (other runs on the same machine) show up in `ps` too and are left out."""
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    ours = str(ROOT / ".venv-gaia")
    return {line.strip() for line in out.splitlines()
            if ours in line and ("gaia.ui.server" in line or "agent_ui_mcp" in line)}


@pytest.fixture(scope="module")
def three_scenarios(tmp_path_factory: pytest.TempPathFactory, llm_url: str, gaia_python: Path) -> Path:
    """One run of the whole fixture suite, two sandboxes at a time."""
    results = tmp_path_factory.mktemp("results")
    before = gaia_processes()
    done = run_cli(results, llm_url, "--concurrency", "2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # Two local sandboxes at once share 127.0.0.1 at the front door: said once, not measured.
    assert done.stdout.count("cannot time each one's turns") == 1, done.stdout[-3000:]
    assert gaia_processes() <= before, "sandbox processes outlived the run"
    return only_run(results)


def test_a_scenario_runs_end_to_end_without_a_judge(three_scenarios: Path) -> None:
    card = scorecard(three_scenarios)
    assert card["finished"] is True
    result = next(s for s in card["scenarios"] if s["id"] == "lighthouse_fuel")
    # No judge: the exact checks decide — any failed check is a FAIL, all passing stays NOT_JUDGED.
    checks = result["checks"] + [c for t in result["turns"] for c in t["checks"]]
    failed = [c for c in checks if not c["passed"]]
    assert result["status"] == ("FAIL" if failed else "NOT_JUDGED"), failed
    assert result["score"] is None
    assert [t["turn"] for t in result["turns"]] == [1, 2]
    for turn in result["turns"]:
        assert turn["answer"].strip(), "the LLM server gave no answer"
        assert turn["performance"]["wall_s"] > 0
        assert turn["performance"]["source"] != "front_door"  # mixed with its neighbour's calls
    assert {c["type"] for c in result["checks"]} == {"documents_indexed"}
    assert result["checks"][0]["passed"] is True  # the log was indexed into ≥ 1 chunk
    assert any(c["type"] == "answer_number" for c in result["turns"][0]["checks"])

    trace = json.loads((three_scenarios / result["trace"]).read_text())
    assert trace["transcript"]["indexed"][0]["chunks"] >= 1
    assert trace["transcript"]["device"] == "cpu"
    artifacts = three_scenarios / "artifacts" / "lighthouse_fuel"
    for name in ("gaia_chat.db", "agent-ui.log", "mcp.log", "llm-stats.json"):
        assert (artifacts / name).is_file(), name
    assert "NOT_JUDGED" in (three_scenarios / "summary.md").read_text()
    ET.parse(three_scenarios / "junit.xml")


def test_results_keep_the_declared_order_under_concurrency(three_scenarios: Path) -> None:
    assert [s["id"] for s in scorecard(three_scenarios)["scenarios"]] == DECLARED


def test_each_sandbox_sees_only_its_own_documents_and_messages(three_scenarios: Path) -> None:
    def chat_text(scenario_id: str) -> str:
        db = sqlite3.connect(three_scenarios / "artifacts" / scenario_id / "gaia_chat.db")
        try:
            rows = db.execute("SELECT content FROM messages").fetchall()
            docs = db.execute("SELECT * FROM documents").fetchall()
        finally:
            db.close()
        return " ".join(str(r) for r in rows + docs).lower()

    lighthouse, orchard = chat_text("lighthouse_fuel"), chat_text("orchard_apples")
    assert "kerosene" in lighthouse and "orchard" not in lighthouse and "cider" not in lighthouse
    assert "cider" in orchard and "kerosene" not in orchard and "lighthouse" not in orchard


def test_resume_runs_only_what_is_missing(three_scenarios: Path, tmp_path: Path, llm_url: str) -> None:
    run_dir = tmp_path / three_scenarios.name
    shutil.copytree(three_scenarios, run_dir)
    card = scorecard(run_dir)
    card["scenarios"] = [s for s in card["scenarios"] if s["id"] != "orchard_apples"]
    (run_dir / "scorecard.json").write_text(json.dumps(card))
    # Missing means never finished: no row and no trace (a trace without its row is a finished
    # scenario whose scorecard write was cut short, and resume keeps it — tests/unit/
    # test_report_writer.py).
    for trace in (run_dir / "traces").glob("orchard_apples*.json"):
        trace.unlink()
    # A kept row's log as a full disk left it in an older trialbox: flagged, not kept as evidence.
    (run_dir / "artifacts" / "lighthouse_fuel" / "agent-ui.log").write_bytes(b"")
    done = subprocess.run([sys.executable, "-m", "runner.cli", "run", "--resume", str(run_dir)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, env=_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ran = re.findall(r"^[A-Z_]+ +(\S+)  \(", done.stdout, flags=re.MULTILINE)  # progress lines
    assert ran == ["orchard_apples"], done.stdout[-3000:]
    assert [s["id"] for s in scorecard(run_dir)["scenarios"]] == DECLARED
    assert "resume: 1 damaged artifact(s) of 1 kept scenario(s) removed" in done.stdout
    kept = next(s for s in scorecard(run_dir)["scenarios"] if s["id"] == "lighthouse_fuel")
    assert any(n.startswith("artifact agent-ui.log was damaged (0 bytes)") for n in kept["notes"])
    assert not (run_dir / "artifacts" / "lighthouse_fuel" / "agent-ui.log").exists()


def test_a_dead_llm_server_ends_the_run_before_any_sandbox(tmp_path: Path, gaia_python: Path) -> None:
    # The engine asks the LLM server before each sandbox: with nothing listening, no sandbox is
    # started, every job is NOT_RUN and the run exits 3 with one clear line. (The
    # identical-errors stop rule itself is pinned down in tests/unit/test_engine.py.)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead_llm = f"http://127.0.0.1:{sock.getsockname()[1]}"  # nothing listens here
    done = run_cli(tmp_path, dead_llm, "-s", "lighthouse_fuel", "--trials", "5")
    assert done.returncode == 3, done.stdout[-3000:]
    statuses = [s["status"] for s in scorecard(only_run(tmp_path))["scenarios"]]
    assert statuses == ["NOT_RUN"] * 5, statuses
    assert "the LLM server stopped answering" in done.stdout


def test_a_scenario_over_its_timeout_is_timeout(tmp_path: Path, llm_url: str, gaia_python: Path) -> None:
    before = gaia_processes()
    done = run_cli(tmp_path, llm_url, "-s", "orchard_apples", "--timeout", "1")
    assert done.returncode == 3
    assert [s["status"] for s in scorecard(only_run(tmp_path))["scenarios"]] == ["TIMEOUT"]
    assert gaia_processes() <= before


def test_interrupt_leaves_a_partial_scorecard_and_no_processes(
    tmp_path: Path, llm_url: str, gaia_python: Path
) -> None:
    before = gaia_processes()
    process = subprocess.Popen(trialbox(tmp_path, llm_url), cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=_env())
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not list(tmp_path.glob("*/traces/*.json")):
        time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 3, output[-3000:]
    assert "--resume" in output
    card = scorecard(only_run(tmp_path))
    statuses = [s["status"] for s in card["scenarios"]]
    assert card["finished"] is True and len(statuses) == 3
    assert "NOT_RUN" in statuses and {"NOT_JUDGED", "FAIL"} & set(statuses), statuses
    assert gaia_processes() <= before


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 MB tmpfs of its own: a results disk this test may fill without touching the
    machine's (mount needs root, as CI has; a layer that cannot run fails, it does not skip)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,mode=0755", "trialbox-test", str(disk)],
                   check=True, capture_output=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Write one file until the disk says it is full; the file is the space to give back."""
    filler = disk / "filler"
    chunk = b"\0" * (1 << 20)
    with filler.open("wb", buffering=0) as handle:
        try:
            while True:
                handle.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    # Top up the last partial block, so not even a small file fits.
    with filler.open("ab", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 512)
        except OSError:
            pass
    return filler


def test_a_results_disk_that_fills_mid_run_says_so_in_one_line_and_resumes_whole(
    small_disk: Path, llm_url: str, gaia_python: Path
) -> None:
    # Issue 34's fault as a user meets it: --results on a small disk that fills after the
    # first scenario's trace. The run ends with one line (exit 3), no traceback; once space is
    # given back, --resume finishes the run and no artifact left in the folder is cut short.
    process = subprocess.Popen(trialbox(small_disk, llm_url), cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=_env())
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not list(small_disk.glob("*/traces/*.json")):
        assert process.poll() is None, process.communicate()[0][-3000:]
        time.sleep(0.2)
    filler = fill(small_disk)
    output, _ = process.communicate(timeout=600)
    assert process.returncode == 3, output[-3000:]
    full_lines = [line for line in output.splitlines() if "No space left on device" in line]
    assert len(full_lines) == 1, output[-3000:]
    assert full_lines[0].startswith("error: cannot write ") and full_lines[0].endswith(
        "— free space on that disk or write elsewhere"), full_lines
    assert "Traceback" not in output and "Task exception" not in output, output[-3000:]

    filler.unlink()
    run_dir = only_run(small_disk)
    done = subprocess.run([sys.executable, "-m", "runner.cli", "run", "--resume", str(run_dir)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, env=_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    card = scorecard(run_dir)
    assert card["finished"] is True
    assert [s["id"] for s in card["scenarios"]] == DECLARED
    assert {s["status"] for s in card["scenarios"]} <= {"NOT_JUDGED", "FAIL"}, card["scenarios"]
    from runner.run.resume import damage_of

    left = {str(p.relative_to(run_dir)): damage_of(p) for p in run_dir.rglob("*") if p.is_file()}
    assert {name: why for name, why in left.items() if why} == {}, left
    assert not [name for name in left if name.endswith(".tmp")], left  # no half-written file kept
