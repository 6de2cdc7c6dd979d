"""Requests in flight on one model, so a restart waits for them instead of cutting them off.

Why: several GAIA Agent UIs share one server, and any of them may `POST /load` a model with
settings that need a restart while another one's completion or embedding is streaming from
it. Stopping llama.cpp then breaks that request ("llama.cpp backend did not answer", HTTP 502).
So every request holds a `Use` of its model for as long as it talks to llama.cpp (a stream
until its last byte), and a restart first closes the gate to new requests, waits until the
uses drop to zero, restarts, and opens the gate again. New requests wait at the closed gate
and then go to the restarted server. A restart that cannot drain in time is refused with
`ModelBusyError` (HTTP 409) and the gate reopens, so nothing that was answering is lost.

Everything runs on the server's one event loop: each check-and-count is a synchronous step,
so no request can slip in between the gate closing and the count being read.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable


class ModelBusyError(RuntimeError):
    """A restart gave up waiting for the requests in flight on the model."""

    def __init__(self, model: str, in_flight: int, waited_s: float) -> None:
        self.model, self.in_flight, self.waited_s = model, in_flight, waited_s
        super().__init__(
            f"Model '{model}' is answering {in_flight} request(s) from other clients of this "
            f"shared server; it was not restarted (waited {waited_s:.0f} s for them to "
            "finish). Its current settings still serve requests; load it again later, or "
            "load it with settings it already satisfies."
        )


class Use:
    """One request's hold on a model; `release` is safe to call more than once."""

    def __init__(self, gate: InFlight) -> None:
        self._gate: InFlight | None = gate
        self._after: list[Callable[[], None]] = []

    def on_release(self, callback: Callable[[], None]) -> None:
        """Run `callback` once, when the request lets go of the model (its answer is over)."""
        self._after.append(callback)

    def release(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.leave()
            after, self._after = self._after, []
            for callback in after:
                callback()


class InFlight:
    """The requests in flight on one model, and the gate a restart closes."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.count = 0
        self._open = asyncio.Event()
        self._open.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._restart = asyncio.Lock()

    async def enter(self) -> Use:
        """Wait while a restart runs, then count this request in."""
        while not self._open.is_set():
            await self._open.wait()
        self.count += 1
        self._idle.clear()
        return Use(self)

    def leave(self) -> None:
        self.count -= 1
        if self.count == 0:
            self._idle.set()

    @contextlib.asynccontextmanager
    async def exclusive(self, timeout_s: float) -> AsyncIterator[None]:
        """Hold the model alone: no request in flight, none admitted until the block ends.

        Raises `ModelBusyError` when the requests in flight do not finish within `timeout_s`.
        """
        async with self._restart:
            self._open.clear()
            try:
                await self._drain(timeout_s)
                yield
            finally:
                self._open.set()

    async def _drain(self, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.count:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise ModelBusyError(self.model, self.count, timeout_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), remaining)
