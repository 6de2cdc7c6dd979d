"""What the engine may assume about a sandbox, whichever backend made it.

A sandbox is one fresh GAIA Agent UI plus one GAIA MCP bridge pointed at it, with an empty chat
database and RAG cache, reachable from wherever the engine runs. The target drives it only
through ``mcp_url`` (plus ``ui_request`` for the switches GAIA's MCP tools do not offer: the
session device and the model override; in a Docker sandbox the UI's port is reachable by
nobody but the sandbox's own bridge, so ``ui_request`` goes through ``docker exec``).
Backends: ``LocalBackend`` (host processes, dev and tests) and
``DockerBackend`` (containers, the default).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path, PurePath
from typing import Any, Protocol, runtime_checkable

from runner.sandbox._ui import UiReply


class SandboxError(RuntimeError):
    """A sandbox could not be created or did not become ready (an infrastructure failure)."""


@runtime_checkable
class Sandbox(Protocol):
    """One isolated Agent UI + MCP bridge for one scenario."""

    scenario_id: str
    # The Agent UI origin, e.g. http://127.0.0.1:41234 (no trailing slash). For a Docker
    # sandbox it names where the UI listens inside its container (informational only).
    ui_url: str
    mcp_url: str  # GAIA's MCP bridge over streamable HTTP, e.g. http://127.0.0.1:41235/mcp
    # Extra HTTP headers every MCP request needs: GAIA's bridge demands a bearer token when it
    # listens on a non-loopback address (GAIA_AGENT_UI_MCP_TOKEN); empty on loopback.
    mcp_headers: dict[str, str]
    llm_url: str  # the LLM server origin as the engine reaches it (for /api/v1/stats)
    timings: dict[str, float]  # start-up measurements, e.g. {"ui_ready_s", "cold_start_s"}

    # Read-only, so a sandbox may narrow it (Path on the host, PurePosixPath in a container).
    @property
    def corpus_root(self) -> PurePath:
        """The corpus folder as the *Agent UI* sees it (index paths use this)."""
        ...

    async def ui_request(self, method: str, path: str, body: dict[str, Any] | None = None) -> UiReply:
        """One JSON request to the Agent UI itself (``X-Gaia-UI: 1`` is sent); raises
        SandboxError when the UI cannot be reached at all."""
        ...

    async def collect(self, dest: Path) -> list[str]:
        """Copy the chat DB (gaia_chat.db), agent-ui.log, mcp.log and llm-stats.json into dest.

        Collects what it can: each artifact that could not be collected is named, with why, in
        the returned list (and in ``dest/collect-errors.txt``) instead of an exception, so a
        dead container never costs the conversation."""
        ...


class SandboxBackend(Protocol):
    """Makes sandboxes: ``async with backend.open(scenario_id, memory=...) as box: ...``.

    ``memory=True`` runs the Agent UI with GAIA's long-term memory on (and its memory tools
    offered over MCP); otherwise memory is off, as GAIA's extra memory calls would only slow
    other scenarios down. Leaving the context tears everything down — processes or
    containers, temporary state — also on error and on task cancellation.
    """

    def open(
        self, scenario_id: str, *, memory: bool = False
    ) -> AbstractAsyncContextManager[Sandbox]: ...
