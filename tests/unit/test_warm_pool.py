"""The warm pool (runner/sandbox/pool.py) and how live conversations use it, with an
in-memory backend double that records every sandbox it makes and removes.

What the pool promises: it makes sandboxes ahead in the planned order, never more than
``ahead`` unclaimed at once; each job gets its own sandbox once; a skipped job's sandbox goes;
a cancelled run leaves none behind; memory scenarios get a memory sandbox. The real Docker
backend under the same pool is tests/containers/test_warm_pool_docker.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

import runner.run.conversations as conversations_module
from runner.conversation.simulate import ScriptedSimulator
from runner.conversation.target import OpenedSession
from runner.records.status import Status
from runner.records.transcript import SetupTimings, Transcript
from runner.run.conversations import LiveConversations
from runner.run.jobs import Job
from runner.run.settings import RunSettings
from runner.sandbox._ui import UiReply
from runner.sandbox.pool import WarmPool, pool_for
from runner.scenarios import Scenario, load_suite

SUITE = Path(__file__).parents[1] / "fixtures" / "engine_suite"


@dataclass
class Box:
    """A sandbox as the engine sees it (runner.sandbox._protocol.Sandbox), made of nothing."""

    scenario_id: str
    memory: bool
    number: int
    ui_url: str = "http://127.0.0.1:1"
    mcp_url: str = "http://127.0.0.1:2/mcp"
    llm_url: str = "http://127.0.0.1:3"
    corpus_root: PurePosixPath = PurePosixPath("/corpus")
    mcp_headers: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    async def ui_request(self, method: str, path: str, body: dict[str, Any] | None = None) -> UiReply:
        return UiReply(status=200, text="{}")

    async def collect(self, dest: Path) -> list[str]:
        return []


@dataclass
class Made:
    """What the double's ``start`` made: one numbered sandbox, and whether it yields the CPU
    (made ahead, not yet handed over to its job)."""

    box: Box
    yielding: bool = False


class MemoryBackend:
    """Makes numbered sandboxes in memory. ``live`` is what exists right now; a start holds
    until ``starts_may_finish`` is set, and a cancelled start removes what it made (as the
    Docker backend's does)."""

    def __init__(self) -> None:
        self.made: list[Box] = []
        self.live: dict[int, Box] = {}
        self.stopped: list[int] = []
        self.starts_may_finish = asyncio.Event()
        self.starts_may_finish.set()
        self.opened_cold: list[str] = []
        self.starts: dict[str, Made] = {}  # by scenario id: what each start made, and its weight

    async def start(self, scenario_id: str, *, memory: bool = False, ahead: bool = False) -> Made:
        box = Box(scenario_id, memory, number=len(self.made))
        self.made.append(box)
        self.live[box.number] = box
        try:
            await self.starts_may_finish.wait()
        except asyncio.CancelledError:
            await self.stop(Made(box))
            raise
        box.timings.update(container_create_s=0.2, ui_ready_s=1.5, mcp_ready_s=1.0, gaia_import_s=1.2)
        self.starts[scenario_id] = Made(box, yielding=ahead)
        return self.starts[scenario_id]

    async def hand_over(self, started: Made) -> None:
        started.yielding = False

    async def ready(self, started: Made) -> Box:
        await asyncio.sleep(0)
        return started.box

    @asynccontextmanager
    async def watching(self, started: Made) -> AsyncIterator[None]:
        yield

    async def stop(self, started: Made) -> None:
        if self.live.pop(started.box.number, None) is not None:
            self.stopped.append(started.box.number)

    @asynccontextmanager
    async def open(self, scenario_id: str, *, memory: bool = False) -> AsyncIterator[Box]:
        self.opened_cold.append(scenario_id)
        started = await self.start(scenario_id, memory=memory)
        try:
            yield await self.ready(started)
        finally:
            await self.stop(started)

    def keys(self) -> list[str]:
        return [box.scenario_id for box in self.made]


async def settle() -> None:
    """Let every task the pool started run as far as it can."""
    for _ in range(20):
        await asyncio.sleep(0)


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


# -- the pool itself ----------------------------------------------------------------------------


def test_makes_sandboxes_ahead_in_plan_order_never_more_than_ahead_unclaimed() -> None:
    async def scenario() -> None:
        backend = MemoryBackend()
        pool: WarmPool[Any] = WarmPool(backend, ahead=2)
        pool.plan([(f"job{n}", False) for n in range(5)])
        await settle()
        assert backend.keys() == ["job0", "job1"]
        async with pool.sandbox("job0") as lease:
            await settle()
            # job0's claim freed a place: job2's sandbox is made while job0 runs.
            assert backend.keys() == ["job0", "job1", "job2"]
            assert lease.box.scenario_id == "job0" and lease.pool_hit
        await settle()
        assert backend.keys() == ["job0", "job1", "job2"]  # still two unclaimed: job1, job2
        await pool.close()
        assert backend.live == {}

    run(scenario())


def test_each_job_gets_its_own_sandbox_once_and_it_is_destroyed_after() -> None:
    async def scenario() -> None:
        backend = MemoryBackend()
        pool: WarmPool[Any] = WarmPool(backend, ahead=3)
        pool.plan([("a", False), ("b", False), ("c", False)])
        await settle()
        seen = []
        for key in ("a", "b", "c"):
            async with pool.sandbox(key) as lease:
                seen.append(lease.box.number)
                assert lease.box.scenario_id == key and lease.box.number in backend.live
            assert lease.box.number not in backend.live  # destroyed when the job ended
        assert sorted(seen) == [0, 1, 2] and len(set(seen)) == 3
        # Asked again (a job the plan did not announce): a new sandbox, never a used one.
        async with pool.sandbox("a") as again:
            assert again.box.number == 3 and not again.pool_hit
        await pool.close()
        assert backend.live == {} and sorted(backend.stopped) == [0, 1, 2, 3]

    run(scenario())


def test_starts_queue_in_plan_order_when_fewer_may_start_at_once() -> None:
    async def scenario() -> None:
        backend = MemoryBackend()
        backend.starts_may_finish.clear()
        pool: WarmPool[Any] = WarmPool(backend, ahead=3, starting=1)
        pool.plan([("a", False), ("b", False), ("c", False)])
        await settle()
        assert backend.keys() == ["a"]  # b and c wait for a's start to end
        backend.starts_may_finish.set()
        await settle()
        assert backend.keys() == ["a", "b", "c"] and pool.ready == ["a", "b", "c"]
        await pool.close()
        assert backend.live == {}

    run(scenario())


def test_a_job_asking_before_its_sandbox_is_ready_waits_and_is_no_pool_hit() -> None:
    async def scenario() -> None:
        backend = MemoryBackend()
        backend.starts_may_finish.clear()
        pool: WarmPool[Any] = WarmPool(backend, ahead=1)
        pool.plan([("a", False)])
        await settle()

        async def use() -> bool:
            async with pool.sandbox("a") as lease:
                return lease.pool_hit

        job = asyncio.create_task(use())
        await settle()
        assert not job.done()
        backend.starts_may_finish.set()
        assert await job is False
        await pool.close()

    run(scenario())


def test_cancelling_the_run_removes_every_sandbox_made_ahead_and_those_in_flight() -> None:
    async def scenario() -> None:
        backend = MemoryBackend()
        pool: WarmPool[Any] = WarmPool(backend, ahead=3)
        pool.plan([(f"job{n}", False) for n in range(6)])
        await settle()
        running = asyncio.Event()

        async def job() -> None:
            async with pool.sandbox("job0"):
                running.set()
                await asyncio.sleep(3600)

        task = asyncio.create_task(job())
        await running.wait()
        backend.starts_may_finish.clear()  # the next start (job3) is still in flight
        await settle()
        assert backend.keys() == ["job0", "job1", "job2", "job3"]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await pool.close()
        assert backend.live == {}
        assert sorted(backend.stopped) == [0, 1, 2, 3]
        await settle()
        assert backend.keys() == ["job0", "job1", "job2", "job3"]  # nothing made after close

    run(scenario())


def test_memory_jobs_get_a_memory_sandbox_and_others_do_not() -> None:
    async def scenario() -> None:
        backend = MemoryBackend()
        pool: WarmPool[Any] = WarmPool(backend, ahead=2)
        pool.plan([("plain", False), ("remembers", True)])
        await settle()
        assert [(b.scenario_id, b.memory) for b in backend.made] == [("plain", False), ("remembers", True)]
        async with pool.sandbox("remembers", memory=True) as lease:
            assert lease.box.memory and lease.pool_hit
        # Asked for another kind than planned: the one made ahead is useless and goes.
        async with pool.sandbox("plain", memory=True) as lease:
            assert lease.box.memory and not lease.pool_hit and lease.box.number == 2
        await pool.close()
        assert backend.live == {}

    run(scenario())


def test_sandboxes_made_ahead_yield_the_cpu_until_their_job_claims_them() -> None:
    async def scenario() -> None:
        backend = MemoryBackend()
        pool: WarmPool[Any] = WarmPool(backend, ahead=2)
        pool.plan([("a", False), ("b", False)])
        await settle()
        assert backend.starts["a"].yielding and backend.starts["b"].yielding
        async with pool.sandbox("a"):
            assert not backend.starts["a"].yielding  # raised before the job has it
            assert backend.starts["b"].yielding  # still a spare
        # Asked before its start was done: raised all the same, the start went on at full weight.
        backend.starts_may_finish.clear()
        pool.plan([("c", False)])
        await settle()

        async def claim() -> bool:
            async with pool.sandbox("c"):
                return backend.starts["c"].yielding

        job = asyncio.create_task(claim())
        await settle()
        backend.starts_may_finish.set()
        assert await job is False
        # Not planned (a miss): made for its job now, never yielding.
        async with pool.sandbox("d"):
            assert not backend.starts["d"].yielding
        await pool.close()
        assert backend.live == {}

    run(scenario())


def test_a_kept_sandbox_outlives_its_block_until_removed() -> None:
    async def scenario() -> None:
        backend = MemoryBackend()
        pool: WarmPool[Any] = WarmPool(backend, ahead=1)
        pool.plan([("a", False), ("b", False)])
        await settle()
        async with pool.sandbox("a") as lease:
            removal = lease.keep()
        await settle()
        assert removal is not None and list(backend.live) == [0, 1]  # a kept, b made ahead
        await removal()
        await removal()  # a second removal does nothing
        assert backend.stopped == [0]
        async with pool.sandbox("b"):
            pass  # not kept: removed when the block ends
        assert backend.stopped == [0, 1]
        await pool.close()

    run(scenario())


def test_a_released_job_loses_its_sandbox_and_the_next_one_is_made() -> None:
    async def scenario() -> None:
        backend = MemoryBackend()
        pool: WarmPool[Any] = WarmPool(backend, ahead=2)
        pool.plan([("a", False), ("b", False), ("c", False), ("d", False)])
        await settle()
        pool.release("a")  # made ahead, then skipped
        pool.release("d")  # not made yet: it never will be
        await settle()
        assert backend.keys() == ["a", "b", "c"]
        assert 0 not in backend.live and backend.stopped == [0]
        assert pool.waiting == ["b", "c"]
        await pool.close()
        assert backend.live == {} and backend.keys() == ["a", "b", "c"]

    run(scenario())


def test_no_pool_when_ahead_is_zero_or_the_backend_cannot_prepare() -> None:
    assert pool_for(MemoryBackend(), 0) is None
    assert pool_for(MemoryBackend(), 2) is not None

    class OpenOnly:
        def open(self, scenario_id: str, *, memory: bool = False) -> Any:
            raise AssertionError("not called")

    assert pool_for(OpenOnly(), 2) is None  # type: ignore[arg-type]


# -- live conversations with the pool -----------------------------------------------------------


def suite() -> list[Scenario]:
    loaded = load_suite([SUITE / "scenarios"], SUITE / "corpus")
    assert not loaded.errors, loaded.errors
    return loaded.scenarios


def conversations(tmp_path: Path, backend: MemoryBackend, **settings: Any) -> LiveConversations:
    run_settings = RunSettings(run_id="20261130-120000-pool", suite_paths=[SUITE / "scenarios"],
                               corpus_root=SUITE / "corpus", results_root=tmp_path,
                               simulator_mode="scripted", **settings)
    return LiveConversations(run_settings, backend, ScriptedSimulator())  # type: ignore[arg-type]


@pytest.fixture
def talks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The conversation itself is the target's (tested with real sandboxes elsewhere); here it
    only records which sandbox it was given, and which session made ahead (``open_session``,
    also the target's: here it names the sandbox it was made in), and reports its own set-up."""
    talked: list[str] = []

    async def fake_open(box: Box, scenario: Scenario, device: str, agent_id: str | None = None) -> OpenedSession:
        return OpenedSession(status={}, session={"id": f"session in {box.number}"},
                             title=f"trialbox: {scenario.id}", agent_id=agent_id or "gaia", device=device)

    async def fake_conversation(box: Box, scenario: Scenario, *args: Any, **kwargs: Any) -> Transcript:
        session = kwargs.get("session")
        talked.append(f"{scenario.id}@{box.number}" + (f" ({session.session['id']})" if session else ""))
        return Transcript(scenario_id=scenario.id, setup=SetupTimings(session_s=0.3, indexing_s=0.7))

    monkeypatch.setattr(conversations_module, "open_session", fake_open)
    monkeypatch.setattr(conversations_module, "run_conversation", fake_conversation)
    return talked


def test_live_jobs_use_the_sandboxes_made_ahead_and_record_their_set_up(tmp_path: Path, talks: list[str]) -> None:
    async def scenario() -> None:
        backend = MemoryBackend()
        live = conversations(tmp_path, backend, concurrency=1)
        jobs = [Job(s, None) for s in suite()]
        await live.prepare(jobs)
        await settle()
        assert backend.keys() == [j.key for j in jobs][:2]  # concurrency + 1 ahead, one at a time
        outcomes = [await live.converse(job) for job in jobs]
        for outcome in outcomes:  # what the engine does once each row is recorded
            assert outcome.leave is not None
            await outcome.leave()
        await live.close()
        assert backend.opened_cold == [] and backend.live == {}
        # Each conversation got its own sandbox, and the session the pool made in that one.
        assert talks == [f"{job.key}@{n} (session in {n})" for n, job in enumerate(jobs)]
        setup = outcomes[0].transcript.setup  # type: ignore[union-attr]
        assert setup is not None and setup.pool_hit is True
        assert (setup.session_s, setup.indexing_s, setup.container_create_s, setup.ui_ready_s) == (0.3, 0.7, 0.2, 1.5)
        assert setup.waited_s is not None and setup.waited_s >= 0

    run(scenario())


def test_a_job_skipped_before_its_sandbox_releases_the_one_made_ahead(tmp_path: Path, talks: list[str]) -> None:
    async def scenario() -> None:
        backend = MemoryBackend()
        live = conversations(tmp_path, backend, concurrency=2)
        first, *rest = suite()
        # No user_message and no quoted question: the scripted user cannot say turn 1.
        unsayable = first.model_copy(update={"turns": [first.turns[0].model_copy(
            update={"user_message": None, "objective": "Find out how much fuel the lighthouse holds"})]})
        jobs = [Job(unsayable, None)] + [Job(s, None) for s in rest]
        await live.prepare(jobs)
        await settle()
        assert backend.keys()[0] == unsayable.id  # made ahead: preflight comes with the job
        outcome = await live.converse(jobs[0])
        assert outcome.infra is Status.ERRORED
        await settle()
        assert 0 not in backend.live and backend.stopped == [0]
        for job in jobs[1:]:
            outcome = await live.converse(job)
            assert outcome.leave is not None
            await outcome.leave()
        await live.close()
        assert backend.live == {} and unsayable.id not in "".join(talks)

    run(scenario())


def test_without_the_pool_every_sandbox_is_opened_cold(tmp_path: Path, talks: list[str]) -> None:
    async def scenario() -> None:
        backend = MemoryBackend()
        live = conversations(tmp_path, backend)
        live.settings.warm_pool = False  # --no-warm-pool
        jobs = [Job(s, None) for s in suite()]
        await live.prepare(jobs)
        await settle()
        assert backend.made == []
        outcome = await live.converse(jobs[0])
        # Made now, in the backend's steps (so it too can be left after its row is recorded),
        # at the normal weight; kept until the engine leaves it.
        assert backend.keys() == [jobs[0].key] and not backend.starts[jobs[0].key].yielding
        assert list(backend.live) == [0] and outcome.leave is not None
        left = await outcome.leave()
        await live.close()
        assert backend.live == {} and left.problems == []
        setup = outcome.transcript.setup  # type: ignore[union-attr]
        assert setup is not None and setup.pool_hit is False and setup.container_create_s == 0.2

    run(scenario())


def test_the_next_start_does_not_wait_for_the_readying_step() -> None:
    """Starting one at a time, the pool makes one sandbox per start: the session made in a
    ready sandbox (``readying``) must not hold the next start back."""
    async def scenario() -> None:
        backend = MemoryBackend()
        readied = asyncio.Event()
        readying_began: list[str] = []

        async def readying(key: str, box: Any) -> str:
            readying_began.append(key)
            await readied.wait()
            return f"session of {key}"

        pool: WarmPool[Any] = WarmPool(backend, ahead=2, starting=1, readying=readying)
        pool.plan([("a", False), ("b", False)])
        await settle()
        assert readying_began[:1] == ["a"] and backend.keys() == ["a", "b"]  # b started meanwhile
        assert pool.ready == []  # neither counts as made before its readying is done
        readied.set()
        await settle()
        assert pool.ready == ["a", "b"]
        async with pool.sandbox("a") as lease:
            assert lease.prepared == "session of a" and lease.pool_hit
        await pool.close()
        assert backend.live == {}

    run(scenario())


def test_a_failed_readying_removes_its_sandbox_and_the_job_gets_the_failure() -> None:
    async def scenario() -> None:
        backend = MemoryBackend()

        async def readying(key: str, box: Any) -> None:
            raise RuntimeError(f"no session in {key}")

        pool: WarmPool[Any] = WarmPool(backend, ahead=1, starting=1, readying=readying)
        pool.plan([("a", False)])
        await settle()
        assert backend.live == {}  # removed at once, not at close
        with pytest.raises(RuntimeError, match="no session in a"):
            async with pool.sandbox("a"):
                pass
        await pool.close()
        assert backend.live == {} and backend.stopped == [0]

    run(scenario())


def test_a_timeout_is_recorded_at_its_limit_and_its_sandbox_is_collected_after_the_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, talks: list[str]) -> None:
    # The LLM stalled: the conversation never ends. Collecting from the stalled stack once put
    # 9 s on an 18 s --timeout; now the TIMEOUT comes back with the sandbox still there and
    # collecting it is the engine's aftercare, off the clock.
    collected: list[int] = []

    async def collect(self: Box, dest: Path) -> list[str]:
        collected.append(self.number)
        return []

    async def stalled(box: Box, scenario: Scenario, *args: Any, **kwargs: Any) -> Transcript:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    monkeypatch.setattr(Box, "collect", collect)
    monkeypatch.setattr(conversations_module, "run_conversation", stalled)  # over `talks`'

    async def scenario() -> None:
        backend = MemoryBackend()
        live = conversations(tmp_path, backend, concurrency=1, timeout_s=0.2)
        job = Job(suite()[0], None)
        await live.prepare([job])
        outcome = await live.converse(job)
        assert outcome.infra is Status.TIMEOUT and outcome.error == "no result within 0.2 s"
        assert collected == [] and list(backend.live) == [0]
        assert outcome.leave is not None
        left = await outcome.leave()
        assert left.problems == [] and collected == [0] and backend.live == {}
        await live.close()

    run(scenario())
