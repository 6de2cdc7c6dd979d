"""Docker sandboxes: one fresh container per scenario, running the Agent UI and its MCP bridge.

The container runs the entrypoint's ``pair`` mode: GAIA is imported once and the bridge is
forked from the Agent UI's process, so a sandbox pays for one interpreter's imports instead of
two (images/agent-ui/entrypoint.py). The two stay separate processes with their own
environments; the bridge's output lines reach the container's log prefixed with
``BRIDGE_PREFIX``, and collecting splits that log into agent-ui.log and mcp.log.

Each sandbox gets its own *internal* bridge network. Only two endpoints are on it: the sandbox
container and the shared LLM server (attached under the alias ``llm``). The Agent UI therefore
reaches the LLM server and nothing else, and two sandboxes never share a network. The host
firewall keeps the sandbox off the host itself (``_firewall``).

Who can talk to what:

- the Agent UI listens on its container's *loopback* only. GAIA's UI has no authentication, so
  a reachable port would let any local process drive it; on loopback only its own MCP bridge
  (same container) reaches it. trialbox itself reaches it with ``docker exec`` for the
  two switches the MCP tools lack (``DockerSandbox.ui_request``) — which needs the Docker
  socket, i.e. root on this host already.
- the MCP bridge listens on the sandbox address, guarded by GAIA's own bearer token (one
  random 48-character token per sandbox, known only to this process).
- the engine reaches the bridge by the sandbox's address on the bridge, which the host routes
  to directly (no port is published, so nothing outside this machine can reach a sandbox) —
  on the host and inside the runner container alike: the runner container lives in the host's
  network namespace (compose ``network_mode: host``), so it is never an endpoint on a sandbox
  network and a sandbox sees exactly what it sees in host mode: itself and ``llm``. The
  firewall rules are the same in both modes (``_firewall``; in the runner container, which has
  no capabilities, a short-lived helper container installs them).

No leaks, whatever the timing: everything created carries ``trialbox.run=<run id>`` and
``trialbox.scenario=<job key>``. Creation runs in a worker thread that records each object the
moment it exists; a cancelled ``open`` (Ctrl-C, ``--timeout``) waits for that thread to finish
before tearing down, so nothing is created after teardown ran, and teardown then also sweeps
the job's labels for anything a failed call created without handing it back. The LLM server
is force-disconnected from the sandbox network before the network is removed — also when it
is stopped, else ``docker start`` of it fails on the vanished network.

A container that dies mid-scenario (OOM, ``docker kill``) is noticed within
``WATCH_INTERVAL_S`` and ends the scenario with a ``SandboxError`` that says which container
and how it ended, instead of MCP calls hanging until their read timeout. The bridge and the UI
end together: a bridge that ends stops its UI (exit ``BRIDGE_ENDED_EXIT``), a UI that dies takes
its bridge.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any, cast
from urllib.parse import urlsplit

import docker
from docker.errors import APIError, DockerException, NotFound
from docker.models.containers import Container
from docker.models.networks import Network

from runner.sandbox._collect import Collector, llm_admin_token, save_llm_stats
from runner.sandbox._configure import set_agent_model
from runner.sandbox._firewall import FirewallError, isolate_network, release_network
from runner.sandbox._hardening import (
    ROLES,
    Role,
    claimed_cpu,
    container_options,
    limits_for,
    read_file,
)
from runner.sandbox._protocol import SandboxError
from runner.sandbox._threads import finish_in_thread
from runner.sandbox._ui import UiReply

AGENT_UI_IMAGE = "trialbox/agent-ui:dev"
UI_PORT = 4200
MCP_PORT = 8765
#: The container's exit code when its bridge ended first, and what starts each of the bridge's
#: lines in the container's log (images/agent-ui/entrypoint.py BRIDGE_ENDED_EXIT and
#: BRIDGE_PREFIX; a unit test keeps them equal).
BRIDGE_ENDED_EXIT = 70
BRIDGE_PREFIX = b"[mcp] "
LLM_PORT = 13305
CORPUS_MOUNT = "/corpus"
# Where the user's --agent-dir folders are mounted (read-only), one numbered folder each; the
# entrypoint links their <id> sub-folders into $GAIA_HOME/agents, where GAIA loads agents.
AGENT_DIRS_MOUNT = "/opt/trialbox/agent-dirs"
# Where the agent-ui image keeps GAIA's state; the chat DB is collected from here.
GAIA_HOME = "/home/gaia/.gaia"
# GAIA's bridge accepts a non-loopback bind only with a bearer token of 32+ characters.
MCP_TOKEN_ENV = "GAIA_AGENT_UI_MCP_TOKEN"
#: Longest one ``docker exec`` request to the UI may take (a device switch answers in < 1 s).
UI_REQUEST_TIMEOUT_S = 30
#: How often a running sandbox's containers are checked for death (a Docker API call each).
WATCH_INTERVAL_S = 2.0
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
RUN_LABEL = "trialbox.run"
#: The shape docker-py's ``list(filters=...)`` takes.
_Filters = dict[str, str | list[str] | bool]
JOB_LABEL = "trialbox.scenario"


def sandbox_name(run_id: str, job_key: str) -> str:
    """Container and network names: a short hash of run + job makes them unique whatever the
    id's length (a cut prefix made two long ids collide), and a readable part helps `docker ps`."""
    digest = hashlib.sha256(f"{run_id}\0{job_key}".encode()).hexdigest()[:12]
    return f"tbx-{digest}-{_slug(job_key)[:30]}"


def _slug(text: str) -> str:
    """Docker names allow [a-zA-Z0-9_.-]; scenario ids are snake_case but be safe."""
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", text)[:60]


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
        return await asyncio.to_thread(_exec_ui_request, self.ui, method, path, body)

    async def collect(self, dest: Path) -> list[str]:
        """Copy the chat DB, the UI's and the bridge's logs and the LLM server's stats into
        dest; what could not be collected is returned and written to ``collect-errors.txt``."""
        collector = Collector(dest)
        state = await asyncio.to_thread(_state_of, self.ui)
        if state is None:
            await collector.step("gaia_chat.db", lambda: asyncio.to_thread(_snapshot_chat_db, self.ui, dest))
        else:
            collector.note("gaia_chat.db", f"the Agent UI container {state}; the chat database lived "
                                           "on its tmpfs and went with it")
        await collector.step("agent-ui.log, mcp.log", partial(asyncio.to_thread, _save_logs, self.ui, dest))
        await collector.step("llm-stats.json", lambda: self._save_llm_stats(dest))
        return collector.finish()

    async def _save_llm_stats(self, dest: Path) -> None:
        await save_llm_stats(dest, self.llm_url, self.llm_client, self.opened_at, self.llm_token)


def _state_of(container: Container) -> str | None:
    """None while the container runs, else what happened to it, in words."""
    try:
        container.reload()
    except NotFound:
        return "was removed"
    if container.status == "running":
        return None
    state = container.attrs.get("State", {})
    killed = " (killed: out of memory)" if state.get("OOMKilled") else ""
    return f"is {container.status} (exit code {state.get('ExitCode')}){killed}"


def _death_of(box: DockerSandbox) -> str | None:
    """How the sandbox's container ended, in words; None while it runs."""
    state = _state_of(box.ui)
    if state is None:
        return None
    return f"the Agent UI container {box.ui.name} {state}{_whose_end(box.ui)} mid-scenario"


def _whose_end(container: Container) -> str:
    """Which of its two processes ended the container, when its exit code says so."""
    if container.attrs.get("State", {}).get("ExitCode") == BRIDGE_ENDED_EXIT:
        return ": its MCP bridge ended, and the Agent UI with it"
    return ""


def _claim_cpu(containers: list[Container], *, capped: bool) -> None:
    """Give a claimed spare's containers the sandbox's CPU weight, and its cap if ``capped`` (by
    their role label); one already gone is left to the readiness check or the watchdog, which
    say how it ended."""
    for container in containers:
        try:
            container.update(**claimed_cpu(cast(Role, container.labels["trialbox.role"]), capped=capped))
        except (NotFound, APIError):
            pass


def _save_logs(container: Container, dest: Path) -> None:
    """The container's log, split again into the UI's (agent-ui.log) and the bridge's (mcp.log)."""
    ui, bridge = split_log(container.logs(stdout=True, stderr=True))
    (dest / "agent-ui.log").write_bytes(ui)
    (dest / "mcp.log").write_bytes(bridge)


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


# GAIA's chat DB runs in WAL mode: copying the file alone can miss committed rows, so take a
# consistent snapshot with SQLite's backup API inside the container, then copy that out.
_SNAPSHOT = (
    "import sqlite3, sys, os\n"
    "src = sys.argv[1]\n"
    "if os.path.exists(src):\n"
    "    out = sqlite3.connect('/tmp/gaia_chat.db')\n"
    "    sqlite3.connect(src).backup(out)\n"
    "    out.close()\n"
)


def _snapshot_chat_db(container: Container, dest: Path) -> None:
    result = container.exec_run(["python", "-c", _SNAPSHOT, f"{GAIA_HOME}/chat/gaia_chat.db"])
    if result.exit_code != 0:
        (dest / "gaia_chat.db.error").write_bytes(cast(bytes, result.output))  # not streamed: bytes
        raise SandboxError(f"the chat database snapshot failed (exit {result.exit_code}); "
                           "see gaia_chat.db.error")
    # /tmp is a tmpfs in a hardened sandbox: `docker cp` cannot see into it on Docker 20.10.
    data = read_file(container, "/tmp/gaia_chat.db")
    if data is not None:
        (dest / "gaia_chat.db").write_bytes(data)


# One request to the UI on the container's loopback (urllib: the image has no curl). Proxies
# are ignored on purpose: the UI is in this very network namespace. Prints {"status", "body"};
# exit 4 when nothing answers at all.
_UI_REQUEST = (
    "import json, sys, urllib.error, urllib.request\n"
    "method, url, body, timeout = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])\n"
    "opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))\n"
    "request = urllib.request.Request(url, method=method, data=body.encode() if body else None,\n"
    "    headers={'X-Gaia-UI': '1', 'Content-Type': 'application/json'})\n"
    "try:\n"
    "    reply = opener.open(request, timeout=timeout)\n"
    "    status, data = reply.status, reply.read()\n"
    "except urllib.error.HTTPError as error:\n"
    "    status, data = error.code, error.read()\n"
    "except OSError as error:\n"
    "    sys.stderr.write(str(error))\n"
    "    sys.exit(4)\n"
    "sys.stdout.write(json.dumps({'status': status, 'body': data.decode('utf-8', 'replace')}))\n"
)

def _exec_ui_request(ui: Container, method: str, path: str, body: dict[str, Any] | None) -> UiReply:
    url = f"http://127.0.0.1:{UI_PORT}{path}"
    payload = json.dumps(body) if body is not None else ""
    try:
        result = ui.exec_run(["python", "-c", _UI_REQUEST, method, url, payload, str(UI_REQUEST_TIMEOUT_S)],
                             demux=True)
    except (APIError, NotFound) as exc:
        raise SandboxError(f"cannot reach the Agent UI in {ui.name}: {_state_of(ui) or exc}") from exc
    # demux=True: (stdout, stderr) bytes or None each (docker-py's stubs say otherwise).
    stdout, stderr = cast("tuple[bytes | None, bytes | None]", result.output)
    if result.exit_code != 0:
        state = _state_of(ui)
        if state is not None:  # the container died under the request: say that, not "exit 137"
            raise SandboxError(f"the Agent UI container {ui.name} {state} (during {method} {path})")
        why = (stderr or b"").decode(errors="replace").strip()[-300:]
        raise SandboxError(f"the Agent UI in {ui.name} did not answer {method} {path} "
                           f"(exit {result.exit_code}): {why}")
    reply = json.loads(stdout or b"{}")
    return UiReply(status=int(reply["status"]), text=str(reply["body"]))


async def _listening(url: str) -> bool:
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


async def _ui_answers_through(client: Any) -> bool:
    """True once GAIA's bridge reaches the UI: ``system_status`` is not the bridge's error
    reply (it turns a refused connection into ``{"status": "error", ...}``)."""
    result = await client.call_tool("system_status", {}, raise_on_error=False)
    if result.is_error:
        return False
    data = result.structured_content or {}
    if set(data) == {"result"} and isinstance(data["result"], dict):
        data = data["result"]
    return bool(data) and data.get("status") != "error"


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


class DockerBackend:
    """Creates sandboxes next to an already running LLM server container."""

    def __init__(
        self,
        run_id: str,
        llm_container: str,
        corpus_host_dir: Path,
        image: str = AGENT_UI_IMAGE,
        ready_timeout_s: float = 120.0,
        client: docker.DockerClient | None = None,
        agent_dirs: Sequence[Path] = (),
        agent_model: str | None = None,
    ) -> None:
        """``agent_dirs`` and ``corpus_host_dir`` are paths on the Docker host (bind mounts);
        ``agent_model`` is the chat model every turn asks for (None: GAIA's choice)."""
        for role in ROLES:  # a bad TRIALBOX_SANDBOX_* is one error before anything starts
            limits_for(role)
        self.run_id = run_id
        self.llm_container = llm_container
        self.corpus_host_dir = corpus_host_dir
        self.image = image
        self.ready_timeout_s = ready_timeout_s
        self.client = client or docker.from_env()
        self.labels = {RUN_LABEL: run_id}
        self.agent_dirs = [Path(d) for d in agent_dirs]
        self.agent_model = agent_model
        self.last_teardown_s = 0.0
        self.watch_interval_s = WATCH_INTERVAL_S
        # How readiness is awaited (scripts/bench-sandbox compares the ways side by side).
        self.ready_poll_s = READY_POLL_S
        self.ready_by_event = True

    # A sandbox's life in three steps, so a warm pool (runner/sandbox/pool.py) can make one
    # ahead of its scenario: ``start`` creates it, ``ready`` waits until it answers, ``stop``
    # removes it. ``open`` chains them for a caller that wants one now.

    @asynccontextmanager
    async def open(self, scenario_id: str, *, memory: bool = False) -> AsyncIterator[DockerSandbox]:
        begun = await self.start(scenario_id, memory=memory)
        try:
            box = await self.ready(begun)
            async with self.watching(begun):
                yield box
        finally:
            await self.stop(begun)

    async def start(self, scenario_id: str, *, memory: bool = False, ahead: bool = False) -> DockerStart:
        """Create the sandbox's network and containers; hand the result to ``ready``, then
        always to ``stop``. A failed or cancelled start removes what it made before raising.
        ``ahead``: made before its job runs, at the least CPU weight until ``hand_over``."""
        begun = DockerStart(scenario_id, memory, _Made(), time.perf_counter(), ahead=ahead)
        try:
            begun.box = await finish_in_thread(self._create, scenario_id, begun.made, memory, ahead)
        except BaseException:
            await self.stop(begun)
            raise
        begun.box.timings["container_create_s"] = time.perf_counter() - begun.started
        return begun

    async def hand_over(self, begun: DockerStart) -> None:
        """Its job has claimed a sandbox made ahead: its containers get the normal sandbox
        weight, and its readiness deadline counts from now (yielding, it may have been starved
        for as long as the turn in flight kept the CPUs busy). The sandbox's CPU cap comes with
        it if the sandbox is ready, else when ``ready`` returns: until then its job only waits
        for it — nothing of the agent runs yet, the previous scenario is over — so the rest of
        its start may use the CPU that is free, its start cap, instead of the agent's cap (a
        claimed, unfinished start at 0.5 CPU on 2 cores made the job wait ~0.7 s more per
        scenario, `scripts/bench-harness --vs-attached`). Idempotent."""
        if not begun.ahead or begun.handed_at is not None:
            return
        begun.handed_at = time.monotonic()
        begun.handed.set()
        await asyncio.to_thread(_claim_cpu, list(begun.made.containers), capped=begun.readied)

    async def ready(self, begun: DockerStart) -> DockerSandbox:
        """Wait until the bridge and, through it, the UI answer; set the agent's model."""
        box = begun.sandbox
        await self._wait_ready(box, begun)
        begun.readied = True
        if begun.ahead and begun.handed_at is not None:  # claimed while it started: cap it now
            await asyncio.to_thread(_claim_cpu, list(begun.made.containers), capped=True)
        if self.agent_model:
            await set_agent_model(box, self.agent_model)
        box.timings["cold_start_s"] = time.perf_counter() - begun.started
        imported = await asyncio.to_thread(_gaia_import_s, box.ui)
        if imported is not None:
            box.timings["gaia_import_s"] = imported
        return box

    @asynccontextmanager
    async def watching(self, begun: DockerStart) -> AsyncIterator[None]:
        """While the sandbox is in use: a dead container cancels the task using it and is
        raised as a ``SandboxError`` that says which container and how it ended."""
        box = begun.sandbox
        task = asyncio.current_task()
        assert task is not None
        watchdog = asyncio.create_task(self._watch(box, task))
        try:
            yield
        except asyncio.CancelledError:
            # Our watchdog's cancellation (and no one else's): a container died.
            if box.died is not None and task.uncancel() == 0:
                raise SandboxError(box.died) from None
            raise
        except Exception as exc:
            # What the conversation saw of a death (the bridge's connection dropping with its
            # container) before the watchdog looked: the death is what went wrong.
            died = await asyncio.to_thread(_death_of, box)
            if died is not None:
                raise SandboxError(died) from exc
            raise
        finally:
            watchdog.cancel()
        # The watchdog looks every few seconds; a container that died since then (the bridge
        # answers "cannot connect" at once when the UI is killed) is still what went wrong.
        died = await asyncio.to_thread(_death_of, box)
        if died is not None:
            raise SandboxError(died)

    async def stop(self, begun: DockerStart) -> None:
        """Remove everything the start made (also found by its labels). Runs to its end even
        when cancelled; a second call does nothing."""
        if begun.stopped:
            return
        begun.stopped = True
        stopping = time.perf_counter()
        await finish_in_thread(self._teardown, begun.scenario_id, begun.made)
        self.last_teardown_s = time.perf_counter() - stopping

    # -- creation -------------------------------------------------------------------------

    def _create(self, scenario_id: str, made: _Made, memory: bool, spare: bool) -> DockerSandbox:
        network = self._create_network(scenario_id, made)
        return self._start(scenario_id, network, made, memory, spare)

    def _job_labels(self, scenario_id: str, role: str | None = None) -> dict[str, str]:
        labels = self.labels | {JOB_LABEL: scenario_id}
        return labels | {"trialbox.role": role} if role else labels

    def _create_network(self, scenario_id: str, made: _Made) -> Network:
        name = f"{sandbox_name(self.run_id, scenario_id)}-net"
        try:
            network = self.client.networks.create(
                name, driver="bridge", internal=True, labels=self._job_labels(scenario_id)
            )
            made.network = network
            network.connect(self.llm_container, aliases=["llm"])
            # The host's firewall keeps the sandbox from the host itself (internal networks
            # only stop forwarding) — in the runner container too, through its helper.
            isolate_network(str(network.id), _slug(self.run_id))
        except FirewallError as exc:
            raise SandboxError(f"could not isolate sandbox network {name}: {exc}") from exc
        except NotFound as exc:
            raise SandboxError(
                f"LLM server container '{self.llm_container}' is not running — start the stack "
                "with `trialbox up` (or `make up`)"
            ) from exc
        except APIError as exc:
            raise SandboxError(f"could not create sandbox network {name}: {exc.explanation}") from exc
        return network

    def _ui_mounts(self) -> tuple[dict[str, dict[str, str]], list[str]]:
        """Read-only bind mounts (corpus, agent folders) and the entrypoint flags naming them."""
        volumes = {str(self.corpus_host_dir): {"bind": CORPUS_MOUNT, "mode": "ro"}}
        flags: list[str] = []
        for number, folder in enumerate(self.agent_dirs):
            inside = f"{AGENT_DIRS_MOUNT}/{number}"
            volumes[str(folder)] = {"bind": inside, "mode": "ro"}
            flags += ["--agent-dir", inside]
        return volumes, flags

    def _created(self, made: _Made, **options: Any) -> Container:
        """A created container, recorded before anything starts it: ``containers.run`` leaves
        a created container behind, unnamed to us, when its start fails."""
        container = self.client.containers.create(**options)
        made.containers.append(container)
        return container

    def _start(self, scenario_id: str, network: Network, made: _Made, memory: bool = False,
               spare: bool = False) -> DockerSandbox:
        token = secrets.token_hex(24)  # one per sandbox: a bridge only answers its own runner
        volumes, agent_flags = self._ui_mounts()
        memory_flag = ["--memory"] if memory else []
        try:
            # The UI listens on its container's loopback only: nothing but its bridge, in the same
            # container, can reach it (see the module docstring). The bridge listens on the
            # sandbox address, behind the token.
            ui = self._created(
                made, image=self.image, name=f"{sandbox_name(self.run_id, scenario_id)}-ui",
                network=network.name, init=True,
                command=["pair", "--host", "127.0.0.1", "--llm-url", f"http://llm:{LLM_PORT}",
                         "--document-root", CORPUS_MOUNT, "--allowed-host", "localhost",
                         "--mcp-host", "0.0.0.0", "--mcp-port", str(MCP_PORT),
                         *agent_flags, *memory_flag],
                environment={MCP_TOKEN_ENV: token},
                volumes=volumes, labels=self._job_labels(scenario_id, "agent-ui"),
                **container_options("agent-ui", spare=spare),
            )  # fmt: skip
            ui.start()
        except docker.errors.ImageNotFound as exc:
            raise SandboxError(f"image {self.image} is missing — build it with `trialbox images`") from exc
        except APIError as exc:
            raise SandboxError(f"could not start the sandbox container: {exc.explanation}") from exc
        return self.sandbox_of(scenario_id, ui, network, token)

    def sandbox_of(self, scenario_id: str, ui: Container, network: Network, token: str) -> DockerSandbox:
        """The record of a started sandbox container (``ui``) on its ``network``, its bridge
        guarded by ``token``."""
        # By address, from the host's network namespace (the runner container shares it): the
        # engine never joins the sandbox network, which holds only the sandbox and `llm`.
        box_host = _address(ui, str(network.name))
        llm_host = _address(self.client.containers.get(self.llm_container), str(network.name))
        return DockerSandbox(
            scenario_id=scenario_id,
            ui_url=f"http://127.0.0.1:{UI_PORT}",
            mcp_url=f"http://{box_host}:{MCP_PORT}/mcp",
            llm_url=f"http://{llm_host}:{LLM_PORT}",
            corpus_root=PurePosixPath(CORPUS_MOUNT),
            ui=ui,
            mcp_headers={"Authorization": f"Bearer {token}"},
            llm_client=box_host,
            llm_token=self._llm_token(),
        )

    def _llm_token(self) -> str | None:
        """The LLM's admin token (read once), to read each sandbox's front-door records."""
        if not hasattr(self, "_cached_llm_token"):
            self._cached_llm_token = llm_admin_token(self.llm_container)
        return self._cached_llm_token

    async def _wait_ready(self, box: DockerSandbox, begun: DockerStart) -> None:
        """Ready means the MCP bridge lists its tools and, through it, the UI answers
        ``system_status`` — all over the bridge's HTTP port, so readiness costs no ``docker
        exec`` (a process in the sandbox's CPU quota) while GAIA is still importing.

        The UI, the slower of the two, is awaited by event: the line uvicorn prints once it
        listens, read from Docker's followed log stream (``_printed``), so no poll interval
        adds to the start; the short polls that remain cost a refused connection each."""
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
            return max(started, begun.handed_at or started) + self.ready_timeout_s

        checked = started
        ui_serving = asyncio.ensure_future(_printed(box.ui, _UI_SERVING_MARKER)) if self.ready_by_event else None

        async def pause(for_ui: bool = False) -> None:
            nonlocal checked
            every = YIELDING_POLL_S if yielding() else LIVENESS_INTERVAL_S
            if time.monotonic() - checked >= every:  # a Docker API call: not every poll
                await asyncio.to_thread(self._check_alive, box, deadline())
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
                await asyncio.sleep(self.ready_poll_s)

        try:
            while True:
                try:
                    if not await _listening(box.mcp_url):
                        await pause()
                        continue
                    transport = StreamableHttpTransport(box.mcp_url, headers=box.mcp_headers)
                    async with Client(transport, timeout=5) as client:
                        await client.list_tools()
                        box.timings.setdefault("mcp_ready_s", time.monotonic() - started)
                        while not await _ui_answers_through(client):
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

    def _check_alive(self, box: DockerSandbox, deadline: float) -> None:
        state = _state_of(box.ui)
        if state is not None and box.ui.status != "created":
            tail = "" if state == "was removed" else box.ui.logs(tail=15).decode(errors="replace")
            raise SandboxError(f"{box.ui.name} {state}{_whose_end(box.ui)} during start-up:\n{tail}")
        if time.monotonic() > deadline:
            raise SandboxError(
                f"sandbox for {box.scenario_id} was not ready within {self.ready_timeout_s:.0f} s "
                f"(MCP {box.mcp_url}); see `docker logs {box.ui.name}`"
            )

    async def _watch(self, box: DockerSandbox, task: asyncio.Task[Any]) -> None:
        """While the scenario runs: a dead Agent UI or bridge cancels it at once, with the
        reason in ``box.died``. Without this a killed UI (OOM, `docker kill`) leaves the bridge
        without its network namespace and every MCP call hanging until its read timeout."""
        while True:
            await asyncio.sleep(self.watch_interval_s)
            died = await asyncio.to_thread(_death_of, box)
            if died is not None:
                box.died = died
                task.cancel()
                return

    # -- teardown -------------------------------------------------------------------------

    def _teardown(self, scenario_id: str, made: _Made) -> None:
        """Remove what this job made — recorded, or found by its labels — and free the LLM."""
        job: _Filters = {"label": [f"{RUN_LABEL}={self.run_id}", f"{JOB_LABEL}={scenario_id}"]}
        containers = {c.id: c for c in made.containers}
        for found in self._listed(lambda: self.client.containers.list(all=True, filters=job)):
            containers.setdefault(found.id, found)
        for container in containers.values():
            try:
                container.remove(force=True)
            except (NotFound, APIError):
                pass  # gone already; a failure is swept by label at the end of the run
        networks = {made.network.id: made.network} if made.network is not None else {}
        for found in self._listed(lambda: self.client.networks.list(filters=job)):
            networks.setdefault(found.id, found)
        for network in networks.values():
            self.release(network)

    @staticmethod
    def _listed(listing: Callable[[], list[Any]]) -> list[Any]:
        try:
            return listing()
        except (APIError, NotFound):
            return []

    def release(self, network: Network) -> None:
        """Detach everything from a sandbox network, remove it and its firewall rules.

        The LLM container is force-disconnected by name first, running or not: a stopped
        container is not listed among the network's endpoints, yet keeps a reference that
        would make its next `docker start` fail once the network is gone.
        """
        try:
            self.client.api.disconnect_container_from_network(self.llm_container, str(network.id), force=True)
        except (NotFound, APIError):
            pass  # not attached (or the LLM container is gone)
        try:
            network.reload()
            for attached in network.containers:
                try:
                    network.disconnect(attached, force=True)
                except (NotFound, APIError):
                    pass
            network.remove()
        except (NotFound, APIError):
            pass
        finally:
            try:
                release_network(str(network.id))
            except FirewallError:
                pass  # a sweep by label removes them (`trialbox clean`)

    def sweep(self) -> int:
        """Remove everything labelled with this run (a crashed or killed run's leftovers):
        containers, then networks (LLM detached first), then their firewall rules. Returns how
        many Docker objects were removed. Safe while no sandbox of this run is open."""
        run: _Filters = {"label": f"{RUN_LABEL}={self.run_id}"}
        removed = 0
        for container in self._listed(lambda: self.client.containers.list(all=True, filters=run)):
            if container.labels.get("trialbox.role") == "llm":
                continue  # a run's own LLM server (tests label theirs) is not a sandbox's
            try:
                container.remove(force=True)
                removed += 1
            except (NotFound, APIError):
                pass
        for network in self._listed(lambda: self.client.networks.list(filters=run)):
            self.release(network)
            removed += 1
        repair_llm_networks(self.client, self.llm_container)
        return removed


def repair_llm_networks(client: docker.DockerClient, llm_container: str) -> list[str]:
    """Drop the LLM container's references to networks that no longer exist (left by a run
    killed outright, or by an older trialbox), so `docker start` works again. Returns them."""
    try:
        container = client.containers.get(llm_container)
    except (NotFound, APIError):
        return []
    dropped = []
    for name, settings in (container.attrs["NetworkSettings"].get("Networks") or {}).items():
        try:
            client.networks.get(settings.get("NetworkID") or name)
            continue
        except NotFound:
            pass
        except APIError:
            continue
        try:
            client.api.disconnect_container_from_network(str(container.id), name, force=True)
            dropped.append(name)
        except (NotFound, APIError):
            pass
    return dropped


def _address(container: Container, network_name: str) -> str:
    container.reload()
    address = container.attrs["NetworkSettings"]["Networks"][network_name]["IPAddress"]
    if not address:
        raise SandboxError(f"{container.name} got no address on {network_name}")
    return str(address)


def engine_error_hint(exc: DockerException) -> str:
    """One line that names the cause and the fix for the usual engine failures."""
    text = str(exc)
    if "Connection refused" in text or "FileNotFoundError" in text or "No such file" in text:
        return "no Docker engine answers — run `scripts/ensure-docker` (or `make bench`, which does)"
    return text


#: What GAIA's Agent UI prints once its modules are imported, just before uvicorn starts
#: (gaia/ui/server.py ``main``): the end of the "GAIA import" phase of a sandbox's start-up.
_UI_IMPORTED_MARKER = b"Starting GAIA Agent UI server on"


#: What uvicorn prints once GAIA's Agent UI listens: the UI is up.
_UI_SERVING_MARKER = b"Uvicorn running on"


async def _printed(container: Container, marker: bytes) -> bool:
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


def _gaia_import_s(ui: Container) -> float | None:
    """Seconds from the Agent UI container's process start to GAIA imported, from Docker's
    own clock on both ends (``State.StartedAt`` and the log line's timestamp); None when
    either is unknown. Measured inside the sandbox, so the engine's polling does not count."""
    try:
        ui.reload()
        started = _docker_time(str(ui.attrs["State"]["StartedAt"]))
        imported = logged_at(ui, _UI_IMPORTED_MARKER)
    except (APIError, NotFound, KeyError, ValueError):
        return None
    return None if imported is None else round(imported - started, 3)


def logged_at(container: Container, marker: bytes, *, bridge: bool = False) -> float | None:
    """When (Docker's timestamp) the UI's — or with ``bridge``, the bridge's prefixed — first log
    line holding ``marker`` was written; None if no such line or no readable time."""
    for line in container.logs(stdout=True, stderr=True, timestamps=True).splitlines():
        stamp, _, text = line.partition(b" ")
        if marker in text and text.startswith(BRIDGE_PREFIX) == bridge:
            try:
                return _docker_time(stamp.decode())
            except ValueError:
                return None
    return None


def _docker_time(text: str) -> float:
    """Docker's RFC 3339 timestamps carry nanoseconds; datetime takes microseconds."""
    from datetime import datetime

    stamp = re.sub(r"(\.\d{6})\d*", r"\1", text.strip()).replace("Z", "+00:00")
    return datetime.fromisoformat(stamp).timestamp()
