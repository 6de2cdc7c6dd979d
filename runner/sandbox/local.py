"""Local sandboxes: one Agent UI and one MCP bridge as host processes per scenario.

For development and the integration tests: no Docker, same entrypoint as the agent-ui image
(``images/agent-ui/entrypoint.py``), so a local sandbox is prepared exactly like a container.
Each sandbox gets a fresh temporary GAIA_HOME and two free loopback ports. Every process is
started in its own session (process group) so teardown can signal the whole group; GAIA's
Agent UI additionally spawns a background daemon in a session of its own, which we stop by
the pid it registers in ``$GAIA_HOME/host/instance.json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from runner.sandbox._collect import Collector, save_llm_stats
from runner.sandbox._configure import set_agent_model
from runner.sandbox._environment import sandbox_environment
from runner.sandbox._protocol import SandboxError
from runner.sandbox._threads import finish_in_thread
from runner.sandbox._ui import UiReply, http_ui_request
from runner.sandbox.names import safe_name
from runner.system.ports import free_port
from runner.system.processes import is_alive
from runner.system.writes import atomic_replace

REPO_ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = REPO_ROOT / "images" / "agent-ui" / "entrypoint.py"
DEFAULT_GAIA_PYTHON = REPO_ROOT / ".venv-gaia" / "bin" / "python"
#: Seconds a process group gets between SIGTERM and SIGKILL.
STOP_GRACE_S = 10.0


@dataclass
class LocalSandbox:
    """A running local sandbox; see ``runner.sandbox._protocol.Sandbox``."""

    scenario_id: str
    ui_url: str
    mcp_url: str
    llm_url: str
    corpus_root: Path
    home: Path  # this sandbox's GAIA_HOME
    logs: Path  # folder holding agent-ui.log and mcp.log
    mcp_headers: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    # None: the front door names this sandbox's requests by the engine's own address (both on
    # loopback), so one local sandbox at a time is told apart (see design/architecture.md).
    llm_client: str | None = None
    # True when other local sandboxes run at the same time: their requests reach the front door
    # from the same 127.0.0.1, so its records of "this" sandbox would be theirs too.
    front_door_shared: bool = False
    opened_at: float = field(default_factory=time.time)

    async def ui_request(self, method: str, path: str, body: dict[str, Any] | None = None) -> UiReply:
        """One request to the Agent UI on loopback."""
        return await http_ui_request(self.ui_url, method, path, body)

    async def collect(self, dest: Path) -> list[str]:
        """Copy the chat DB, both logs and the LLM server's stats into dest; what could not be
        collected is returned and written to ``collect-errors.txt``."""
        collector = Collector(dest)
        database = self.home / "chat" / "gaia_chat.db"
        if database.exists():
            await collector.step("gaia_chat.db", lambda: asyncio.to_thread(
                _snapshot_sqlite, database, dest / "gaia_chat.db"))
        else:
            collector.note("gaia_chat.db", f"{database} does not exist (the Agent UI never wrote it)")
        for name in ("agent-ui.log", "mcp.log"):
            if (self.logs / name).exists():
                await collector.step(name, partial(asyncio.to_thread, atomic_replace, dest / name,
                                                   partial(shutil.copyfile, self.logs / name)))
        await collector.step("llm-stats.json", lambda: save_llm_stats(
            dest, self.llm_url, self.llm_client, self.opened_at, shared=self.front_door_shared))
        return collector.finish()


def _snapshot_sqlite(source: Path, target: Path) -> None:
    """A consistent copy of a live database (GAIA writes in WAL mode; a file copy may miss rows),
    in place only once whole."""
    def backup(tmp: Path) -> None:
        live, copy = sqlite3.connect(f"file:{source}?mode=ro", uri=True), sqlite3.connect(tmp)
        try:
            live.backup(copy)
        finally:
            copy.close()  # closed before the rename: the copy is complete on disk
            live.close()

    atomic_replace(target, backup)


async def _llm_stats(llm_url: str) -> str:
    try:
        async with httpx.AsyncClient(timeout=5) as client:
            response = await client.get(f"{llm_url.rstrip('/')}/api/v1/stats")
        return response.text
    except httpx.HTTPError as exc:
        return json.dumps({"error": f"{type(exc).__name__}: {exc}"})


class LocalBackend:
    """Starts sandboxes as host processes next to an already running LLM server."""

    def __init__(
        self,
        llm_url: str,
        corpus_root: Path,
        gaia_python: Path | str | None = None,
        ready_timeout_s: float = 90.0,
        keep_state: bool = False,
        agent_dirs: Sequence[Path] = (),
        agent_model: str | None = None,
        concurrent: bool = False,
    ) -> None:
        """``agent_dirs``: the user's folders of ``<id>/agent.py`` agents, linked (never copied
        or written to) into each sandbox's GAIA_HOME; ``agent_model``: the chat model every
        turn asks for (None: GAIA's own choice); ``concurrent``: sandboxes may run at the same
        time (then none of them can be told apart at the front door)."""
        self.concurrent = concurrent
        self.llm_url = llm_url.rstrip("/")
        self.agent_dirs = [Path(d).resolve() for d in agent_dirs]
        self.agent_model = agent_model
        self.corpus_root = Path(corpus_root).resolve()
        self.gaia_python = Path(gaia_python or DEFAULT_GAIA_PYTHON)
        self.ready_timeout_s = ready_timeout_s
        self.keep_state = keep_state  # keep the temp folder after teardown (debugging)
        if not self.gaia_python.exists():
            raise SandboxError(
                f"GAIA interpreter {self.gaia_python} not found — create it with "
                "`scripts/setup-gaia-venv`"
            )
        if not self.corpus_root.is_dir():
            raise SandboxError(f"corpus root {self.corpus_root} is not a directory")

    @asynccontextmanager
    async def open(self, scenario_id: str, *, memory: bool = False) -> AsyncIterator[LocalSandbox]:
        started = time.perf_counter()
        state = Path(tempfile.mkdtemp(prefix=f"trialbox-{safe_name(scenario_id)[:40]}-"))
        processes: list[subprocess.Popen[bytes]] = []
        box = LocalSandbox(
            scenario_id=scenario_id,
            ui_url=f"http://127.0.0.1:{free_port()}",
            mcp_url="",
            llm_url=self.llm_url,
            corpus_root=self.corpus_root,
            home=state / "gaia-home",
            logs=state,
            front_door_shared=self.concurrent,
        )
        try:
            # Both start at once: the bridge only proxies, and its imports take longer
            # than the UI's start-up.
            mcp_port = free_port()
            box.mcp_url = f"http://127.0.0.1:{mcp_port}/mcp"
            processes.append(self._start_ui(box, memory))
            processes.append(self._start_mcp(box, mcp_port, memory))
            await self._wait_for_ui(box, processes[0], started)
            await self._wait_for_mcp(box, processes[1], started)
            if self.agent_model:
                await set_agent_model(box, self.agent_model)
            box.timings["cold_start_s"] = time.perf_counter() - started
            yield box
        finally:
            # Run to its end even when cancelled (again): the processes must be stopped
            # before the run unwinds.
            await finish_in_thread(self._teardown, box, processes, state)

    # -- start-up ---------------------------------------------------------------------------

    def _spawn(self, args: list[str], log: Path) -> subprocess.Popen[bytes]:
        """Start the entrypoint in its own session, from the sandbox's folder (some GAIA tools
        default to the working directory), logging to ``log``."""
        with open(log, "ab") as sink:
            return subprocess.Popen(
                [str(self.gaia_python), str(ENTRYPOINT), *args],
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: teardown signals all of it
                # Safety net for a runner killed outright (SIGKILL, OOM): the entrypoint asks
                # the kernel to kill it when this process dies. Teardown never relies on it.
                # An allow-list, never the runner's own environment (it holds the judge's key).
                env=sandbox_environment({"TRIALBOX_EXIT_WITH_PARENT": str(os.getpid())}),
                cwd=log.parent,
            )

    def _start_ui(self, box: LocalSandbox, memory: bool = False) -> subprocess.Popen[bytes]:
        port = box.ui_url.rsplit(":", 1)[1]
        args = [
            "ui", "--home", str(box.home), "--llm-url", self.llm_url,
            "--host", "127.0.0.1", "--port", port,
            "--document-root", str(self.corpus_root),
        ]  # fmt: skip
        for folder in self.agent_dirs:
            args += ["--agent-dir", str(folder)]
        if memory:
            args.append("--memory")
        tiktoken_cache = self.gaia_python.parent.parent / "share" / "tiktoken-cache"
        if tiktoken_cache.is_dir():
            args += ["--tiktoken-cache", str(tiktoken_cache)]
        return self._spawn(args, box.logs / "agent-ui.log")

    def _start_mcp(self, box: LocalSandbox, port: int, memory: bool = False) -> subprocess.Popen[bytes]:
        args = ["mcp", "--ui-url", box.ui_url, "--host", "127.0.0.1", "--port", str(port)]
        if memory:
            args.append("--memory")
        return self._spawn(args, box.logs / "mcp.log")

    async def _wait_for_ui(
        self, box: LocalSandbox, process: subprocess.Popen[bytes], started: float
    ) -> None:
        async with httpx.AsyncClient(timeout=2) as http:
            while True:
                try:
                    if (await http.get(f"{box.ui_url}/api/health")).status_code == 200:
                        box.timings["ui_ready_s"] = time.perf_counter() - started
                        return
                except httpx.HTTPError:
                    pass
                self._check_alive(box, process, "agent-ui.log", started)
                await asyncio.sleep(0.1)

    async def _wait_for_mcp(
        self, box: LocalSandbox, process: subprocess.Popen[bytes], started: float
    ) -> None:
        """GAIA's bridge does not answer MCP ping; listing its tools is the readiness probe."""
        from fastmcp import Client  # imported late: fastmcp is slow to import

        while True:
            try:
                async with Client(box.mcp_url, timeout=5) as client:
                    await client.list_tools()
                box.timings["mcp_ready_s"] = time.perf_counter() - started
                return
            except Exception:  # noqa: BLE001 — any failure here only means "not ready yet"
                self._check_alive(box, process, "mcp.log", started)
                await asyncio.sleep(0.1)

    def _check_alive(
        self, box: LocalSandbox, process: subprocess.Popen[bytes], log: str, started: float
    ) -> None:
        if process.poll() is not None:
            raise SandboxError(
                f"{log.removesuffix('.log')} for {box.scenario_id} exited with code "
                f"{process.returncode} during start-up; last lines of {box.logs / log}:\n"
                f"{_tail(box.logs / log)}"
            )
        if time.perf_counter() - started > self.ready_timeout_s:
            raise SandboxError(
                f"sandbox for {box.scenario_id} was not ready within {self.ready_timeout_s:.0f} s "
                f"(UI {box.ui_url}, MCP {box.mcp_url or 'not started'}); see {box.logs / log}"
            )

    # -- teardown ---------------------------------------------------------------------------

    def _teardown(
        self, box: LocalSandbox, processes: list[subprocess.Popen[bytes]], state: Path
    ) -> None:
        # The bridge first (it holds connections to the UI), then the UI, then whatever else
        # still runs with this GAIA_HOME: GAIA's daemon, possibly spawned a moment before the
        # UI stopped and not yet registered in instance.json.
        for process in reversed(processes):
            _stop_group(process.pid, _has_exited(process))
        stragglers = set(_processes_with_home(box.home))
        if (registered := _daemon_pid(box.home)) is not None and is_alive(registered):
            stragglers.add(registered)
        for pid in stragglers:
            _stop_group(pid, _pid_gone(pid))
        if not self.keep_state:
            shutil.rmtree(state, ignore_errors=True)


def _has_exited(process: subprocess.Popen[bytes]) -> Callable[[], bool]:
    return lambda: process.poll() is not None


def _pid_gone(pid: int) -> Callable[[], bool]:
    return lambda: not is_alive(pid)


def _processes_with_home(home: Path) -> list[int]:
    """Live processes whose environment names this GAIA_HOME (Linux /proc; [] elsewhere)."""
    marker = f"GAIA_HOME={home}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker in environ and is_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def _daemon_pid(home: Path) -> int | None:
    try:
        pid = json.loads((home / "host" / "instance.json").read_text()).get("pid")
    except (OSError, ValueError):
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


def _stop_group(pid: int, exited: Callable[[], bool]) -> None:
    """SIGTERM the process group led by pid (or pid alone if it leads none), then SIGKILL.

    GAIA's servers may wait for open connections before exiting, so after STOP_GRACE_S they
    are killed; once the leader is gone the group is swept once more for children.
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _signal(pid, sig):
            return
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline:
            if exited():
                _signal(pid, signal.SIGKILL)
                return
            time.sleep(0.05)


def _signal(pid: int, sig: signal.Signals) -> bool:
    """Signal pid's process group, or pid itself; False when neither exists any more."""
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        pass
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
