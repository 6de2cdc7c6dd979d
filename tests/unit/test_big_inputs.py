"""Big is bounded and fast: inputs of any size end in a result or one stated refusal, quickly.

Run as a user runs them — the real CLI in a subprocess — over real files: a run folder written by
the real writer (tests/unit/test_rescore_cli.saved_run, no sandbox or LLM needed), a copy of the
engine fixture's corpus with one document replaced by a 20 GB sparse file, and `/` as a corpus.
The clocks allow for the CLI's own start-up on a loaded two-core machine (several seconds);
what they catch is minutes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from test_rescore_cli import (
    RIGHT,
    SUITE,
    conversation,
    finished,
    fixture_scenarios,
    rescore,
    saved_run,
)

from runner.records.transcript import TurnPerformance, TurnRecord
from runner.report._load import TRACE_TURNS
from runner.run.errors import EXIT_OK, EXIT_USAGE
from runner.system.digests import CORPUS_DOCUMENT_BYTES

ROOT = Path(__file__).resolve().parents[2]


def run_with_turns(tmp_path: Path, turns: int) -> Path:
    """A finished run whose one trace holds `turns` turns."""
    scenarios = fixture_scenarios()
    scenario_id = sorted(scenarios)[0]
    transcript = conversation(scenarios[scenario_id], RIGHT)
    transcript.turns = [TurnRecord(turn=k + 1, user_message="How much fuel?", answer=RIGHT,
                                   performance=TurnPerformance(wall_s=1.0)) for k in range(turns)]
    return saved_run(tmp_path, {scenario_id: transcript})


def errors_in(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def test_a_20000_turn_trace_is_refused_by_the_stated_turn_limit_in_seconds(tmp_path: Path) -> None:
    run = run_with_turns(tmp_path, 20_000)
    began = time.perf_counter()
    code, output = finished(rescore(run))
    took = time.perf_counter() - began
    assert code == EXIT_USAGE, output
    assert "Traceback" not in output
    [line] = errors_in(output)
    assert "transcript.turns: 20000 turns" in line and f"the {TRACE_TURNS} a trace may hold" in line
    assert took < 60, f"refusing took {took:.1f} s"  # it took 314 s to rescore before the limit


def test_a_trace_at_the_turn_limit_is_rescored(tmp_path: Path) -> None:
    run = run_with_turns(tmp_path, TRACE_TURNS)
    code, output = finished(rescore(run))
    assert code == EXIT_OK, output
    assert "Traceback" not in output and not errors_in(output)


def validate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runner.cli", "validate", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})


def test_a_corpus_document_past_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SUITE / "corpus", corpus)
    document = corpus / "documents" / "lighthouse_log.md"
    with document.open("r+b") as handle:
        handle.truncate(20 * 2**30)  # sparse: 20 GB to stat, nothing on disk
    assert document.stat().st_size > CORPUS_DOCUMENT_BYTES
    began = time.perf_counter()
    done = validate(str(SUITE / "scenarios"), "--corpus", str(corpus))
    took = time.perf_counter() - began
    assert done.returncode == EXIT_USAGE, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    [line] = [line for line in done.stdout.splitlines() if "lighthouse_log.md is" in line]
    assert "21,474,836,480 bytes" in line and "refused unread" in line
    assert took < 30, f"validate took {took:.1f} s"  # hashing it took past a minute


def test_validate_with_the_root_of_the_file_system_as_corpus_is_one_line_and_exit_2() -> None:
    began = time.perf_counter()
    done = validate("--corpus", "/")
    took = time.perf_counter() - began
    assert done.returncode == EXIT_USAGE, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    problems = [line for line in done.stdout.splitlines() if line.startswith("/")]
    assert problems == ["/manifest.json: corpus manifest not found — give the corpus folder "
                        "that holds manifest.json (--corpus DIR)"]
    assert took < 30, f"validate took {took:.1f} s"  # it walked the whole file system


def test_a_corpus_holding_a_fifo_a_device_and_links_out_does_not_hang(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SUITE / "corpus", corpus)
    document = corpus / "documents" / "lighthouse_log.md"
    document.unlink()
    os.mkfifo(document)  # a hash of it would wait for a writer for ever
    (corpus / "documents" / "orchard_report.md").unlink()
    (corpus / "documents" / "orchard_report.md").symlink_to("/dev/zero")
    (corpus / "elsewhere").symlink_to("/")  # a walk through it would be the whole machine
    done = validate(str(SUITE / "scenarios"), "--corpus", str(corpus))
    assert done.returncode == EXIT_USAGE, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "lighthouse_log.md' not found" in done.stdout
    assert "orchard_report.md' not found" in done.stdout
