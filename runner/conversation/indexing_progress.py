"""How far a setup document's indexing is, for the run line while it indexes.

The Agent UI says nothing until a document is done (its library entry has no chunk count before
`complete`), and a document over GAIA's 5 MB threshold indexes in the background for minutes.
What the sandbox's requests at the LLM's front door say meanwhile is exact: every chunk is an
input of an embeddings request (`MeterRecord.inputs`), so the chunks embedded so far and their
rate are counted there. The total is not known before GAIA has cut the document, so none is
printed; without a front door to ask, the line says only how long it has been indexing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

from runner.conversation.turn_speed import Embedded, embedded_inputs
from runner.sandbox import Sandbox, own_meter_records

#: Seconds between two looks at the front door while a document indexes.
WATCH_EVERY_S = 2.0


def embedded_chunks(records: list[dict[str, Any]] | None) -> int | None:
    """Inputs of the answered embeddings requests among `records`; None when there are none to
    read (no front door, or one shared with other sandboxes)."""
    return None if records is None else embedded_inputs(records).texts


async def embedded_since(box: Sandbox, since: float) -> Embedded | None:
    """The sandbox's own answered embeddings requests since `since` (Unix time), or None when
    there are none to read; never raises — a figure we cannot read is not recorded."""
    try:
        records = await own_meter_records(box, since)
    except Exception:  # noqa: BLE001 — the meter is a witness, not a step of the scenario
        return None
    return None if records is None else embedded_inputs(records)


def indexing_line(path: str, elapsed_s: float, chunks: int | None) -> str:
    """`indexing handbook.pdf: 1,240 chunk(s) embedded in 2:10 (9.5/s)`, or without a count to
    read, `indexing handbook.pdf: 2:10`."""
    name = PurePath(path).name
    minutes, seconds = divmod(int(elapsed_s), 60)
    took = f"{minutes}:{seconds:02d}"
    if chunks is None:
        return f"indexing {name}: {took}"
    rate = f" ({chunks / elapsed_s:.1f}/s)" if elapsed_s > 0 else ""
    return f"indexing {name}: {chunks:,} chunk(s) embedded in {took}{rate}"


class IndexingWatch:
    """Tells `tell` how far `path`'s indexing has come: every `every_s` once started, and once
    more at the end (`finish`), so the last line has the document's whole count. Never
    raises for what it reads — a progress line must not cost the scenario."""

    def __init__(self, box: Sandbox, path: str, tell: Callable[[str], None],
                 every_s: float = WATCH_EVERY_S) -> None:
        self.box, self.path, self.tell, self.every_s = box, path, tell, every_s
        self.since, self.started = time.time(), time.monotonic()
        self._loop: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._loop = asyncio.create_task(self._watch())

    async def look(self) -> Embedded | None:
        """Tell the count so far; returns what was read (None: nothing to read)."""
        embedded = await embedded_since(self.box, self.since)
        chunks = None if embedded is None else embedded.texts
        self.tell(indexing_line(self.path, time.monotonic() - self.started, chunks))
        return embedded

    async def finish(self) -> Embedded | None:
        """The indexing is done: stop looking, and tell the count at the end."""
        await self.stop()
        return await self.look()

    async def stop(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.gather(self._loop, return_exceptions=True)
            self._loop = None

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.every_s)
            await self.look()
