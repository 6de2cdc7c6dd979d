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

Backends take part by making a sandbox in steps (``PreparingBackend``): the Docker backend
does; the local and attached backends open theirs when asked (``cold``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from runner.sandbox._protocol import Sandbox, SandboxBackend

Started = TypeVar("Started")


@runtime_checkable
class PreparingBackend(Protocol[Started]):
    """A backend whose sandboxes can be made ahead of their use: ``start`` creates one,
    ``ready`` waits until it answers, ``watching`` guards its use, ``stop`` removes it
    (always called after a successful ``start``, also when ``ready`` failed)."""

    async def start(self, scenario_id: str, *, memory: bool = False) -> Started: ...

    async def ready(self, started: Started) -> Sandbox: ...

    def watching(self, started: Started) -> AbstractAsyncContextManager[None]: ...

    async def stop(self, started: Started) -> None: ...


@dataclass
class Lease:
    """A job's sandbox and what the job waited for it."""

    box: Sandbox
    pool_hit: bool  # the sandbox was ready when the job asked for it
    waited_s: float  # seconds from asking to having a ready sandbox


@dataclass
class _Slot(Generic[Started]):
    """One job's sandbox being made (or made) ahead: start + ready, as one task."""

    key: str
    memory: bool
    task: asyncio.Task[tuple[Started, Sandbox]]


@dataclass
class WarmPool(Generic[Started]):
    """Makes up to ``ahead`` sandboxes ahead of the jobs planned with ``plan``."""

    backend: PreparingBackend[Started]
    ahead: int
    # How many sandboxes may be starting at once (None: ``ahead``). Starts compete for the
    # same CPUs: on a small machine, making the next ones all at once slows the one a job
    # waits for right now. Starts queue in plan order.
    starting: int | None = None
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
            slot = self._make(key, memory)
        hit = _succeeded(slot.task)
        self._fill()  # a place is free: start the next planned job's sandbox
        try:
            # Awaited directly: cancelling this job cancels the start, which cleans up after itself.
            started, box = await slot.task
        except asyncio.CancelledError:
            if _succeeded(slot.task):  # made in the very moment this job was cancelled
                await self.backend.stop(slot.task.result()[0])
            raise
        try:
            async with self.backend.watching(started):
                yield Lease(box=box, pool_hit=hit, waited_s=time.perf_counter() - asked)
        finally:
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
            self._slots[key] = self._make(key, memory)

    def _unplan(self, key: str) -> None:
        self._planned = [job for job in self._planned if job[0] != key]

    def _make(self, key: str, memory: bool) -> _Slot[Started]:
        return _Slot(key, memory, asyncio.create_task(self._prepare(key, memory), name=f"sandbox {key}"))

    async def _prepare(self, key: str, memory: bool) -> tuple[Started, Sandbox]:
        if self._gate is None:
            self._gate = asyncio.Semaphore(max(1, self.starting or self.ahead))
        async with self._gate:
            started = await self.backend.start(key, memory=memory)  # cleans up itself on failure
            try:
                return started, await self.backend.ready(started)
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
    """A sandbox opened when asked, as a ``Lease`` (no pool: the job waits for all of it)."""
    asked = time.perf_counter()
    async with backend.open(key, memory=memory) as box:
        yield Lease(box=box, pool_hit=False, waited_s=time.perf_counter() - asked)


def pool_for(backend: SandboxBackend, ahead: int, starting: int | None = None) -> WarmPool[Any] | None:
    """A warm pool over ``backend`` making up to ``ahead`` sandboxes ahead, ``starting`` of
    them at once; None when the backend cannot make them ahead or ``ahead`` is 0 (every
    sandbox is then opened cold)."""
    if ahead <= 0 or not isinstance(backend, PreparingBackend):
        return None
    return WarmPool(backend, ahead, starting)
