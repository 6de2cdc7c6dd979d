"""RunWriter and atomic writes: a results folder is readable at every moment of a run."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_report import JUDGE, WHEN, failing, infra, judgments, passing, transcript

from runner.records.status import Status
from runner.report import RunWriter, Scorecard, Trace, atomic_write, read_scorecard, trace_of


def trace(result) -> Trace:
    return trace_of(
        "run-1",
        result,
        transcript=transcript(result.id),
        judgments=judgments(),
        evidence={"tool_calls": {"1": ["query_documents"]}},
    )


def writer(tmp_path: Path) -> RunWriter:
    return RunWriter(tmp_path / "run-1", run_id="run-1", config=JUDGE, clock=lambda: WHEN)


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob("*.tmp")]


def test_each_finished_scenario_leaves_a_complete_readable_folder(tmp_path):
    w = writer(tmp_path)
    path = w.add(trace(passing()))
    run = tmp_path / "run-1"
    assert path == run / "traces" / "budget_lookup.json"

    # Half-way through the run: every file is already there and parses.
    card = read_scorecard(run / "scorecard.json")
    assert not card.finished and [r.id for r in card.scenarios] == ["budget_lookup"]
    assert ET.parse(run / "junit.xml").getroot().get("tests") == "1"
    assert "## Summary" in (run / "summary.md").read_text()
    assert "budget_lookup" in (run / "report.html").read_text()
    saved = Trace.model_validate_json(path.read_text())
    assert saved.transcript is not None and saved.evidence["tool_calls"]["1"] == ["query_documents"]

    w.add(trace(failing()))
    w.add(trace(infra("m1", Status.TIMEOUT)))
    final = w.close()
    card = read_scorecard(run / "scorecard.json")
    assert card == final and card.finished
    assert card.summary.total_scenarios == 3 and card.timestamp == WHEN
    assert sorted(p.name for p in (run / "traces").iterdir()) == [
        "budget_lookup.json",
        "budget_wrong.json",
        "m1.json",
    ]
    assert leftovers(run) == []


def test_trial_traces_get_their_own_files(tmp_path):
    w = writer(tmp_path)
    w.add(trace(passing(trial=1)))
    w.add(trace(passing(trial=2)))
    names = sorted(p.name for p in (tmp_path / "run-1" / "traces").iterdir())
    assert names == ["budget_lookup__trial1.json", "budget_lookup__trial2.json"]


def test_re_adding_a_scenario_replaces_its_row(tmp_path):
    w = writer(tmp_path)
    w.add(trace(infra("budget_lookup", Status.TIMEOUT)))
    w.add(trace(passing()))
    card = w.scorecard()
    assert [(r.id, r.status) for r in card.scenarios] == [("budget_lookup", Status.PASS)]


def test_resume_keeps_finished_results(tmp_path):
    w = writer(tmp_path)
    w.add(trace(passing()))
    again = RunWriter.resume(tmp_path / "run-1")
    assert again.done_keys() == {"budget_lookup"} and again.run_id == "run-1"
    again.add(trace(failing()))
    assert read_scorecard(tmp_path / "run-1" / "scorecard.json").summary.total_scenarios == 2


def test_resume_keeps_a_scenario_whose_trace_was_written_but_not_its_scorecard_row(tmp_path):
    # Planted: a kill between add()'s two writes — the trace of the second scenario is on disk,
    # the scorecard still has only the first. Resume must keep it, not run it again.
    w = writer(tmp_path)
    w.add(trace(passing()))
    late = trace(failing())
    late.result.trace = f"traces/{late.result.key}.json"
    atomic_write(tmp_path / "run-1" / late.result.trace, late.model_dump_json(indent=2))
    assert read_scorecard(tmp_path / "run-1" / "scorecard.json").summary.total_scenarios == 1
    (tmp_path / "run-1" / "traces" / "broken.json").write_text("{")  # unreadable: re-run, not kept
    again = RunWriter.resume(tmp_path / "run-1")
    assert again.done_keys() == {passing().key, failing().key}
    card = read_scorecard(tmp_path / "run-1" / "scorecard.json")
    assert {r.key for r in card.scenarios} == {passing().key, failing().key}
    # Null: a folder whose scorecard already holds every trace is resumed unchanged.
    before = (tmp_path / "run-1" / "scorecard.json").read_bytes()
    assert RunWriter.resume(tmp_path / "run-1").done_keys() == {passing().key, failing().key}
    assert (tmp_path / "run-1" / "scorecard.json").read_bytes() == before


def test_atomic_write_replaces_content(tmp_path):
    target = tmp_path / "deep" / "file.json"
    atomic_write(target, "one")
    atomic_write(target, "two")
    assert target.read_text() == "two" and leftovers(tmp_path) == []


def test_a_failed_write_leaves_the_old_file_intact(tmp_path, monkeypatch):
    target = tmp_path / "scorecard.json"
    atomic_write(target, '{"old": true}')

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, '{"new": tru')
    assert json.loads(target.read_text()) == {"old": True}
    assert leftovers(tmp_path) == []


def test_read_scorecard_names_the_file_and_field(tmp_path):
    bad = tmp_path / "scorecard.json"
    data = json.loads(writer(tmp_path).scorecard().model_dump_json())
    data["summary"]["passed"] = "many"
    bad.write_text(json.dumps(data))
    with pytest.raises(ValueError) as error:
        read_scorecard(bad)
    assert str(bad) in str(error.value) and "summary.passed" in str(error.value)
    with pytest.raises(FileNotFoundError, match="no scorecard"):
        read_scorecard(tmp_path / "missing.json")


def test_scorecard_file_is_gaia_shaped(tmp_path):
    w = writer(tmp_path)
    w.add(trace(passing()))
    data = json.loads((tmp_path / "run-1" / "scorecard.json").read_text())
    assert {"run_id", "timestamp", "config", "summary", "scenarios", "cost", "performance"} <= set(
        data
    )
    assert {
        "total_scenarios",
        "passed",
        "failed",
        "blocked",
        "timeout",
        "budget_exceeded",
        "infra_error",
        "skipped",
        "errored",
        "pass_rate",
        "judged_pass_rate",
        "avg_score",
        "by_category",
    } <= set(data["summary"])
    assert "estimated_total_usd" in data["cost"]
    assert Scorecard.model_validate(data).scenarios[0].status is Status.PASS


def test_every_write_refreshes_scorecard_gaia_json_with_the_same_rows(tmp_path):
    w = writer(tmp_path)
    run = tmp_path / "run-1"
    for count, result in enumerate([passing(), failing(), infra("m1", Status.TIMEOUT)], 1):
        w.add(trace(result))
        gaia = json.loads((run / "scorecard.gaia.json").read_text())
        ours = read_scorecard(run / "scorecard.json")
        assert [r["scenario_id"] for r in gaia["scenarios"]] == [r.id for r in ours.scenarios]
        assert len(gaia["scenarios"]) == count
        assert [r["status"] for r in gaia["scenarios"]] == [r.status.value for r in ours.scenarios]
    assert leftovers(run) == []


def test_a_failed_gaia_write_keeps_the_previous_gaia_file(tmp_path, monkeypatch):
    w = writer(tmp_path)
    w.add(trace(passing()))
    run = tmp_path / "run-1"
    real_replace = os.replace

    def refuse_gaia(src, dst):
        if str(dst).endswith("scorecard.gaia.json"):
            raise OSError("disk full")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", refuse_gaia)
    with pytest.raises(OSError, match="disk full"):
        w.add(trace(failing()))
    gaia = json.loads((run / "scorecard.gaia.json").read_text())
    assert [r["scenario_id"] for r in gaia["scenarios"]] == ["budget_lookup"]
    assert leftovers(run) == []
