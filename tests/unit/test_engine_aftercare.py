"""Nothing after the answer on the scenario's clock: a used sandbox is left (artifacts
collected, sandbox removed) after its row is recorded, in the background, in order, at most
two at once; the run's final write waits for every one; what fails while leaving is written
into the row. The conversation source is a double whose ``leave`` the test controls (the real
Docker sandbox under the same engine is tests/containers/test_warm_pool_docker.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from runner.records.transcript import SetupTimings, Transcript, TurnPerformance, TurnRecord
from runner.report import RunConfig, RunWriter, Trace, declared_order
from runner.run.aftercare import AFTERCARE_PLACES, Aftercare, leave_sandbox
from runner.run.engine import Engine
from runner.run.jobs import Job, Left, Outcome
from runner.run.settings import RunSettings
from runner.scenarios import Scenario, load_suite

SUITE = Path(__file__).parents[1] / "fixtures" / "engine_suite"
RUN_ID = "20261201-140000-aftr"


def suite() -> list[Scenario]:
    loaded = load_suite([SUITE / "scenarios"], SUITE / "corpus")
    assert not loaded.errors, loaded.errors
    return loaded.scenarios


def finished(scenario: Scenario) -> Transcript:
    return Transcript(scenario_id=scenario.id, setup=SetupTimings(session_s=0.1), turns=[
        TurnRecord(turn=t.turn, user_message=t.user_message or t.objective, answer="340 litres",
                   performance=TurnPerformance(wall_s=0.1)) for t in scenario.turns])


class Leaving:
    """Each job's conversation finishes at once; leaving its sandbox is what the test says:
    ``leave(job)`` returns the coroutine function the engine is handed."""

    live = False

    def __init__(self, leave: Any) -> None:
        self.leave = leave
        self.started: list[str] = []

    async def prepare(self, jobs: Sequence[Job]) -> None:
        """Nothing to prepare."""

    async def converse(self, job: Job) -> Outcome:
        self.started.append(job.key)
        return Outcome(transcript=finished(job.scenario), leave=self.leave(job))

    def interrupted(self, key: str) -> None:
        """No turn is ever under way: each outcome comes whole."""

    async def close(self) -> None:
        """Nothing to release."""


def engine(tmp_path: Path, conversations: Leaving, trials: int = 1) -> tuple[Engine, RunSettings]:
    settings = RunSettings(run_id=RUN_ID, suite_paths=[SUITE / "scenarios"], corpus_root=SUITE / "corpus",
                           results_root=tmp_path, selection={"ids": ["lighthouse_fuel"]}, trials=trials)
    scenarios = [s for s in suite() if s.id == "lighthouse_fuel"]
    writer = RunWriter(settings.run_dir, run_id=RUN_ID, config=RunConfig(),
                       order=declared_order([s.id for s in scenarios]))
    return Engine(settings, scenarios, conversations, None, writer, say=lambda line: None), settings


def card(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "scorecard.json").read_text())  # type: ignore[no-any-return]


def key_of(row: dict[str, Any]) -> str:
    return str(row["id"]) + (f"__trial{row['trial']}" if row.get("trial") is not None else "")


def trace(run_dir: Path, key: str = "lighthouse_fuel") -> Trace:
    return Trace.model_validate_json((run_dir / "traces" / f"{key}.json").read_text())


async def settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


def test_the_row_is_recorded_before_leaving_and_the_final_write_waits_for_it(tmp_path: Path) -> None:
    may_finish = asyncio.Event()

    def leave(job: Job) -> Any:
        async def collect_then_remove() -> Left:
            await may_finish.wait()
            dest = tmp_path / "runs" / RUN_ID / "artifacts" / job.key
            dest.mkdir(parents=True)
            (dest / "agent-ui.log").write_text("log\n")
            return Left([], 0.25)
        return collect_then_remove

    async def scenario() -> None:
        run, settings = engine(tmp_path / "runs", Leaving(leave))
        task = asyncio.create_task(run.run())
        await settle()
        # Recorded (its wall time without the leaving), the run not finished: it waits.
        recorded = card(settings.run_dir)
        assert [key_of(r) for r in recorded["scenarios"]] == ["lighthouse_fuel"]
        assert recorded["finished"] is False and not task.done()
        assert trace(settings.run_dir).artifacts == []
        may_finish.set()
        final = await task
        assert final.finished
        kept = trace(settings.run_dir)
        assert kept.artifacts == ["artifacts/lighthouse_fuel/agent-ui.log"]
        assert kept.transcript is not None and kept.transcript.setup is not None
        assert kept.transcript.setup.teardown_s == 0.25 and kept.result.setup is not None
        assert kept.result.setup.teardown_s == 0.25
        assert not any(n.startswith("after the conversation") for n in kept.result.notes)

    asyncio.run(scenario())


class CrashingBox:
    """A sandbox whose artifact collection crashes outright (not a problem it could name)."""

    async def collect(self, dest: Path) -> list[str]:
        raise KeyError("State")


def test_a_collect_that_fails_or_crashes_is_written_into_the_row_and_the_sandbox_still_goes(tmp_path: Path) -> None:
    removed: list[str] = []

    def leave(job: Job) -> Any:
        async def remove() -> None:
            removed.append(job.key)
        if job.trial == 1:  # a failure the collector names
            return lambda: _named_failure()
        return partial(leave_sandbox, CrashingBox(), tmp_path / "runs" / RUN_ID / "artifacts" / job.key, remove)

    async def _named_failure() -> Left:
        return Left(["artifacts not collected: gaia_chat.db: the Agent UI container is exited"], 0.1)

    run, settings = engine(tmp_path / "runs", Leaving(leave), trials=2)
    asyncio.run(run.run())
    rows = {key_of(r): r for r in card(settings.run_dir)["scenarios"]}
    assert ("after the conversation finished: artifacts not collected: gaia_chat.db: the Agent UI "
            "container is exited") in rows["lighthouse_fuel__trial1"]["notes"]
    assert ("after the conversation finished: collecting the artifacts crashed: KeyError: 'State'"
            in rows["lighthouse_fuel__trial2"]["notes"])
    assert removed == ["lighthouse_fuel__trial2"]  # removed after the crash all the same
    assert rows["lighthouse_fuel__trial2"]["status"] == rows["lighthouse_fuel__trial1"]["status"] != "INFRA_ERROR"
    assert any("collecting the artifacts crashed" in w for w in card(settings.run_dir)["warnings"])
    # The trace says it too (the row was written again, not only the scorecard).
    assert any("crashed" in n for n in trace(settings.run_dir, "lighthouse_fuel__trial2").result.notes)


def test_leaving_goes_in_order_at_most_two_at_once_and_the_next_job_waits_for_a_place(tmp_path: Path) -> None:
    began: list[str] = []
    releases: dict[str, asyncio.Event] = {}
    at_once = {"now": 0, "most": 0}

    def leave(job: Job) -> Any:
        releases[job.key] = asyncio.Event()

        async def collect_then_remove() -> Left:
            began.append(job.key)
            at_once["now"] += 1
            at_once["most"] = max(at_once["most"], at_once["now"])
            await releases[job.key].wait()
            at_once["now"] -= 1
            return Left([], 0.0)
        return collect_then_remove

    async def scenario() -> None:
        conversations = Leaving(leave)
        run, settings = engine(tmp_path / "runs", conversations, trials=5)
        task = asyncio.create_task(run.run())
        await settle()
        keys = [f"lighthouse_fuel__trial{n}" for n in range(1, 6)]
        # Two being left, a third handed in and waiting for its turn: the fourth job waits.
        assert began == keys[:2] and conversations.started == keys[:3]
        assert len(card(settings.run_dir)["scenarios"]) == 3  # the third row is recorded already
        releases[keys[1]].set()  # the second finishes first: the third takes its place
        await settle()
        assert began == keys[:3] and conversations.started == keys[:4]
        for key in keys:
            releases.setdefault(key, asyncio.Event())
        while not task.done():
            for event in releases.values():
                event.set()
            await settle()
        await task
        assert began == keys and at_once["most"] == AFTERCARE_PLACES

    asyncio.run(scenario())


def test_a_row_that_cannot_be_written_again_is_raised_by_drain_once_not_lost_in_a_task(
        caplog: pytest.LogCaptureFixture) -> None:
    # The disk filled while a sandbox was being left: writing its row again raised. The run
    # must get that one error (exit 3), not asyncio's "Task exception was never retrieved".
    import errno
    import gc

    from runner.system.writes import WriteRefused

    def full(left: Left) -> None:
        raise WriteRefused(f"results/x/traces/a.json: [Errno {errno.ENOSPC}] No space left on "
                           "device", infrastructure=True)

    async def left() -> Left:
        return Left([], 0.0)

    async def run() -> None:
        care = Aftercare()
        care.then(care.begin(left, "a"), full)
        await asyncio.sleep(0.01)  # the follow-up task has failed and left its set
        with pytest.raises(WriteRefused, match="No space left on device"):
            await care.drain()

    with caplog.at_level("ERROR", logger="asyncio"):
        asyncio.run(run())
        gc.collect()  # a dropped task's exception is reported when it is collected
    assert "never retrieved" not in caplog.text
