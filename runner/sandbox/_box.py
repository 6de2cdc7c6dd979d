"""The records of a Docker sandbox: the running sandbox (and its collection), a start underway."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

from docker.models.containers import Container
from docker.models.networks import Network

from runner.sandbox._collect import Collector, save_llm_stats
from runner.sandbox._container import state_of
from runner.sandbox._exec import exec_ui_request, snapshot_chat_db
from runner.sandbox._logs import save_logs
from runner.sandbox._protocol import SandboxError
from runner.sandbox._ui import UiReply


@dataclass
class DockerSandbox:
    """A running sandbox. ``mcp_url`` and ``llm_url`` are valid from wherever the engine runs;
    ``ui_url`` names where the UI listens inside its container (reach it with ``ui_request``)."""

    scenario_id: str
    ui_url: str
    mcp_url: str
    llm_url: str
    corpus_root: PurePosixPath
    ui: Container  # the sandbox's one container: the Agent UI, its bridge forked inside it
    mcp_headers: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    died: str | None = None  # set by the backend's watchdog when a container died mid-scenario
    # The UI's address on its sandbox network: how the LLM front door names this sandbox's
    # requests (trialbox_llm/meter.py); the token lets the engine read them.
    llm_client: str | None = None
    llm_token: str | None = field(default=None, repr=False)
    opened_at: float = field(default_factory=time.time)

    async def ui_request(self, method: str, path: str, body: dict[str, Any] | None = None) -> UiReply:
        """One request to the Agent UI from inside its own container (its port is loopback-only)."""
        return await asyncio.to_thread(exec_ui_request, self.ui, method, path, body)

    async def collect(self, dest: Path) -> list[str]:
        """Copy the chat DB, the UI's and the bridge's logs and the LLM server's stats into
        dest; what could not be collected is returned and written to ``collect-errors.txt``."""
        collector = Collector(dest)
        state = await asyncio.to_thread(state_of, self.ui)
        if state is None:
            await collector.step("gaia_chat.db", lambda: asyncio.to_thread(snapshot_chat_db, self.ui, dest))
        else:
            collector.note("gaia_chat.db", f"the Agent UI container {state}; the chat database lived "
                                           "on its tmpfs and went with it")
        await collector.step("agent-ui.log, mcp.log", partial(asyncio.to_thread, save_logs, self.ui, dest))
        await collector.step("llm-stats.json", lambda: self._save_llm_stats(dest))
        return collector.finish()

    async def _save_llm_stats(self, dest: Path) -> None:
        await save_llm_stats(dest, self.llm_url, self.llm_client, self.opened_at, self.llm_token)


@dataclass
class _Made:
    """What a sandbox start has created so far. The worker thread records each object the
    moment Docker returns it, so teardown knows it even when the start was cancelled."""

    network: Network | None = None
    containers: list[Container] = field(default_factory=list)


@dataclass
class DockerStart:
    """A sandbox being made by ``DockerBackend.start``: what exists so far and, once its
    containers run, the sandbox itself (not yet ready)."""

    scenario_id: str
    memory: bool
    made: _Made
    started: float  # time.perf_counter() when the start began
    box: DockerSandbox | None = None
    stopped: bool = False
    # Made ahead of its job (the warm pool): its containers run at SPARE_CPU_SHARES and their
    # start cap until ``hand_over`` (then ``handed_at``, time.monotonic()) gives them the
    # sandbox's weight — and its cap, once ``ready`` has also returned (``readied``).
    ahead: bool = False
    handed_at: float | None = None
    readied: bool = False
    handed: asyncio.Event = field(default_factory=asyncio.Event)  # set by ``hand_over``

    @property
    def sandbox(self) -> DockerSandbox:
        if self.box is None:
            raise SandboxError(f"the sandbox for {self.scenario_id} was never created")
        return self.box
