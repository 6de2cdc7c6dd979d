"""Reading a sandbox container's log: split into the UI's and the bridge's, and marked lines."""

from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path
from typing import Any

from docker.models.containers import Container

from runner.sandbox._container import BRIDGE_PREFIX
from runner.system.writes import atomic_write_bytes


def save_logs(container: Container, dest: Path) -> None:
    """The container's log, split again into the UI's (agent-ui.log) and the bridge's (mcp.log)."""
    ui, bridge = split_log(container.logs(stdout=True, stderr=True))
    atomic_write_bytes(dest / "agent-ui.log", ui)
    atomic_write_bytes(dest / "mcp.log", bridge)


def split_log(log: bytes) -> tuple[bytes, bytes]:
    """A pair's log as (the UI's lines, the bridge's lines without their prefix)."""
    ui: list[bytes] = []
    bridge: list[bytes] = []
    for line in log.splitlines(keepends=True):
        if line.startswith(BRIDGE_PREFIX):
            bridge.append(line[len(BRIDGE_PREFIX):])
        else:
            ui.append(line)
    return b"".join(ui), b"".join(bridge)


async def printed(container: Container, marker: bytes) -> bool:
    """True once ``container`` prints ``marker``; False when its log ends first (it stopped)
    or cannot be read. Follows Docker's log stream — an event, no polling — in a daemon thread
    of its own: the shared executor has few workers and this wait may last seconds."""
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[bool] = loop.create_future()
    streams: list[Any] = []

    def settle(found: bool) -> None:
        if not outcome.done():
            outcome.set_result(found)

    def follow() -> None:
        found = False
        try:
            stream = container.logs(stream=True, follow=True, stdout=True, stderr=True)
            streams.append(stream)
            pending = b""
            for chunk in stream:
                # Whole lines, so the bridge's own (prefixed) uvicorn line is told apart.
                *lines, pending = (pending + chunk).split(b"\n")
                pending = pending[-4096:]
                if any(marker in line and not line.startswith(BRIDGE_PREFIX) for line in lines):
                    found = True
                    break
        except Exception:  # noqa: BLE001, S110 — closed by the waiter, or the container went: not found
            pass
        try:
            loop.call_soon_threadsafe(settle, found)
        except RuntimeError:
            pass  # the event loop is gone: nobody waits any more

    threading.Thread(target=follow, name=f"log follower {container.name}", daemon=True).start()
    try:
        return await outcome
    finally:
        for stream in streams:
            stream.close()  # ends the follower's read if it still waits


def logged_at(container: Container, marker: bytes, *, bridge: bool = False) -> float | None:
    """When (Docker's timestamp) the UI's — or with ``bridge``, the bridge's prefixed — first log
    line holding ``marker`` was written; None if no such line or no readable time."""
    for line in container.logs(stdout=True, stderr=True, timestamps=True).splitlines():
        stamp, _, text = line.partition(b" ")
        if marker in text and text.startswith(BRIDGE_PREFIX) == bridge:
            try:
                return docker_time(stamp.decode())
            except ValueError:
                return None
    return None


def docker_time(text: str) -> float:
    """Docker's RFC 3339 timestamps carry nanoseconds; datetime takes microseconds."""
    from datetime import datetime

    stamp = re.sub(r"(\.\d{6})\d*", r"\1", text.strip()).replace("Z", "+00:00")
    return datetime.fromisoformat(stamp).timestamp()
