"""Waiting until a started Docker sandbox answers, and the start timings it reports."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any
from urllib.parse import urlsplit

from docker.errors import APIError, NotFound
from docker.models.containers import Container

from runner.sandbox._box import DockerSandbox, DockerStart
from runner.sandbox._container import state_of, whose_end
from runner.sandbox._logs import docker_time, logged_at, printed
from runner.sandbox._protocol import SandboxError

#: Pause between readiness probes while a sandbox starts (each costs a refused connection).
READY_POLL_S = 0.05
#: How often a starting sandbox's containers are checked for death (a Docker API call each).
LIVENESS_INTERVAL_S = 0.5
#: Both of those while a sandbox made ahead yields the CPU: its start may be starved for as long
#: as a turn runs, and polling it at the usual pace would cost the turn in flight the engine's
#: CPU (a refused connection, a Docker API call). Its job claiming it ends the pause at once.
YIELDING_POLL_S = 0.5
#: Longest wait for the UI's "listening" log line before probing it once more anyway.
UI_EVENT_WAIT_S = 1.0
#: What GAIA's Agent UI prints once its modules are imported, just before uvicorn starts
#: (gaia/ui/server.py ``main``): the end of the "GAIA import" phase of a sandbox's start-up.
UI_IMPORTED_MARKER = b"Starting GAIA Agent UI server on"
#: What uvicorn prints once GAIA's Agent UI listens: the UI is up.
UI_SERVING_MARKER = b"Uvicorn running on"


async def wait_ready(box: DockerSandbox, begun: DockerStart, *, timeout_s: float, poll_s: float,
                     by_event: bool) -> None:
    """Ready means the MCP bridge lists its tools and, through it, the UI answers
    ``system_status`` — all over the bridge's HTTP port, so readiness costs no ``docker
    exec`` (a process in the sandbox's CPU quota) while GAIA is still importing.

    The UI, the slower of the two, is awaited by event (``by_event``): the line uvicorn prints
    once it listens, read from Docker's followed log stream (``printed``), so no poll interval
    adds to the start; the short polls (every ``poll_s``) that remain cost a refused connection
    each. Not ready within ``timeout_s`` of its start (or of its claim, for one made ahead) is
    a ``SandboxError``."""
    from fastmcp import Client  # imported late: fastmcp is slow to import
    from fastmcp.client.transports import StreamableHttpTransport

    started = time.monotonic()

    def yielding() -> bool:
        return begun.ahead and begun.handed_at is None

    def deadline() -> float:
        # A sandbox made ahead and still yielding is starved, not stuck: its deadline
        # starts when its job claims it.
        if yielding():
            return math.inf
        return max(started, begun.handed_at or started) + timeout_s

    checked = started
    ui_serving = asyncio.ensure_future(printed(box.ui, UI_SERVING_MARKER)) if by_event else None

    async def pause(for_ui: bool = False) -> None:
        nonlocal checked
        every = YIELDING_POLL_S if yielding() else LIVENESS_INTERVAL_S
        if time.monotonic() - checked >= every:  # a Docker API call: not every poll
            await asyncio.to_thread(check_alive, box, deadline(), timeout_s)
            checked = time.monotonic()
        if for_ui and ui_serving is not None and not ui_serving.done():
            # Ends the moment the line is printed; a bounded wait, so a UI that prints
            # another line (another GAIA) is still found by the probe, a second later.
            await asyncio.wait({ui_serving}, timeout=UI_EVENT_WAIT_S)
        elif yielding():
            handed = asyncio.ensure_future(begun.handed.wait())
            await asyncio.wait({handed}, timeout=YIELDING_POLL_S)
            handed.cancel()
        else:
            await asyncio.sleep(poll_s)

    try:
        while True:
            try:
                if not await listening(box.mcp_url):
                    await pause()
                    continue
                transport = StreamableHttpTransport(box.mcp_url, headers=box.mcp_headers)
                async with Client(transport, timeout=5) as client:
                    await client.list_tools()
                    box.timings.setdefault("mcp_ready_s", time.monotonic() - started)
                    while not await ui_answers_through(client):
                        await pause(for_ui=True)
                box.timings["ui_ready_s"] = time.monotonic() - started
                return
            except SandboxError:
                raise
            except Exception:  # noqa: BLE001 — any other failure here means "not ready yet"
                await pause()
    finally:
        if ui_serving is not None:
            ui_serving.cancel()


def check_alive(box: DockerSandbox, deadline: float, timeout_s: float) -> None:
    """Raise a ``SandboxError`` if the starting sandbox's container ended, or ``deadline``
    (time.monotonic()) passed; ``timeout_s`` is the limit the message names."""
    state = state_of(box.ui)
    if state is not None and box.ui.status != "created":
        tail = "" if state == "was removed" else box.ui.logs(tail=15).decode(errors="replace")
        raise SandboxError(f"{box.ui.name} {state}{whose_end(box.ui)} during start-up:\n{tail}")
    if time.monotonic() > deadline:
        raise SandboxError(
            f"sandbox for {box.scenario_id} was not ready within {timeout_s:.0f} s "
            f"(MCP {box.mcp_url}); see `docker logs {box.ui.name}`"
        )


async def listening(url: str) -> bool:
    """Whether the bridge's port accepts a connection yet. Probed before an MCP client is made:
    building one costs ~10 ms of the engine's CPU (httpx loads the CA bundle into a new SSL
    context, even for http://), and a client per 50 ms poll cost a 6-scenario run ~6 s of it."""
    parts = urlsplit(url)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, parts.port), 2.0)
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True


async def ui_answers_through(client: Any) -> bool:
    """True once GAIA's bridge reaches the UI: ``system_status`` is not the bridge's error
    reply (it turns a refused connection into ``{"status": "error", ...}``)."""
    result = await client.call_tool("system_status", {}, raise_on_error=False)
    if result.is_error:
        return False
    data = result.structured_content or {}
    if set(data) == {"result"} and isinstance(data["result"], dict):
        data = data["result"]
    return bool(data) and data.get("status") != "error"


def gaia_import_s(ui: Container) -> float | None:
    """Seconds from the Agent UI container's process start to GAIA imported, from Docker's
    own clock on both ends (``State.StartedAt`` and the log line's timestamp); None when
    either is unknown. Measured inside the sandbox, so the engine's polling does not count."""
    try:
        ui.reload()
        started = docker_time(str(ui.attrs["State"]["StartedAt"]))
        imported = logged_at(ui, UI_IMPORTED_MARKER)
    except (APIError, NotFound, KeyError, ValueError):
        return None
    return None if imported is None else round(imported - started, 3)
