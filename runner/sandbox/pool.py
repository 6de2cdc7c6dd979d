"""The warm pool: sandboxes made ahead of the scenarios that will use them.

A sandbox takes seconds to start (containers, GAIA's imports, the bridge). While one scenario
runs, the pool already starts the sandboxes of the next ones, in the planned order, so a
scenario usually finds its sandbox ready. Nothing is shared or reused: each planned job key
gets its own sandbox (named after run + key, as a cold one), used once and destroyed after.

The pool keeps at most ``ahead`` sandboxes made or being made that no job has claimed yet;
each claim frees a place and the next planned job's sandbox is started. A job that will not
need its sandbox after all (skipped before it) releases it, and ``close`` — in a ``finally``,
also on Ctrl-C — removes every sandbox nobody claimed, waiting for any start still in
flight to finish first (the backend's ``stop`` runs to its end, whatever the cancellation).

The pool yields to the work in flight: a sandbox made ahead starts at the backend's low CPU
weight (``ahead=True``) — on a small machine its GAIA imports would otherwise take CPU from the
turn running now — and is raised to the normal sandbox weight (``hand_over``) the moment its
job claims it, also when its start is still in flight.

What the conversation would do first in an empty sandbox and that the agent cannot tell from
done earlier — the engine's ``readying`` step: making the scenario's empty chat session — is
done here too, once the sandbox is ready; the job finds it in ``Lease.prepared``. It does not
count as starting: the next sandbox's start begins the moment this one is ready.

A job may keep its sandbox past the block (``Lease.keep``): the engine records the result first
and collects the artifacts and removes the sandbox afterwards, off the scenario's clock.

Backends take part by making a sandbox in steps (``PreparingBackend``): the Docker backend
does; the local and attached backends open theirs when asked (``cold``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from runner.sandbox._protocol import Sandbox, SandboxBackend

Started = TypeVar("Started")


@runtime_checkable
class PreparingBackend(Protocol[Started]):
    """A backend whose sandboxes can be made ahead of their use: ``start`` creates one
    (``ahead=True``: at a low CPU weight, for a job not running yet), ``hand_over`` raises it
    to the normal weight (its job has claimed it; idempotent, also before ``ready``),
    ``ready`` waits until it answers, ``watching`` guards its use, ``stop`` removes it (always
    called after a successful ``start``, also when ``ready`` failed; idempotent)."""

    async def start(self, scenario_id: str, *, memory: bool = False, ahead: bool = False) -> Started: ...

    async def hand_over(self, started: Started) -> None: ...

    async def ready(self, started: Started) -> Sandbox: ...

    def watching(self, started: Started) -> AbstractAsyncContextManager[None]: ...

    async def stop(self, started: Started) -> None: ...


@dataclass
class Lease:
    """A job's sandbox and what the job waited for it."""

    box: Sandbox
    pool_hit: bool  # the sandbox was ready when the job asked for it
    waited_s: float  # seconds from asking to having a ready sandbox
    # How the sandbox is removed, when its backend can keep it past the lease's block (None:
    # it goes when the block ends, whatever the job asks).
    removal: Callable[[], Awaitable[None]] | None = field(default=None, repr=False)
    kept: bool = False
    prepared: Any = None  # what the pool's ``readying`` step made for the job (None: nothing)

    def keep(self) -> Callable[[], Awaitable[None]] | None:
        """Keep the sandbox past the block: returns what removes it, which the caller must then
        await itself, whatever happens (it may be awaited more than once). None: the backend
        cannot keep it, so what must be read from it is read inside the block."""
        if self.removal is not None:
            self.kept = True
        return self.removal


@dataclass
class _Slot(Generic[Started]):
    """One job's sandbox being made (or made) ahead: start + ready, as one task."""

    key: str
    memory: bool
    task: asyncio.Task[tuple[Started, Sandbox]] = field(init=False)
    started: Started | None = None  # once the start has made it (before it is ready)
    prepared: Any = None  # what ``readying`` made in it
    claimed: bool = False  # its job asked for it: it runs at the normal weight from then on


@dataclass
class WarmPool(Generic[Started]):
    """Makes up to ``ahead`` sandboxes ahead of the jobs planned with ``plan``."""

    backend: PreparingBackend[Started]
    ahead: int
    # How many sandboxes may be starting at once (None: ``ahead``). Starts compete for the
    # same CPUs: on a small machine, making the next ones all at once slows the one a job
    # waits for right now. Starts queue in plan order.
    starting: int | None = None
    # Run on each sandbox once it is ready, before it counts as made: (job key, sandbox) →
    # what the job finds in ``Lease.prepared``. A failure fails the sandbox's start.
    readying: Callable[[str, Sandbox], Awaitable[Any]] | None = None
    _gate: asyncio.Semaphore | None = None
    _planned: list[tuple[str, bool]] = field(default_factory=list)  # not started yet, in order
    _slots: dict[str, _Slot[Started]] = field(default_factory=dict)  # started, not claimed
    _retiring: set[asyncio.Task[None]] = field(default_factory=set)
    _closed: bool = False

    def plan(self, jobs: Iterable[tuple[str, bool]]) -> None:
        """The jobs that will ask for a sandbox, in the order they will: (key, memory)."""
        self._planned.extend(jobs)
        self._fill()

    @property
    def waiting(self) -> list[str]:
        """Keys whose sandbox is made or being made and not yet claimed (for tests, reports)."""
        return list(self._slots)

    @property
    def ready(self) -> list[str]:
        """Keys whose sandbox is made, ready and not yet claimed."""
        return [key for key, slot in self._slots.items() if _succeeded(slot.task)]

    @asynccontextmanager
    async def sandbox(self, key: str, *, memory: bool = False) -> AsyncIterator[Lease]:
        """The job's own sandbox: the one made ahead for ``key``, else one made now. It is
        destroyed when the block ends (error and cancellation included)."""
        asked = time.perf_counter()
        slot = self._slots.pop(key, None)
        if slot is not None and slot.memory != memory:
            self._retire(slot)  # made for another kind of scenario: useless to this one
            slot = None
        if slot is None:
            self._unplan(key)
            slot = self._make(key, memory, ahead=False)
        slot.claimed = True
        hit = _succeeded(slot.task)
        self._fill()  # a place is free: start the next planned job's sandbox
        try:
            if slot.started is not None:
                # Made ahead at the low weight: this job runs now (the start, if still in flight,
                # goes on at the normal weight).
                await self.backend.hand_over(slot.started)
            # Awaited directly: cancelling this job cancels the start, which cleans up after itself.
            started, box = await slot.task
        except asyncio.CancelledError:
            if _succeeded(slot.task):  # made in the very moment this job was cancelled
                await self.backend.stop(slot.task.result()[0])
            raise
        lease = Lease(box=box, pool_hit=hit, waited_s=time.perf_counter() - asked,
                      removal=partial(self.backend.stop, started), prepared=slot.prepared)
        try:
            async with self.backend.watching(started):
                yield lease
        finally:
            if not lease.kept:
                await self.backend.stop(started)

    def release(self, key: str) -> None:
        """The job ``key`` will not use its sandbox (skipped before it): remove it, or drop it
        from the plan, and start the next one in its place."""
        slot = self._slots.pop(key, None)
        if slot is not None:
            self._retire(slot)
        else:
            self._unplan(key)
        self._fill()

    async def close(self) -> None:
        """Remove every sandbox no job claimed and start no more; returns once they are gone."""
        self._closed = True
        self._planned.clear()
        for key in list(self._slots):
            self._retire(self._slots.pop(key))
        while self._retiring:
            done, _ = await asyncio.wait(set(self._retiring))
            self._retiring -= done

    # -- inside -------------------------------------------------------------------------------

    def _fill(self) -> None:
        while not self._closed and self._planned and len(self._slots) < self.ahead:
            key, memory = self._planned.pop(0)
            self._slots[key] = self._make(key, memory, ahead=True)

    def _unplan(self, key: str) -> None:
        self._planned = [job for job in self._planned if job[0] != key]

    def _make(self, key: str, memory: bool, *, ahead: bool) -> _Slot[Started]:
        slot: _Slot[Started] = _Slot(key, memory)
        slot.task = asyncio.create_task(self._prepare(slot, ahead), name=f"sandbox {key}")
        return slot

    async def _prepare(self, slot: _Slot[Started], ahead: bool) -> tuple[Started, Sandbox]:
        if self._gate is None:
            self._gate = asyncio.Semaphore(max(1, self.starting or self.ahead))
        async with self._gate:
            # Cleans up itself on failure. Made ahead, it starts yielding the CPU to the turn in
            # flight, unless its job asked for it meanwhile.
            started = await self.backend.start(slot.key, memory=slot.memory, ahead=ahead and not slot.claimed)
            slot.started = started
            try:
                if ahead and slot.claimed:
                    await self.backend.hand_over(started)  # claimed while it was being created
                box = await self.backend.ready(started)
            except BaseException:
                await self.backend.stop(started)
                raise
        # The next start goes now: the readying step (one request to a UI that is up) need not
        # hold it back. With the sandboxes starting one at a time the pool makes one per start,
        # and a short scenario waits for exactly that (a session cost ~0.2-0.7 s of each).
        try:
            if self.readying is not None:
                slot.prepared = await self.readying(slot.key, box)
            return started, box
        except BaseException:
            await self.backend.stop(started)
            raise

    def _retire(self, slot: _Slot[Started]) -> None:
        task = asyncio.create_task(self._discard(slot), name=f"discard sandbox {slot.key}")
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def _discard(self, slot: _Slot[Started]) -> None:
        """Stop a sandbox nobody will use: a start in flight is cancelled (and removes what it
        made itself); a finished one is stopped here."""
        slot.task.cancel()
        await asyncio.wait({slot.task})
        if not _succeeded(slot.task):
            return  # the start was cancelled or failed, and removed what it had made
        started, _ = slot.task.result()
        await self.backend.stop(started)


def _succeeded(task: asyncio.Task[Any]) -> bool:
    return task.done() and not task.cancelled() and task.exception() is None


@asynccontextmanager
async def cold(backend: SandboxBackend, key: str, *, memory: bool = False) -> AsyncIterator[Lease]:
    """A sandbox opened when asked, as a ``Lease`` (no pool: the job waits for all of it). A
    backend that makes sandboxes in steps makes it in those steps, so it can be kept past the
    block as a pooled one can."""
    asked = time.perf_counter()
    if not isinstance(backend, PreparingBackend):
        async with backend.open(key, memory=memory) as box:
            yield Lease(box=box, pool_hit=False, waited_s=time.perf_counter() - asked)
        return
    started = await backend.start(key, memory=memory)  # cleans up itself on failure
    lease: Lease | None = None
    try:
        box = await backend.ready(started)
        lease = Lease(box=box, pool_hit=False, waited_s=time.perf_counter() - asked,
                      removal=partial(backend.stop, started))
        async with backend.watching(started):
            yield lease
    finally:
        if lease is None or not lease.kept:
            await backend.stop(started)


def pool_for(
    backend: SandboxBackend, ahead: int, starting: int | None = None,
    readying: Callable[[str, Sandbox], Awaitable[Any]] | None = None,
) -> WarmPool[Any] | None:
    """A warm pool over ``backend`` making up to ``ahead`` sandboxes ahead, ``starting`` of
    them at once, each readied by ``readying``; None when the backend cannot make them ahead
    or ``ahead`` is 0 (every sandbox is then opened cold)."""
    if ahead <= 0 or not isinstance(backend, PreparingBackend):
        return None
    return WarmPool(backend, ahead, starting, readying)
