"""The run as an inspect_ai eval log: written with inspect's own writer, read back with inspect's
own reader and dataframe API, so a log the viewer could not open fails here."""

from __future__ import annotations

import asyncio
import builtins
import json
import os
from pathlib import Path
from typing import Any

import pytest
from inspect_ai.analysis import samples_df
from inspect_ai.log import read_eval_log
from test_report import JUDGE, WHEN, card, failing, infra, judgments, passing, transcript
from typer.testing import CliRunner

from runner.cli.app import app
from runner.records.status import Status
from runner.records.transcript import ToolCall
from runner.report import RunConfig, RunWriter, _writer, trace_of
from runner.report._folder import SCORECARD, atomic_write
from runner.report._inspect import INSPECT_LOG, INSTALL_HINT, eval_log_of, export_run

CONFIG = JUDGE.model_copy(update={
    "served_model": "SmolLM2-135M-Instruct Q4_1 by trialbox llm-cpu", "device": "cpu",
    "trials": 2, "trialbox_version": "0.0-test",
})


def three_by_two() -> list[Any]:
    """3 scenarios × 2 trials: a pass, a failed check, an infrastructure error."""
    rows = []
    for trial in (1, 2):
        rows.append(passing(trial=trial))
        wrong = failing()
        rows.append(wrong.model_copy(update={"trial": trial}))
        rows.append(infra("ui_gone", Status.INFRA_ERROR).model_copy(update={"trial": trial}))
    return rows


def run_folder(tmp_path: Path, rows: list[Any] | None = None) -> Path:
    run = tmp_path / "results" / "run-1"
    scorecard = card(three_by_two() if rows is None else rows, config=CONFIG, finished=True)
    atomic_write(run / SCORECARD, scorecard.model_dump_json(indent=2))
    atomic_write(run / "run.json", json.dumps({"suite_paths": ["eval/scenarios"]}))
    return run


def test_a_three_by_two_run_reads_back_with_inspects_reader_and_dataframe(tmp_path: Path) -> None:
    path = export_run(run_folder(tmp_path))
    assert path.name == INSPECT_LOG

    log = read_eval_log(str(path))
    assert log.status == "success"
    assert log.eval.task == "scenarios"
    assert log.eval.model == CONFIG.served_model
    meta = log.eval.metadata or {}
    assert meta["requested_model"] == "SmolLM2" and meta["device"] == "cpu"
    assert meta["judge"]["model"] == "claude-sonnet-4-6"
    assert log.eval.config.epochs == 2

    frame = samples_df(str(path))
    assert len(frame) == 6
    rows = sorted(zip(frame["id"], frame["epoch"], frame["metadata_status"], strict=True))
    assert rows == [
        ("budget_lookup", 1, "PASS"), ("budget_lookup", 2, "PASS"),
        ("budget_wrong", 1, "FAIL"), ("budget_wrong", 2, "FAIL"),
        ("ui_gone", 1, "INFRA_ERROR"), ("ui_gone", 2, "INFRA_ERROR"),
    ]


def test_an_infrastructure_error_is_a_sample_error_and_no_score(tmp_path: Path) -> None:
    log = read_eval_log(str(export_run(run_folder(tmp_path))))
    assert log.samples is not None
    broken = [s for s in log.samples if s.id == "ui_gone"]
    assert len(broken) == 2
    for sample in broken:
        assert sample.error is not None
        assert sample.error.message == "INFRA_ERROR: the agent UI went away"
        assert not sample.scores  # never a 0 that an average would take in
    frame = samples_df(str(log.location))
    gone = frame[frame["id"] == "ui_gone"]
    assert all(gone["error"].str.startswith("INFRA_ERROR")) and gone["score_status"].isna().all()
    judged = frame[frame["id"] != "ui_gone"]
    assert set(judged["error"].fillna("")) == {""} and set(judged["score_status"]) == {"PASS", "FAIL"}


def test_messages_are_the_conversation_in_order_with_tool_calls_and_results(
    tmp_path: Path,
) -> None:
    result = passing()
    result.turns[0].user_message_source = "simulated"
    result.turns[0].simulator_model = "claude-haiku"
    result.turns[0].tool_calls = [
        ToolCall(name="query_documents", arguments={"query": "travel"}, result_summary="3 hits"),
        ToolCall(name="read_file", arguments={"path": "a.md"}, error="no such file"),
    ]
    log = eval_log_of(card([result], config=CONFIG))
    assert log.samples is not None
    messages = log.samples[0].messages
    assert [m.role for m in messages] == [
        "user", "assistant", "tool", "assistant", "tool", "assistant",  # turn 1
        "user", "assistant", "tool", "assistant",  # turn 2
    ]
    first = messages[0]
    assert first.text == "question 1"
    assert first.metadata == {"turn": 1, "source": "simulated", "simulator_model": "claude-haiku"}
    call = messages[1].tool_calls[0]  # type: ignore[union-attr]
    assert (call.function, call.arguments) == ("query_documents", {"query": "travel"})
    assert messages[2].tool_call_id == call.id and messages[2].text == "3 hits"  # type: ignore[union-attr]
    failed = messages[4]
    assert failed.error is not None and failed.error.message == "no such file"  # type: ignore[union-attr]
    assert messages[5].text == "The total is $412,000."


def test_scores_are_status_rubric_and_one_entry_per_check_and_claim() -> None:
    log = eval_log_of(card([failing()], config=CONFIG))
    assert log.samples is not None
    scores = log.samples[0].scores or {}
    assert scores["status"].value == "FAIL"
    assert scores["rubric"].value == pytest.approx(failing().score)
    assert "turn 1:" in (scores["rubric"].explanation or "")
    check = scores["check 1: answer_contains (t2)"]
    assert check.value == "I" and check.explanation == "missing <412,000> & more"
    claims = {k: v for k, v in scores.items() if k.startswith("claim")}
    assert claims
    assert {v.value for v in claims.values()} == {c.label.value for c in failing().all_claims()}


def test_metadata_carries_category_severity_timings_setup_and_speed() -> None:
    log = eval_log_of(card([passing()], config=CONFIG))
    assert log.samples is not None
    meta = log.samples[0].metadata
    assert (meta["category"], meta["severity"], meta["wall_s"]) == ("rag_quality", "high", 12.5)
    assert meta["turns"][0]["ttft_s"] == 0.1 and meta["turns"][0]["tokens_per_s"] == 100.0


def test_a_run_still_writing_is_a_started_log(tmp_path: Path) -> None:
    log = eval_log_of(card([passing()], config=CONFIG, finished=False))
    assert log.status == "started"


# --- the writer keeps the log in step with the scorecard --------------------------------------


def writer(run: Path, notes: list[str] | None = None, config: RunConfig = CONFIG) -> RunWriter:
    return RunWriter(run, run_id="run-1", config=config, clock=lambda: WHEN,
                     note=None if notes is None else notes.append)


def trace(result: Any) -> Any:
    return trace_of("run-1", result, transcript=transcript(result.id), judgments=judgments())


def test_writing_the_log_from_inside_the_engines_loop_runs_no_other_task(tmp_path: Path) -> None:
    # The engine records a scenario (trace, scorecard, this log) and then applies its stop rule,
    # synchronously, inside its event loop. inspect_ai's writer re-enters a running loop via
    # nest_asyncio; had we let it, a job waiting for a slot ran in the middle of that write and
    # slipped past the stop rule (tests/cluster/test_cluster_faults.py caught it).
    run = tmp_path / "run-1"

    async def record_while_another_task_is_ready() -> list[str]:
        order: list[str] = []

        async def waiting_job() -> None:
            order.append("other task")

        task = asyncio.create_task(waiting_job())  # ready to run at the next chance
        recording = writer(run)
        recording.add(trace(passing()))
        recording.close()  # the run's end writes the log, from inside the loop too
        order.append("recorded")
        await task
        assert not getattr(asyncio.get_running_loop(), "_nest_patched", False)
        return order

    assert asyncio.run(record_while_another_task_is_ready()) == ["recorded", "other task"]
    assert [s.id for s in read_eval_log(str(run / INSPECT_LOG)).samples or []] == ["budget_lookup"]


def test_the_log_is_written_at_the_runs_end_and_on_resume_not_after_every_scenario(
    tmp_path: Path,
) -> None:
    # Rebuilt from every row at each scenario's end, a long run's log cost grew with the square
    # of its length; now the scorecard follows each scenario and the log the run's end.
    run = tmp_path / "run-1"
    w = writer(run)
    w.add(trace(passing()))
    w.add(trace(failing()))
    assert (run / SCORECARD).is_file() and not (run / INSPECT_LOG).exists()

    # Killed here (no close): --resume writes the log from the scorecard before going on.
    again = RunWriter.resume(run)
    resumed = read_eval_log(str(run / INSPECT_LOG))
    assert resumed.status == "started"
    assert sorted(str(s.id) for s in resumed.samples or []) == ["budget_lookup", "budget_wrong"]
    again.add(trace(infra("ui_gone", Status.TIMEOUT)))
    assert len(read_eval_log(str(run / INSPECT_LOG)).samples or []) == 2  # not per scenario
    again.close()
    final = read_eval_log(str(run / INSPECT_LOG))
    assert final.status == "success"
    assert sorted(str(s.id) for s in final.samples or []) == [
        "budget_lookup", "budget_wrong", "ui_gone"
    ]
    assert not list(run.glob(".*.tmp"))


def test_a_long_run_writes_the_log_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[int] = []
    real = _writer.write_inspect_log

    def counting(card: Any, path: Path, **kwargs: Any) -> Path:
        written.append(len(card.scenarios))
        return real(card, path, **kwargs)

    monkeypatch.setattr(_writer, "write_inspect_log", counting)
    w = writer(tmp_path / "run-1")
    for index in range(12):
        w.add(trace(passing().model_copy(update={"id": f"scenario_{index:02d}"})))
    w.close()
    assert written == [12]


# --- without the extra ------------------------------------------------------------------------


@pytest.fixture
def no_inspect(monkeypatch: pytest.MonkeyPatch) -> None:
    """inspect_ai as if not installed: every import of it fails, as in a plain install."""
    real = builtins.__import__

    def refuse(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "inspect_ai" or name.startswith("inspect_ai."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse)
    monkeypatch.setattr("importlib.import_module", lambda name, *a: refuse(name))


def test_without_the_extra_the_run_notes_it_once_and_writes_everything_else(
    tmp_path: Path, no_inspect: None
) -> None:
    run = tmp_path / "run-1"
    notes: list[str] = []
    w = writer(run, notes)
    w.add(trace(passing()))
    w.add(trace(failing()))
    w.close()
    assert notes == [f"note: no {INSPECT_LOG} for this run — {INSTALL_HINT}"]
    assert (run / SCORECARD).is_file() and not (run / INSPECT_LOG).exists()


def test_without_the_extra_export_says_how_to_install_it(tmp_path: Path, no_inspect: None) -> None:
    run = run_folder(tmp_path)
    result = CliRunner().invoke(app, ["export", "inspect", str(run)], env={"COLUMNS": "300"})
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "pip install 'trialbox[inspect]'" in lines[0]
    assert not (run / INSPECT_LOG).exists()


# --- the command --------------------------------------------------------------------------------


def test_export_command_writes_run_id_eval_into_out(tmp_path: Path) -> None:
    run = run_folder(tmp_path)
    out = tmp_path / "logs"
    result = CliRunner().invoke(app, ["export", "inspect", str(run), "--out", str(out)],
                                env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert f"wrote {out / 'run-1.eval'}" in result.output
    assert len(read_eval_log(str(out / "run-1.eval")).samples or []) == 6


def test_export_of_a_folder_without_a_scorecard_is_one_line_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["export", "inspect", str(tmp_path)], env={"COLUMNS": "300"})
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "no scorecard here" in lines[0]


# --- run.json read as any file of ours (issue 34) -------------------------------------------------


def export_exit_and_lines(run: Path, out: Path) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, ["export", "inspect", str(run), "--out", str(out)],
                                env={"COLUMNS": "300"})
    return result.exit_code, result.output.strip().splitlines()


def test_a_run_json_of_the_wrong_shape_is_one_line_exit_2_not_a_traceback(tmp_path: Path) -> None:
    run = run_folder(tmp_path)
    (run / "run.json").write_text(json.dumps({"suite_paths": 5}), encoding="utf-8")
    code, lines = export_exit_and_lines(run, tmp_path / "logs")
    assert code == 2
    assert len(lines) == 1 and "run.json" in lines[0] and "suite_paths" in lines[0]
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
def test_a_run_json_that_is_no_regular_file_is_refused_without_waiting(
        tmp_path: Path, kind: str) -> None:
    run = run_folder(tmp_path)
    (run / "run.json").unlink()
    if kind == "fifo":
        os.mkfifo(run / "run.json")  # opened for reading, it would wait for a writer for ever
    else:
        (run / "run.json").symlink_to("/dev/zero")  # endless
    code, lines = export_exit_and_lines(run, tmp_path / "logs")
    assert code == 2
    assert len(lines) == 1 and "run.json" in lines[0]


def test_without_run_json_the_suite_is_called_trialbox(tmp_path: Path) -> None:
    run = run_folder(tmp_path)
    (run / "run.json").unlink()
    code, lines = export_exit_and_lines(run, tmp_path / "logs")
    assert code == 0, lines
    assert read_eval_log(str(tmp_path / "logs" / "run-1.eval")).eval.task == "trialbox"


def test_the_judges_url_in_the_log_hides_its_user_name_and_password() -> None:
    config = CONFIG.model_copy(update={"judge_url": "http://user:SECRET@127.0.0.1:9/v1"})
    log = eval_log_of(card([passing()], config=config, finished=True))
    assert (log.eval.metadata or {})["judge"]["url"] == "http://***@127.0.0.1:9/v1"
