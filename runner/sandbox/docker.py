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
import secrets
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path, PurePosixPath
from typing import Any, cast

import docker
from docker.errors import APIError, DockerException, NotFound
from docker.models.containers import Container
from docker.models.networks import Network

from runner.sandbox._box import DockerSandbox, DockerStart, _Made
from runner.sandbox._collect import llm_admin_token
from runner.sandbox._configure import set_agent_model
from runner.sandbox._container import (
    AGENT_DIRS_MOUNT,
    AGENT_UI_IMAGE,
    BRIDGE_ENDED_EXIT,
    BRIDGE_PREFIX,
    CORPUS_MOUNT,
    LLM_PORT,
    MCP_PORT,
    MCP_TOKEN_ENV,
    UI_PORT,
    death_of,
)
from runner.sandbox._firewall import FirewallError, isolate_network
from runner.sandbox._fixtures import STAGING_HOME
from runner.sandbox._hardening import ROLES, Role, claimed_cpu, container_options, limits_for
from runner.sandbox._logs import logged_at, split_log
from runner.sandbox._protocol import SandboxError
from runner.sandbox._readiness import READY_POLL_S, gaia_import_s, wait_ready
from runner.sandbox._teardown import (
    release_sandbox_network,
    remove_job,
    repair_llm_networks,
    sweep_run,
)
from runner.sandbox._threads import finish_in_thread
from runner.sandbox.names import safe_name, sandbox_name
from runner.stack.labels import ROLE_LABEL, RUN_LABEL, SCENARIO_LABEL

# What the Docker backend's callers (the run, the bench scripts, the tests) import from here,
# though its parts live in the private modules beside it.
__all__ = [
    "AGENT_UI_IMAGE",
    "BRIDGE_ENDED_EXIT",
    "BRIDGE_PREFIX",
    "CORPUS_MOUNT",
    "LLM_PORT",
    "MCP_PORT",
    "MCP_TOKEN_ENV",
    "RUN_LABEL",
    "UI_PORT",
    "DockerBackend",
    "DockerSandbox",
    "DockerStart",
    "engine_error_hint",
    "logged_at",
    "repair_llm_networks",
    "sandbox_name",
    "split_log",
]

#: How often a running sandbox's containers are checked for death (a Docker API call each).
WATCH_INTERVAL_S = 2.0


def _claim_cpu(containers: list[Container], *, capped: bool) -> None:
    """Give a claimed spare's containers the sandbox's CPU weight, and its cap if ``capped`` (by
    their role label); one already gone is left to the readiness check or the watchdog, which
    say how it ended."""
    for container in containers:
        try:
            container.update(**claimed_cpu(cast(Role, container.labels[ROLE_LABEL]), capped=capped))
        except (NotFound, APIError):
            pass


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
        stages_fixtures: bool = False,
    ) -> None:
        """``agent_dirs`` and ``corpus_host_dir`` are paths on the Docker host (bind mounts);
        ``agent_model`` is the chat model every turn asks for (None: GAIA's choice);
        ``stages_fixtures``: the run has a fixture tree, so each sandbox works from
        ``STAGING_HOME``, where its scenario's folders are staged (runner/sandbox/_fixtures.py:
        copied in, never mounted — the tree holds every scenario's answers)."""
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
        self.stages_fixtures = stages_fixtures
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
        await wait_ready(box, begun, timeout_s=self.ready_timeout_s, poll_s=self.ready_poll_s,
                         by_event=self.ready_by_event)
        begun.readied = True
        if begun.ahead and begun.handed_at is not None:  # claimed while it started: cap it now
            await asyncio.to_thread(_claim_cpu, list(begun.made.containers), capped=True)
        if self.agent_model:
            await set_agent_model(box, self.agent_model)
        box.timings["cold_start_s"] = time.perf_counter() - begun.started
        imported = await asyncio.to_thread(gaia_import_s, box.ui)
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
            died = await asyncio.to_thread(death_of, box.ui)
            if died is not None:
                raise SandboxError(died) from exc
            raise
        finally:
            watchdog.cancel()
        # The watchdog looks every few seconds; a container that died since then (the bridge
        # answers "cannot connect" at once when the UI is killed) is still what went wrong.
        died = await asyncio.to_thread(death_of, box.ui)
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
        labels = self.labels | {SCENARIO_LABEL: scenario_id}
        return labels | {ROLE_LABEL: role} if role else labels

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
            isolate_network(str(network.id), safe_name(self.run_id))
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
        # With a fixture tree the UI works from where the fixtures are staged, as GAIA's harness.
        work_flag = ["--work-dir", STAGING_HOME] if self.stages_fixtures else []
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
                         *agent_flags, *memory_flag, *work_flag],
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

    async def _watch(self, box: DockerSandbox, task: asyncio.Task[Any]) -> None:
        """While the scenario runs: a dead Agent UI or bridge cancels it at once, with the
        reason in ``box.died``. Without this a killed UI (OOM, `docker kill`) leaves the bridge
        without its network namespace and every MCP call hanging until its read timeout."""
        while True:
            await asyncio.sleep(self.watch_interval_s)
            died = await asyncio.to_thread(death_of, box.ui)
            if died is not None:
                box.died = died
                task.cancel()
                return

    # -- teardown -------------------------------------------------------------------------

    def _teardown(self, scenario_id: str, made: _Made) -> None:
        """Remove what this job made — recorded, or found by its labels — and free the LLM."""
        remove_job(self.client, self.llm_container, self.run_id, scenario_id, made)

    def release(self, network: Network) -> None:
        """Detach everything from a sandbox network, remove it and its firewall rules."""
        release_sandbox_network(self.client, self.llm_container, network)

    def sweep(self) -> int:
        """Remove everything labelled with this run (a crashed or killed run's leftovers):
        containers, then networks (LLM detached first), then their firewall rules. Returns how
        many Docker objects were removed. Safe while no sandbox of this run is open."""
        return sweep_run(self.client, self.llm_container, self.run_id)


def _address(container: Container, network_name: str) -> str:
    """The container's address on the network (how the engine reaches a sandbox's bridge)."""
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

