"""While a document indexes, the run line says which one, the chunks embedded so far and their
rate — counted from the sandbox's own embeddings requests at the front door (issue 35)."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from runner.conversation.indexing_progress import IndexingWatch, embedded_chunks, indexing_line
from runner.run.progress import Progress
from runner.sandbox.local import LocalSandbox

ROOT = Path(__file__).resolve().parents[2]


def embedding(inputs: int | None, status: int = 200, route: str = "/api/v1/embeddings") -> dict[str, Any]:
    return {"route": route, "status": status, "inputs": inputs}


def test_only_answered_embeddings_inputs_count_as_chunks() -> None:
    records = [embedding(32), embedding(32), embedding(7), embedding(32, status=502),
               embedding(None), {"route": "/api/v1/chat/completions", "status": 200, "inputs": None},
               embedding(True)]  # fmt: skip
    assert embedded_chunks(records) == 71
    assert embedded_chunks([]) == 0
    assert embedded_chunks(None) is None  # no front door to ask: not "0 chunks"


def test_the_line_names_the_document_its_chunks_and_rate() -> None:
    assert (indexing_line("documents/safety_handbook_large.pdf", 130.0, 1235)
            == "indexing safety_handbook_large.pdf: 1,235 chunk(s) embedded in 2:10 (9.5/s)")
    assert indexing_line("a/b.md", 65.0, None) == "indexing b.md: 1:05"
    assert indexing_line("b.md", 0.0, 0) == "indexing b.md: 0 chunk(s) embedded in 0:00"


class Door:
    """A loopback front door whose meter answers the records embedded so far."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        door = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 — http.server's name
                body = json.dumps({"records": list(door.records)}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def door() -> Iterator[Door]:
    made = Door()
    try:
        yield made
    finally:
        made.server.shutdown()
        made.server.server_close()


def test_the_watcher_tells_the_chunks_as_they_are_embedded(door: Door) -> None:
    box = LocalSandbox(scenario_id="big", ui_url="", mcp_url="", llm_url=door.url,
                       corpus_root=ROOT, home=Path("/nonexistent"), logs=Path("/nonexistent"))
    told: list[str] = []

    async def index() -> None:
        watch = IndexingWatch(box, "docs/big.pdf", told.append, every_s=0.05)
        watch.start()
        for _ in range(3):
            door.records.append(embedding(32))  # GAIA embeds the next batch of chunks
            await asyncio.sleep(0.12)
        door.records.append(embedding(5))  # the last batch, answered as the indexing ends
        await watch.finish()

    asyncio.run(index())
    counts = [int(line.split(": ")[1].split(" chunk")[0]) for line in told]
    assert len(counts) > 2 and counts == sorted(counts), told
    assert counts[-1] == 101  # the look at the end has the whole count
    assert all(line.startswith("indexing big.pdf: ") and "/s)" in line for line in told), told


def test_a_log_carries_the_activity_in_its_next_status_line() -> None:
    stream = io.StringIO()
    now = [0.0]
    progress = Progress("run", total=4, stream=stream, live=False, clock=lambda: now[0],
                        tick_s=None, log_every_s=10.0)
    progress.show("big: indexing big.pdf: 320 chunk(s) embedded in 0:40 (8.0/s)")
    assert stream.getvalue() == ""  # no line of its own: a log would get one per look
    now[0] = 11.0
    progress.heartbeat()
    assert stream.getvalue().endswith("· big: indexing big.pdf: 320 chunk(s) embedded in 0:40 (8.0/s)\n")
    progress.show("")
    assert progress.status() == "run: 0/4 · 0:11 elapsed"


def test_the_run_line_shows_the_latest_jobs_activity_until_each_is_over() -> None:
    from runner.run.engine import Engine

    progress = Progress("run", total=2, stream=io.StringIO(), live=False, tick_s=None)
    engine = Engine(settings=None, scenarios=[], conversations=None, judge=None,  # type: ignore[arg-type]
                    writer=None)  # type: ignore[arg-type]  # show_activity needs none of them
    engine._progress = progress
    engine.show_activity("a", "indexing a.pdf: 1:00")
    engine.show_activity("b", "indexing b.pdf: 0:02")
    assert progress.current == "b: indexing b.pdf: 0:02"
    engine.show_activity("b", "")
    assert progress.current == "a: indexing a.pdf: 1:00"
    engine.show_activity("a", "")
    assert progress.current == ""
    engine.show_activity("a", "indexing a.pdf: 1:02")
    engine.show_activity("b", "indexing b.pdf: 0:04")
    engine.show_activity("a", "indexing a.pdf: 1:04")  # told again: the newest again
    assert progress.current == "a: indexing a.pdf: 1:04"
