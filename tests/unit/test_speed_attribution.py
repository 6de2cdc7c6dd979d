"""Speed figures are a sandbox's own or they are not taken: local sandboxes all reach the front
door from 127.0.0.1, so at --concurrency > 1 none of them is timed there (issue 32, item 5)."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from runner.run.backend import make_backend, unattributed_speed
from runner.run.settings import Backend, RunSettings
from runner.sandbox import own_meter_records
from runner.sandbox.local import LocalBackend, LocalSandbox

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "fixtures" / "engine_suite"


def settings(backend: Backend, concurrency: int, target_url: str | None = None) -> RunSettings:
    return RunSettings(run_id="20261203-120000-abcd", suite_paths=[SUITE / "scenarios"],
                       corpus_root=SUITE / "corpus", results_root=Path("/nonexistent"),
                       backend=backend, concurrency=concurrency, target_url=target_url,
                       llm_url="http://127.0.0.1:1")  # fmt: skip


@pytest.mark.parametrize(("backend", "concurrency", "target", "said"), [
    (Backend.LOCAL, 2, None, True),
    (Backend.LOCAL, 1, None, False),
    (Backend.DOCKER, 4, None, False),  # each Docker sandbox has an address of its own
    (Backend.LOCAL, 2, "http://127.0.0.1:9/mcp", False),  # attached: run one at a time anyway
])  # fmt: skip
def test_the_run_says_once_when_the_front_door_cannot_time_its_sandboxes(
    backend: Backend, concurrency: int, target: str | None, said: bool
) -> None:
    line = unattributed_speed(settings(backend, concurrency, target))
    assert (line is not None) is said
    if line is not None:
        assert line.startswith("speed: at --concurrency 2 the local sandboxes all reach")
        assert "--concurrency 1 or --backend docker" in line


def test_concurrent_local_sandboxes_are_marked_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("runner.sandbox.local.DEFAULT_GAIA_PYTHON", Path(sys.executable))
    made = make_backend(settings(Backend.LOCAL, 3))
    assert isinstance(made, LocalBackend) and made.concurrent
    alone = make_backend(settings(Backend.LOCAL, 1))
    assert isinstance(alone, LocalBackend) and not alone.concurrent


@pytest.fixture
def meter() -> Iterator[tuple[str, list[str]]]:
    """A loopback server answering the front door's meter route: (its URL, the paths asked)."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 — http.server's name
            asked.append(self.path)
            body = json.dumps({"records": [{"route": "/v1/chat/completions", "status": 200}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def box(llm_url: str, shared: bool) -> LocalSandbox:
    return LocalSandbox(scenario_id="s", ui_url="", mcp_url="", llm_url=llm_url,
                        corpus_root=SUITE / "corpus", home=Path("/nonexistent"),
                        logs=Path("/nonexistent"), front_door_shared=shared)  # fmt: skip


def test_a_shared_sandbox_never_reads_the_front_doors_records(meter: tuple[str, list[str]]) -> None:
    url, asked = meter
    assert asyncio.run(own_meter_records(box(url, shared=False), since=0.0)) == [
        {"route": "/v1/chat/completions", "status": 200}]
    assert len(asked) == 1 and asked[0].startswith("/trialbox/meter?")
    assert asyncio.run(own_meter_records(box(url, shared=True), since=0.0)) is None
    assert len(asked) == 1  # not asked at all: its records would hold its neighbours' calls
