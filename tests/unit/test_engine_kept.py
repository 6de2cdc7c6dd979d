"""A conversation cut short keeps its turns: the engine writes them into the trace with the
status unchanged, a finished one whose containers died afterwards is judged and says so, and a
rescore never judges a cut-short transcript as if it were whole."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from runner.records.status import Status
from runner.records.transcript import Transcript, TurnPerformance, TurnRecord
from runner.report import RunConfig, RunWriter, Trace, declared_order
from runner.run.conversations import ReplayedConversations
from runner.run.engine import Engine
from runner.run.jobs import Job, Outcome
from runner.run.settings import RunSettings
from runner.scenarios import Scenario, load_suite

SUITE = Path(__file__).parents[1] / "fixtures" / "engine_suite"


def suite() -> list[Scenario]:
    return load_suite([SUITE / "scenarios"], SUITE / "corpus").scenarios


def turns(scenario: Scenario, upto: int) -> Transcript:
    return Transcript(scenario_id=scenario.id, turns=[
        TurnRecord(turn=t.turn, user_message=t.user_message or t.objective, answer="340 litres",
                   performance=TurnPerformance(wall_s=0.1)) for t in scenario.turns[:upto]])


class Chosen:
    """Each job's outcome chosen by the test, with its first `upto` turns (the live path, real
    containers, is tests/containers/test_faults.py)."""

    live = False

    def __init__(self, outcome: Outcome, upto: int) -> None:
        self.outcome, self.upto = outcome, upto

    async def prepare(self, jobs: Sequence[Job]) -> None:
        """Nothing to prepare."""

    async def converse(self, job: Job) -> Outcome:
        return replace(self.outcome, transcript=turns(job.scenario, self.upto))

    def interrupted(self, key: str) -> None:
        """No turn is ever under way: each outcome comes whole."""

    async def close(self) -> None:
        """Nothing to release."""


def run(tmp_path: Path, outcome: Outcome, upto: int, run_id: str = "20261130-100000-abcd") -> Path:
    settings = RunSettings(run_id=run_id, suite_paths=[SUITE / "scenarios"], corpus_root=SUITE / "corpus",
                           results_root=tmp_path, selection={"ids": ["orchard_followup"]})
    scenarios = [s for s in suite() if s.id == "orchard_followup"]
    writer = RunWriter(settings.run_dir, run_id=run_id, config=RunConfig(),
                       order=declared_order([s.id for s in scenarios]))
    asyncio.run(Engine(settings, scenarios, Chosen(outcome, upto), None, writer, say=lambda line: None).run())
    return settings.run_dir


def trace(run_dir: Path) -> Trace:
    return Trace.model_validate_json((run_dir / "traces" / "orchard_followup.json").read_text())


def test_a_timeout_keeps_its_turns_and_its_status(tmp_path: Path) -> None:
    run_dir = run(tmp_path, Outcome(infra=Status.TIMEOUT, error="no result within 30 s"), upto=1)
    kept = trace(run_dir)
    assert kept.result.status is Status.TIMEOUT
    assert kept.transcript is not None and [t.turn for t in kept.transcript.turns] == [1]
    raw = json.loads((run_dir / "traces" / "orchard_followup.json").read_text())
    assert raw["transcript"] is not None


def test_a_finished_conversation_with_a_death_after_it_is_scored_and_says_so(tmp_path: Path) -> None:
    died = "SandboxError: the Agent UI container x is exited (exit code 137) mid-scenario"
    run_dir = run(tmp_path, Outcome(after=died), upto=2)
    row = json.loads((run_dir / "scorecard.json").read_text())["scenarios"][0]
    assert row["status"] in {"PASS", "FAIL", "NOT_JUDGED"}, row
    assert f"after the conversation finished: {died}" in row["notes"]
    card = json.loads((run_dir / "scorecard.json").read_text())
    assert any("kept the finished conversation" in w for w in card["warnings"])


def test_without_a_death_after_it_no_note_is_added(tmp_path: Path) -> None:
    run_dir = run(tmp_path, Outcome(), upto=2)
    row = json.loads((run_dir / "scorecard.json").read_text())["scenarios"][0]
    assert not any(n.startswith("after the conversation finished") for n in row["notes"])


def test_rescore_keeps_a_cut_short_status_and_judges_a_whole_one(tmp_path: Path) -> None:
    (scenario,) = [s for s in suite() if s.id == "orchard_followup"]
    cut = trace(run(tmp_path / "a", Outcome(infra=Status.TIMEOUT, error="no result within 30 s"), upto=1))
    whole = trace(run(tmp_path / "b", Outcome(), upto=2))
    job = Job(scenario, None)
    replayed = asyncio.run(ReplayedConversations({job.key: cut}).converse(job))
    assert replayed.infra is Status.TIMEOUT and replayed.transcript is not None
    replayed = asyncio.run(ReplayedConversations({job.key: whole}).converse(job))
    assert replayed.infra is None and replayed.transcript is not None  # judged as usual


class CutOff:
    """A conversation that finishes its first turn and then waits until Ctrl-C cancels it,
    handing its turns so far to the engine as LiveConversations does (`interrupted`)."""

    live = False

    def __init__(self) -> None:
        self.talking = asyncio.Event()
        self.begun: dict[str, Transcript] = {}

    async def prepare(self, jobs: Sequence[Job]) -> None:
        """Nothing to prepare."""

    async def converse(self, job: Job) -> Outcome:
        self.begun[job.key] = turns(job.scenario, 1)
        self.talking.set()
        await asyncio.Event().wait()  # turn 2 never ends
        raise AssertionError("unreachable")

    def interrupted(self, key: str) -> Transcript | None:
        return self.begun.get(key)

    async def close(self) -> None:
        """Nothing to release."""


def test_ctrl_c_mid_conversation_keeps_the_turns_done_and_resume_runs_it_again(
        tmp_path: Path) -> None:
    run_id = "20261203-100000-abcd"
    settings = RunSettings(run_id=run_id, suite_paths=[SUITE / "scenarios"], corpus_root=SUITE / "corpus",
                           results_root=tmp_path, selection={"ids": ["orchard_followup"]})
    scenarios = [s for s in suite() if s.id == "orchard_followup"]
    writer = RunWriter(settings.run_dir, run_id=run_id, config=RunConfig(),
                       order=declared_order([s.id for s in scenarios]))
    source = CutOff()
    engine = Engine(settings, scenarios, source, None, writer, say=lambda line: None)

    async def press_ctrl_c() -> None:
        running = asyncio.create_task(engine.run())
        await source.talking.wait()
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)

    asyncio.run(press_ctrl_c())
    kept = trace(settings.run_dir)
    assert kept.result.status is Status.NOT_RUN and "interrupted (Ctrl-C)" in (kept.result.error or "")
    assert kept.transcript is not None and [t.turn for t in kept.transcript.turns] == [1]
    assert "orchard_followup" not in engine.already_done()  # --resume runs it again, whole
    (scenario,) = scenarios
    job = Job(scenario, None)
    replayed = asyncio.run(ReplayedConversations({job.key: kept}).converse(job))
    assert replayed.infra is Status.NOT_RUN  # rescore never judges the half as a whole


def test_a_key_asked_again_is_run_again_although_recorded(tmp_path: Path) -> None:
    # trialbox ab --resume --retry-errors: the other side's unit of a re-run pair runs again,
    # so the pair is side by side in time once more; its recorded PASS is replaced.
    run_dir = run(tmp_path, Outcome(), upto=2)
    run_id = run_dir.name
    settings = RunSettings(run_id=run_id, suite_paths=[SUITE / "scenarios"], corpus_root=SUITE / "corpus",
                           results_root=tmp_path, selection={"ids": ["orchard_followup"]})
    scenarios = [s for s in suite() if s.id == "orchard_followup"]
    writer = RunWriter(settings.run_dir, run_id=run_id, config=RunConfig(),
                       order=declared_order([s.id for s in scenarios]))
    writer.results = [trace(run_dir).result]
    kept = Engine(settings, scenarios, Chosen(Outcome(), 1), None, writer, say=lambda line: None)
    assert kept.already_done() == {"orchard_followup"} and kept.plan() == []
    again = Engine(settings, scenarios, Chosen(Outcome(), 1), None, writer, say=lambda line: None,
                   again=frozenset({"orchard_followup"}))
    assert [job.key for job in again.plan()] == ["orchard_followup"]
    asyncio.run(again.run())
    assert [t.turn for t in trace(run_dir).transcript.turns] == [1]  # the new run's, not the old
