"""`trialbox rescore` as a user runs it: a real process over a run folder, and its exit code.

The run folder is written by the real writer (run.json from RunSettings, traces/ from
RunWriter) with conversations chosen here, over tests/fixtures/engine_suite; no sandbox and
no LLM are needed, because rescoring never talks to the agent. The exit codes are those of
`runner.run.errors`: 1 when `--min-pass-rate` (saved in run.json) is not met, 3 when every result
is an infrastructure failure or the rescore is interrupted.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from runner.records.status import Status
from runner.records.transcript import IndexedDocument, Transcript, TurnPerformance, TurnRecord
from runner.report import (
    RunConfig,
    RunWriter,
    ScenarioResult,
    Trace,
    declared_order,
    read_scorecard,
)
from runner.run.errors import EXIT_INFRA, EXIT_OK, EXIT_QUALITY
from runner.run.settings import RunSettings, new_run_id
from runner.scenarios import Scenario, load_suite

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "fixtures" / "engine_suite"
RIGHT = "340 litres; Marta Ilves; 12,600 kg; 14 batches"  # every fact the fixture asks for
WRONG = "I could not find that in the documents."


def fixture_scenarios() -> dict[str, Scenario]:
    suite = load_suite([SUITE / "scenarios"], SUITE / "corpus")
    assert not suite.errors, suite.errors
    return {s.id: s for s in suite.scenarios}


def conversation(scenario: Scenario, answer: str) -> Transcript:
    return Transcript(
        scenario_id=scenario.id,
        indexed=[IndexedDocument(corpus_doc=d.corpus_doc, path=d.path, chunks=3)
                 for d in scenario.setup_documents],
        turns=[TurnRecord(turn=t.turn, user_message=t.user_message or t.objective, answer=answer,
                          performance=TurnPerformance(wall_s=1.0)) for t in scenario.turns],
    )


def saved_run(tmp_path: Path, traces: dict[str, Transcript | None], **settings: object) -> Path:
    """A finished run of `traces` (scenario id → conversation; None: no conversation, the
    scenario ended in INFRA_ERROR), as `trialbox run` leaves it on disk."""
    run = RunSettings(run_id=new_run_id(), suite_paths=[SUITE / "scenarios"], corpus_root=SUITE / "corpus",
                      results_root=tmp_path / "results", judge_provider="none", **settings)
    run.run_dir.mkdir(parents=True)
    run.save(run.run_dir)
    writer = RunWriter(run.run_dir, run_id=run.run_id, config=RunConfig(), order=declared_order(list(traces)))
    for scenario_id, transcript in traces.items():
        status = Status.NOT_JUDGED if transcript else Status.INFRA_ERROR
        error = None if transcript else "Agent UI did not answer /api/health within 120 s"
        writer.add(Trace(run_id=run.run_id, result=ScenarioResult(id=scenario_id, status=status, error=error),
                         transcript=transcript))
    writer.close()
    return run.run_dir


def rescore(run_dir: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "runner.cli", "rescore", str(run_dir), *args],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "ANTHROPIC_API_KEY": "", "TRIALBOX_JUDGE_URL": "", "COLUMNS": "200"},
    )


def finished(process: subprocess.Popen[str]) -> tuple[int, str]:
    output, _ = process.communicate(timeout=120)
    return process.returncode, output


@pytest.mark.parametrize(("min_pass_rate", "expected"), [(0.9, EXIT_QUALITY), (0.5, EXIT_OK)])
def test_min_pass_rate_saved_with_the_run_decides_the_rescore_exit_code(
    tmp_path: Path, min_pass_rate: float, expected: int
) -> None:
    scenarios = fixture_scenarios()
    run_dir = saved_run(tmp_path, {"orchard_apples": conversation(scenarios["orchard_apples"], RIGHT),
                                   "lighthouse_fuel": conversation(scenarios["lighthouse_fuel"], WRONG)},
                        min_pass_rate=min_pass_rate)
    code, output = finished(rescore(run_dir, "--judge-provider", "none"))
    assert code == expected, output
    verdict = "NOT met" if expected == EXIT_QUALITY else "met"
    assert f"quality gate: checks pass rate 50% vs --min-pass-rate {min_pass_rate:.0%}: {verdict}" in output
    # No judge: the gate holds the checks pass rate (one of the two passed its exact checks).
    [rescored] = [folder for folder in run_dir.parent.iterdir() if folder != run_dir]
    summary = read_scorecard(rescored / "scorecard.json").summary
    assert summary.judged == 0 and summary.checks_pass_rate == 0.5


def test_a_run_where_everything_was_infrastructure_rescoring_exits_3(tmp_path: Path) -> None:
    run_dir = saved_run(tmp_path, {"orchard_apples": None, "lighthouse_fuel": None})
    code, output = finished(rescore(run_dir, "--judge-provider", "none"))
    assert code == EXIT_INFRA, output
    assert "Traceback" not in output


def test_ctrl_c_during_a_rescore_exits_3_naming_the_partial_folder_without_a_traceback(tmp_path: Path) -> None:
    """The judge is an address that accepts connections and never answers, so the rescore is
    certainly under way (waiting on its judge) when the signal arrives."""
    scenarios = fixture_scenarios()
    run_dir = saved_run(tmp_path, {"orchard_apples": conversation(scenarios["orchard_apples"], RIGHT)})
    silent = socket.create_server(("127.0.0.1", 0))
    asked = threading.Event()
    held: list[socket.socket] = []

    def hold_connections() -> None:
        while True:
            try:
                connection, _ = silent.accept()
            except OSError:  # closed at the end of the test
                return
            held.append(connection)
            asked.set()

    threading.Thread(target=hold_connections, daemon=True).start()
    port = silent.getsockname()[1]
    process = rescore(run_dir, "--judge-provider", "openai", "--judge-url", f"http://127.0.0.1:{port}/v1",
                      "--judge-model", "silent-judge")
    try:
        assert asked.wait(timeout=60), "the rescore never asked its judge"
        process.send_signal(signal.SIGINT)
        code, output = finished(process)
    finally:
        process.kill()
        silent.close()
        for connection in held:
            connection.close()
    assert code == EXIT_INFRA, output
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
    assert "interrupted" in output and "partial rescore in" in output, output
