"""Docker sandboxes: one fresh Agent UI container and one MCP bridge container per scenario.

Each sandbox gets its own *internal* bridge network. Only three things are attached to it: the
sandbox's Agent UI, its MCP bridge, and the shared LLM server (attached under the alias ``llm``).
The Agent UI therefore reaches the LLM server and nothing else, and two sandboxes never share a
network. The engine reaches the sandbox in one of two ways:

- inside the runner container (``TRIALBOX_IN_CONTAINER=1``) it attaches its own container to the
  sandbox network and uses container names;
- on the host it uses the containers' addresses on the sandbox bridge, which the host routes to
  directly (no port is published, so nothing outside this machine can reach a sandbox).

Everything created carries ``trialbox.run=<run id>`` so cleanup goes by label and never touches
anything else. Docker SDK calls block, so they run in worker threads.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import re
import secrets
import socket
import tarfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import docker
import httpx
from docker.errors import APIError, DockerException, NotFound
from docker.models.containers import Container
from docker.models.networks import Network

from runner.sandbox._configure import set_agent_model
from runner.sandbox._firewall import FirewallError, isolate_network, release_network
from runner.sandbox._hardening import container_options, read_file
from runner.sandbox._protocol import SandboxError

AGENT_UI_IMAGE = "trialbox/agent-ui:dev"
UI_PORT = 4200
MCP_PORT = 8765
LLM_PORT = 13305
CORPUS_MOUNT = "/corpus"
# Where the user's --agent-dir folders are mounted (read-only), one numbered folder each; the
# entrypoint links their <id> sub-folders into $GAIA_HOME/agents, where GAIA loads agents.
AGENT_DIRS_MOUNT = "/opt/trialbox/agent-dirs"
# Where the agent-ui image keeps GAIA's state; the chat DB is collected from here.
GAIA_HOME = "/home/gaia/.gaia"
# GAIA's bridge accepts a non-loopback bind only with a bearer token of 32+ characters.
MCP_TOKEN_ENV = "GAIA_AGENT_UI_MCP_TOKEN"


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
    """A running sandbox. Addresses are valid from wherever the engine runs."""

    scenario_id: str
    ui_url: str
    mcp_url: str
    llm_url: str
    corpus_root: PurePosixPath
    ui: Container
    mcp: Container
    mcp_headers: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    async def collect(self, dest: Path) -> None:
        """Copy the chat DB, both containers' logs and the LLM server's stats into dest."""
        dest.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(_snapshot_chat_db, self.ui, dest)
        for name, container in (("agent-ui.log", self.ui), ("mcp.log", self.mcp)):
            logs = await asyncio.to_thread(container.logs, stdout=True, stderr=True)
            (dest / name).write_bytes(logs)
        try:
            async with httpx.AsyncClient(timeout=5) as client:
                stats = await client.get(f"{self.llm_url}/api/v1/stats")
            (dest / "llm-stats.json").write_text(stats.text)
        except httpx.HTTPError as exc:
            (dest / "llm-stats.json").write_text(f'{{"error": "{type(exc).__name__}"}}')


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
        (dest / "gaia_chat.db.error").write_bytes(result.output)
        return
    # /tmp is a tmpfs in a hardened sandbox: `docker cp` cannot see into it on Docker 20.10.
    data = read_file(container, "/tmp/gaia_chat.db")
    if data is not None:
        (dest / "gaia_chat.db").write_bytes(data)


def _copy_out(container: Container, path: str, dest: Path) -> None:
    """Extract one file from a container (a missing file is not an error: GAIA may not have made it)."""
    try:
        stream, _ = container.get_archive(path)
    except NotFound:
        return
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
        for member in archive.getmembers():
            if member.isfile():
                extracted = archive.extractfile(member)
                if extracted is not None:
                    (dest / PurePosixPath(member.name).name).write_bytes(extracted.read())


class DockerBackend:
    """Creates sandboxes next to an already running LLM server container."""

    def __init__(
        self,
        run_id: str,
        llm_container: str,
        corpus_host_dir: Path,
        image: str = AGENT_UI_IMAGE,
        ready_timeout_s: float = 60.0,
        client: docker.DockerClient | None = None,
        agent_dirs: Sequence[Path] = (),
        agent_model: str | None = None,
    ) -> None:
        """``agent_dirs`` and ``corpus_host_dir`` are paths on the Docker host (bind mounts);
        ``agent_model`` is the chat model every turn asks for (None: GAIA's choice)."""
        self.run_id = run_id
        self.llm_container = llm_container
        self.corpus_host_dir = corpus_host_dir
        self.image = image
        self.ready_timeout_s = ready_timeout_s
        self.client = client or docker.from_env()
        self.in_container = os.environ.get("TRIALBOX_IN_CONTAINER") == "1"
        self.labels = {"trialbox.run": run_id}
        self.agent_dirs = [Path(d) for d in agent_dirs]
        self.agent_model = agent_model

    @asynccontextmanager
    async def open(self, scenario_id: str, *, memory: bool = False) -> AsyncIterator[DockerSandbox]:
        started = time.perf_counter()
        created: list[Container] = []
        network = await asyncio.to_thread(self._create_network, scenario_id)
        try:
            box = await asyncio.to_thread(self._start, scenario_id, network, created, memory)
            await self._wait_ready(box)
            if self.agent_model:
                await set_agent_model(box.ui_url, self.agent_model)
            box.timings["cold_start_s"] = time.perf_counter() - started
            yield box
        finally:
            stopping = time.perf_counter()
            await asyncio.to_thread(self._teardown, network, created)
            self.last_teardown_s = time.perf_counter() - stopping

    # -- creation -------------------------------------------------------------------------

    def _create_network(self, scenario_id: str) -> Network:
        name = f"{sandbox_name(self.run_id, scenario_id)}-net"
        try:
            network = self.client.networks.create(
                name, driver="bridge", internal=True, labels=self.labels | {"trialbox.scenario": scenario_id}
            )
            self.client.networks.get(network.id).connect(self.llm_container, aliases=["llm"])
            if not self.in_container:
                # The host's firewall keeps the sandbox from the host itself (internal networks
                # only stop forwarding); inside the runner image there is no host firewall to set.
                isolate_network(network.id, _slug(self.run_id))
        except FirewallError as exc:
            network.remove()
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

    def _start(
        self, scenario_id: str, network: Network, created: list[Container], memory: bool = False
    ) -> DockerSandbox:
        base = sandbox_name(self.run_id, scenario_id)
        token = secrets.token_hex(24)  # one per sandbox: a bridge only answers its own runner
        ui_name, mcp_name = f"{base}-ui", f"{base}-mcp"
        common = {
            "detach": True,
            "init": True,
            "network": network.name,
            "labels": self.labels | {"trialbox.scenario": scenario_id},
        }
        volumes, agent_flags = self._ui_mounts()
        memory_flag = ["--memory"] if memory else []
        try:
            ui = self.client.containers.run(
                self.image,
                command=["ui", "--llm-url", f"http://llm:{LLM_PORT}", "--document-root", CORPUS_MOUNT,
                         "--allowed-host", ui_name, "--allowed-host", "localhost",
                         *agent_flags, *memory_flag],
                name=ui_name,
                volumes=volumes,
                **container_options("agent-ui"),
                **common | {"labels": common["labels"] | {"trialbox.role": "agent-ui"}},
            )
            created.append(ui)
            mcp = self.client.containers.run(
                self.image,
                command=["mcp", "--ui-url", f"http://{ui_name}:{UI_PORT}", *memory_flag],
                name=mcp_name,
                environment={MCP_TOKEN_ENV: token},
                **container_options("mcp"),
                **common | {"labels": common["labels"] | {"trialbox.role": "mcp"}},
            )
            created.append(mcp)
        except docker.errors.ImageNotFound as exc:
            raise SandboxError(f"image {self.image} is missing — build it with `trialbox images`") from exc
        except APIError as exc:
            raise SandboxError(f"could not start sandbox containers: {exc.explanation}") from exc
        if self.in_container:
            network.connect(socket.gethostname())
        ui_host = ui_name if self.in_container else _address(ui, network.name)
        mcp_host = mcp_name if self.in_container else _address(mcp, network.name)
        llm_host = "llm" if self.in_container else _address(self.client.containers.get(self.llm_container), network.name)
        return DockerSandbox(
            scenario_id=scenario_id,
            ui_url=f"http://{ui_host}:{UI_PORT}",
            mcp_url=f"http://{mcp_host}:{MCP_PORT}/mcp",
            llm_url=f"http://{llm_host}:{LLM_PORT}",
            corpus_root=PurePosixPath(CORPUS_MOUNT),
            ui=ui,
            mcp=mcp,
            mcp_headers={"Authorization": f"Bearer {token}"},
        )

    async def _wait_ready(self, box: DockerSandbox) -> None:
        """Ready means the UI answers its health route and the MCP bridge lists its tools."""
        from fastmcp import Client  # imported late: fastmcp is slow to import
        from fastmcp.client.transports import StreamableHttpTransport

        deadline = time.monotonic() + self.ready_timeout_s
        async with httpx.AsyncClient(timeout=2) as http:
            while True:
                try:
                    if (await http.get(f"{box.ui_url}/api/health")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                self._check_alive(box, deadline)
                await asyncio.sleep(0.1)
        box.timings["ui_ready_s"] = time.monotonic() - (deadline - self.ready_timeout_s)
        while True:
            try:
                transport = StreamableHttpTransport(box.mcp_url, headers=box.mcp_headers)
                async with Client(transport, timeout=5) as client:
                    await client.list_tools()
                return
            except Exception:  # noqa: BLE001 — any failure here means "not ready yet"
                self._check_alive(box, deadline)
                await asyncio.sleep(0.1)

    def _check_alive(self, box: DockerSandbox, deadline: float) -> None:
        for container in (box.ui, box.mcp):
            container.reload()
            if container.status == "exited":
                tail = container.logs(tail=15).decode(errors="replace")
                raise SandboxError(f"{container.name} exited during start-up:\n{tail}")
        if time.monotonic() > deadline:
            raise SandboxError(
                f"sandbox for {box.scenario_id} was not ready within {self.ready_timeout_s:.0f} s "
                f"(UI {box.ui_url}, MCP {box.mcp_url}); see `docker logs {box.ui.name}`"
            )

    # -- teardown -------------------------------------------------------------------------

    def _teardown(self, network: Network, created: list[Container]) -> None:
        for container in created:
            try:
                container.remove(force=True)
            except NotFound:
                pass
        network.reload()
        for attached in network.containers:
            try:
                network.disconnect(attached, force=True)
            except (NotFound, APIError):
                pass
        try:
            network.remove()
        except (NotFound, APIError):
            pass
        finally:
            if not self.in_container:
                release_network(network.id)


def _address(container: Container, network_name: str) -> str:
    container.reload()
    address = container.attrs["NetworkSettings"]["Networks"][network_name]["IPAddress"]
    if not address:
        raise SandboxError(f"{container.name} got no address on {network_name}")
    return address


def engine_error_hint(exc: DockerException) -> str:
    """One line that names the cause and the fix for the usual engine failures."""
    text = str(exc)
    if "Connection refused" in text or "FileNotFoundError" in text or "No such file" in text:
        return "no Docker engine answers — run `scripts/ensure-docker` (or `make bench`, which does)"
    return text
