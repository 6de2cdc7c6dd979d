"""Leaving used sandboxes: collect their artifacts and remove them, off the scenario's clock.

Nothing after the answer is on the scenario's clock: a finished conversation's sandbox is kept
past it, and its artifacts are collected and it is removed after the row is recorded, in the
background while the next scenario runs (``Aftercare``: in order, at most ``AFTERCARE_PLACES``
at once, the next job waiting for a place). The row is then written again with its artifacts
(and what could not be collected, in its notes); the run's final write waits for all of them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from runner.run.jobs import Left, describe_failure
from runner.sandbox import Sandbox

#: Longest the artifacts of a failed conversation are collected for (its deadline has passed),
#: and those of a finished one, in the background.
COLLECT_AFTER_FAILURE_S = 60.0


async def collect_artifacts(box: Sandbox, dest: Path) -> str | None:
    """Collect what a sandbox has (logs, chat DB) into `dest`; what could not be collected, as
    one line (None: everything was). A failed collect never raises: after a failed
    conversation the failure being handled is the scenario's cause, after a finished one the
    conversation is the result."""
    try:
        async with asyncio.timeout(COLLECT_AFTER_FAILURE_S):
            problems = await box.collect(dest)
    except (OSError, RuntimeError, ValueError, TimeoutError) as exc:
        problems = [describe_failure(exc)]
    return "artifacts not collected: " + "; ".join(problems) if problems else None


async def leave_sandbox(box: Sandbox, dest: Path, removal: Callable[[], Awaitable[None]]) -> Left:
    """Collect a used sandbox's artifacts, then remove it; never raises: the row is recorded
    already, and whatever fails here is written into it (``Engine._left``)."""
    began = time.perf_counter()
    try:
        missing = await collect_artifacts(box, dest)
        problems = [missing] if missing else []
    except Exception as exc:  # noqa: BLE001 — a crash mid-collect is recorded, never lost
        problems = [f"collecting the artifacts crashed: {describe_failure(exc)}"]
    try:
        await removal()
    except Exception as exc:  # noqa: BLE001 — the sweep by label at the run's end removes it
        problems.append(f"removing the sandbox failed: {describe_failure(exc)}")
    return Left(problems, round(time.perf_counter() - began, 3))


#: Used sandboxes being left (collected from and removed) at once, in the background. One is
#: the usual; a second lets a scenario that ends while the last one is still being left go on.
#: A job that would leave a third waits for a place after recording its row (back-pressure).
AFTERCARE_PLACES = 2


class Aftercare:
    """Leaves used sandboxes after their rows are recorded, in the order they were handed in,
    at most ``places`` at once; ``drain`` waits for all of them (the run's final write does)."""

    def __init__(self, places: int = AFTERCARE_PLACES) -> None:
        self.places = places
        self._turns = asyncio.Semaphore(places)
        self._leaving: set[asyncio.Task[Left]] = set()
        self._following: set[asyncio.Task[None]] = set()
        # A row that could not be written again (a full disk): kept here, raised by `drain`.
        # A task's own exception would be dropped with the task from its set before drain
        # looked, and asyncio would print "Task exception was never retrieved" at exit.
        self._failures: list[Exception] = []

    def begin(self, leave: Callable[[], Awaitable[Left]], name: str = "") -> asyncio.Task[Left]:
        """Start leaving a sandbox now (it waits for a place, behind those handed in before)."""
        task = asyncio.create_task(self._in_turn(leave), name=f"leave sandbox {name}")
        self._leaving.add(task)
        task.add_done_callback(self._leaving.discard)
        return task

    def then(self, leaving: asyncio.Task[Left], record: Callable[[Left], None]) -> None:
        """Once ``leaving`` is done, ``record`` what it came to (the row written again)."""
        async def follow() -> None:
            try:
                record(await leaving)
            except Exception as exc:  # noqa: BLE001 — raised by drain, once, to the run
                self._failures.append(exc)

        task = asyncio.create_task(follow(), name=f"record {leaving.get_name()}")
        self._following.add(task)
        task.add_done_callback(self._following.discard)

    async def room(self) -> None:
        """Back-pressure: return once at most ``places`` sandboxes are being left."""
        while len(self._leaving) > self.places:
            await asyncio.wait(set(self._leaving), return_when=asyncio.FIRST_COMPLETED)

    async def drain(self) -> None:
        """Return once every sandbox handed in is left and its row written again; a failure
        to write one is raised (after all of them are done)."""
        while self._leaving or self._following:
            done, _ = await asyncio.wait(self._leaving | self._following)
            for task in done:
                error = None if task.cancelled() else task.exception()
                if isinstance(error, Exception):
                    self._failures.append(error)
            self._leaving -= done
            self._following -= done
        if self._failures:
            raise self._failures[0]

    async def _in_turn(self, leave: Callable[[], Awaitable[Left]]) -> Left:
        async with self._turns:
            return await leave()
