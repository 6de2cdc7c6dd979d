"""Attach to an Agent UI the user already runs: no sandbox is created, nothing is torn down.

GAIA's own baselines were made against a running Agent UI (``gaia eval agent --backend
http://localhost:4211``), so this is a real workflow: a developer points trialbox at the UI
they are working on. The price is said plainly by the caller: no isolation (scenarios share
the UI's chat database, RAG cache and memory), no clean state, and whatever agents and model
that UI has. ``open`` checks the bridge answers and hands out the same box every time.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from runner.sandbox._collect import Collector
from runner.sandbox._protocol import SandboxError
from runner.sandbox._ui import UiReply, http_ui_request
from runner.sandbox.local import _llm_stats
from runner.system.writes import atomic_write

#: GAIA's bridge demands this bearer token when it listens on a non-loopback address.
MCP_TOKEN_ENV = "GAIA_AGENT_UI_MCP_TOKEN"
#: The port GAIA's Agent UI listens on unless told otherwise (``python -m gaia.ui.server``).
DEFAULT_UI_PORT = 4200
#: What collect() writes in place of the artifacts it cannot reach, and why.
NOT_COLLECTED = {
    "gaia_chat.db": "the attached Agent UI's GAIA_HOME is not trialbox's to copy",
    "agent-ui.log": "the attached Agent UI's output goes wherever its owner started it",
    "mcp.log": "the attached MCP bridge's output goes wherever its owner started it",
}


def mcp_endpoint(url: str) -> str:
    """GAIA's bridge serves streamable HTTP at ``/mcp``: a bare origin gets that path."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SandboxError(f"--target-url {url!r}: give the MCP bridge's http(s) URL, "
                           "e.g. http://localhost:8765/mcp")
    path = parts.path if parts.path not in ("", "/") else "/mcp"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def default_ui_url(mcp_url: str) -> str:
    """The Agent UI beside the bridge: the bridge's host at GAIA's UI port. GAIA starts the two
    on one machine (the bridge's ``--backend`` defaults to localhost:4200), so a bridge reached
    at another address has its UI there too."""
    host = urlsplit(mcp_url).hostname or "localhost"
    return f"http://{f'[{host}]' if ':' in host else host}:{DEFAULT_UI_PORT}"


@dataclass
class AttachedSandbox:
    """The running Agent UI, seen as a sandbox (``runner.sandbox._protocol.Sandbox``)."""

    scenario_id: str
    ui_url: str
    mcp_url: str
    llm_url: str
    corpus_root: PurePath
    mcp_headers: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    async def ui_request(self, method: str, path: str, body: dict[str, Any] | None = None) -> UiReply:
        """One request to the attached Agent UI at the URL the user gave."""
        try:
            return await http_ui_request(self.ui_url, method, path, body)
        except httpx.HTTPError as exc:
            raise SandboxError(f"the attached Agent UI at {self.ui_url} did not answer {method} "
                               f"{path}: {type(exc).__name__}: {exc}") from exc

    async def collect(self, dest: Path) -> list[str]:
        """The LLM server's stats when it is known; a note for everything else.

        Each file is written whole or not at all, and one whose name is taken by a folder, a
        FIFO or a device is refused and left as it is (runner/system/writes.py): a write that
        fails is one returned problem (and a line of collect-errors.txt), as for a local box."""
        collector = Collector(dest)
        if self.llm_url:
            async def stats() -> None:
                text = await _llm_stats(self.llm_url)
                await asyncio.to_thread(atomic_write, dest / "llm-stats.json", text)
            await collector.step("llm-stats.json", stats)
        note = {"attached": self.mcp_url, "not_collected": NOT_COLLECTED}
        await collector.step("attached.json", lambda: asyncio.to_thread(
            atomic_write, dest / "attached.json", json.dumps(note, indent=2) + "\n"))
        # Not collectable by design, said in attached.json: not problems of this scenario.
        return collector.finish()


class AttachBackend:
    """Hands out the already running Agent UI behind ``mcp_url`` for every scenario."""

    def __init__(
        self,
        mcp_url: str,
        corpus_root: Path | PurePath,
        ui_url: str | None = None,
        llm_url: str = "",
        token: str | None = None,
        ready_timeout_s: float = 10.0,
    ) -> None:
        """``corpus_root``: the corpus as the attached UI sees it (document paths are sent as
        text, so it is not checked here); ``ui_url``: the UI itself, used only to switch a
        session's device (default: ``default_ui_url`` of the bridge's URL); ``token``: the
        bridge's bearer token (default: $GAIA_AGENT_UI_MCP_TOKEN)."""
        self.mcp_url = mcp_endpoint(mcp_url)
        self.corpus_root = corpus_root
        self.ui_url = (ui_url or default_ui_url(self.mcp_url)).rstrip("/")
        self.llm_url = llm_url.rstrip("/")
        token = token if token is not None else os.environ.get(MCP_TOKEN_ENV, "")
        self.headers = {"Authorization": f"Bearer {token}"} if token.strip() else {}
        self.ready_timeout_s = ready_timeout_s

    @asynccontextmanager
    async def open(self, scenario_id: str, *, memory: bool = False) -> AsyncIterator[AttachedSandbox]:
        # `memory` cannot be switched on someone else's Agent UI: it runs as its owner set it.
        started = time.perf_counter()
        await self._check_reachable()
        box = AttachedSandbox(
            scenario_id=scenario_id,
            ui_url=self.ui_url,
            mcp_url=self.mcp_url,
            llm_url=self.llm_url,
            corpus_root=self.corpus_root,
            mcp_headers=dict(self.headers),
        )
        box.timings["cold_start_s"] = time.perf_counter() - started
        yield box

    async def _check_reachable(self) -> None:
        """GAIA's bridge does not answer MCP ping; listing its tools is the probe."""
        from fastmcp import Client  # imported late: fastmcp is slow to import
        from fastmcp.client.transports import StreamableHttpTransport

        transport = StreamableHttpTransport(self.mcp_url, headers=dict(self.headers))
        try:
            async with Client(transport, timeout=self.ready_timeout_s) as client:
                tools = {tool.name for tool in await client.list_tools()}
        except Exception as exc:  # any failure means "cannot attach"
            raise SandboxError(
                f"--target-url {self.mcp_url}: no GAIA MCP bridge answers ({type(exc).__name__}: "
                f"{str(exc)[:200]}); start one with `python -m gaia.mcp.servers.agent_ui_mcp "
                f"--backend {self.ui_url}` (set {MCP_TOKEN_ENV} when it needs a token)"
            ) from exc
        if "create_session" not in tools:
            raise SandboxError(
                f"--target-url {self.mcp_url} answers MCP but offers no create_session tool; "
                "point it at GAIA's Agent UI MCP bridge (gaia.mcp.servers.agent_ui_mcp)"
            )
