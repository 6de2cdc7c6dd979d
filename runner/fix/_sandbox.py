"""The fix sandbox: a fixer container that can write only a copy of the agent and reach only
the fixer's model endpoint.

Per fixer run:

- an *internal* bridge network holds the fixer container and (when the fixer needs a model)
  the egress proxy under the alias ``egress``; the host firewall drops what that network sends
  to the host itself (``runner.sandbox.isolate_network``: internal networks only stop
  forwarding);
- the proxy (``_proxy.py``, same image) also sits on a second, ordinary bridge network, its only
  way out, and forwards to exactly the configured ``host:port``; a loopback model URL on the
  host is reached as ``host.docker.internal`` (Docker's host-gateway);
- the fixer runs as a non-root user with no capabilities, no privilege gain, bounded memory,
  processes and CPU, and no Docker socket. ``/workspace`` (the copy it may change) is owned
  by that user; ``/context`` (scorecard, summary, failing traces, the prompt) is owned by root
  and read-only to it.

The root filesystem is writable on purpose: Docker 20.10's archive API (how trees go in and come
back) refuses a read-only root and cannot see tmpfs mounts. The container is thrown away after
one run, and ``docker diff`` of its layer is how a write outside ``/workspace`` is found.

Everything carries ``trialbox.run=<label>``; teardown is by object and a crash is swept by label.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError, ImageNotFound, NotFound
from docker.models.containers import Container
from docker.models.networks import Network
from docker.types import LogConfig

from runner.fix._patch import pack, unpack
from runner.sandbox import FirewallError, isolate_network, release_network
from runner.stack.labels import ROLE_LABEL, RUN_LABEL

FIXER_IMAGE = "trialbox/fixer:dev"
FIXER_UID = 10003
FIXER_HOME = "/home/fixer"
PROXY_PORT = 3128
PROXY_ALIAS = "egress"
HOST_ALIAS = "host.docker.internal"
NOTES_PATH = f"{FIXER_HOME}/.trialbox/fix_notes.json"
#: Where a fixer may write besides /workspace: its own home and /tmp (scratch, thrown away).
#: /context is ours (unpacked before start) and read-only to the fixer.
SCRATCH = ("/workspace", FIXER_HOME, "/tmp", "/context")
LOOPBACK = ("127.0.0.1", "localhost", "::1", "0.0.0.0")
LLM_ALIAS = "llm"  # the stack's LLM server, as the proxy's network names it


class FixSandboxError(RuntimeError):
    """The fix sandbox could not be created or run; the message names the cause and the fix."""


@dataclass
class SandboxRun:
    """What came back from one fixer run."""

    exit_code: int | None
    timed_out: bool
    wall_s: float
    transcript: bytes
    proxy_log: str
    outside_writes: list[str]
    refused_entries: list[str]
    notes: bytes | None
    timings: dict[str, float] = field(default_factory=dict)


def egress_target(url: str) -> tuple[str, int, str]:
    """(host the proxy connects to, port, the URL as the fixer writes it) for a model URL.

    Loopback on the host becomes the host-gateway name: the proxy is a container."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FixSandboxError(f"--fixer-url {url!r}: give an http(s) URL, e.g. http://127.0.0.1:8000/api/v1")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = parts.hostname.lower()
    if host in LOOPBACK:
        host = HOST_ALIAS
        netloc = f"{HOST_ALIAS}:{port}"
        url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return host, port, url


def scratch_ok(path: str) -> bool:
    """Whether a changed path in the container layer is one a fixer may change."""
    if any(path == root or path.startswith(root + "/") for root in SCRATCH):
        return True
    # Parents of those show up as "modified" when something inside them changes.
    return any(root.startswith(path.rstrip("/") + "/") for root in SCRATCH) or path == "/"


#: What Docker itself adds to a container's layer (``init: true`` bind-mounts its init here).
DOCKER_MADE = frozenset({"/usr/sbin/docker-init"})


def outside_writes(changes: list[dict[str, int | str]]) -> list[str]:
    """The paths of ``docker diff`` (``{"Path": "/etc/x", "Kind": 0|1|2}`` each) a fixer changed
    outside its areas. A folder listed only because something inside it changed is left out:
    the deepest paths name the writes."""
    written = {str(c["Path"]) for c in changes}
    paths = sorted(p for p in written if not scratch_ok(p) and p not in DOCKER_MADE)
    return [p for p in paths if not any(other.startswith(p.rstrip("/") + "/") for other in paths)
            and not any(made.startswith(p.rstrip("/") + "/") for made in DOCKER_MADE)]


class FixSandbox:
    """Creates and tears down fix sandboxes for one run label."""

    def __init__(self, label: str, image: str = FIXER_IMAGE, client: docker.DockerClient | None = None,
                 memory: str = "2g", pids: int = 512, cpus: float = 1.5, llm_container: str | None = None) -> None:
        """`llm_container`: the stack's LLM server, joined to the proxy's network as ``llm`` when
        the fixer's endpoint is ``http://llm:13305/...`` (the bundled model fixes offline)."""
        self.label = label
        self.llm_container = llm_container
        self.image = image
        self.client = client or docker.from_env()
        self.labels = {RUN_LABEL: label, ROLE_LABEL: "fixer"}
        self.memory, self.pids, self.cpus = memory, pids, cpus

    def _name(self, key: str) -> str:
        digest = hashlib.sha256(f"{self.label}\0{key}\0{time.time_ns()}".encode()).hexdigest()[:12]
        return f"tbx-fix-{digest}"

    def _hardening(self, memory: str, pids: int, cpus: float) -> dict[str, Any]:
        return {
            "cap_drop": ["ALL"], "security_opt": ["no-new-privileges:true"],
            "mem_limit": memory, "memswap_limit": memory, "pids_limit": pids,
            "nano_cpus": int(cpus * 1e9), "init": True, "user": f"{FIXER_UID}:{FIXER_UID}",
            "log_config": LogConfig(type=LogConfig.types.JSON, config={"max-size": "20m", "max-file": "2"}),
        }

    def run(self, *, key: str, workspace: Path, context: dict[str, Path | bytes], command: list[str],
            env: dict[str, str], allow: tuple[str, int] | None, out_workspace: Path,
            timeout_s: float) -> SandboxRun:
        """Run `command` in a fresh sandbox over a copy of `workspace`; unpack the result into
        `out_workspace`. `allow` is the one host:port the fixer may reach (None: nothing)."""
        try:
            self.client.images.get(self.image)
        except ImageNotFound:
            raise FixSandboxError(f"image {self.image} is missing — build it with "
                                  "`trialbox images` (or runner.fix.build_fixer_image())") from None
        name = self._name(key)
        created: list[Container] = []
        networks: list[Network] = []
        timings: dict[str, float] = {}
        started = time.perf_counter()
        try:
            inner = self._network(f"{name}-net", internal=True, networks=networks)
            proxy = None
            if allow is not None:
                outer = self._network(f"{name}-out", internal=False, networks=networks)
                if allow[0] == LLM_ALIAS and self.llm_container:
                    outer.connect(self.llm_container, aliases=[LLM_ALIAS])
                proxy = self._proxy(f"{name}-egress", inner, outer, allow, created)
                env = {**env, "HTTP_PROXY": f"http://{PROXY_ALIAS}:{PROXY_PORT}",
                       "HTTPS_PROXY": f"http://{PROXY_ALIAS}:{PROXY_PORT}",
                       "http_proxy": f"http://{PROXY_ALIAS}:{PROXY_PORT}",
                       "https_proxy": f"http://{PROXY_ALIAS}:{PROXY_PORT}", "NO_PROXY": "", "no_proxy": ""}
            fixer = self.client.containers.create(
                self.image, command=command, name=f"{name}-fixer", network=inner.name,
                working_dir="/workspace", environment={**env, "HOME": FIXER_HOME,
                                                       "TRIALBOX_FIX_NOTES": NOTES_PATH},
                labels=self.labels, **self._hardening(self.memory, self.pids, self.cpus))
            created.append(fixer)
            fixer.put_archive("/", pack({"workspace": workspace}, uid=FIXER_UID))
            fixer.put_archive("/", pack({f"context/{k}": v for k, v in context.items()}
                                        or {"context/.empty": b""},
                                        uid=0, mode_dirs=0o555, mode_files=0o444))
            timings["sandbox_start_s"] = time.perf_counter() - started
            code, timed_out, wall = self._wait(fixer, timeout_s)
            transcript = fixer.logs(stdout=True, stderr=True)
            outside = outside_writes(fixer.diff() or [])
            stream, _ = fixer.get_archive("/workspace")
            refused = unpack(stream, out_workspace, "workspace")
            notes = _read(fixer, NOTES_PATH)
            proxy_log = proxy.logs(stdout=True, stderr=True).decode(errors="replace") if proxy else ""
            return SandboxRun(code, timed_out, wall, transcript, proxy_log, outside, refused, notes, timings)
        except APIError as exc:
            raise FixSandboxError(f"the fix sandbox failed: {exc.explanation or exc}") from exc
        finally:
            stopping = time.perf_counter()
            self._teardown(created, networks)
            timings["teardown_s"] = time.perf_counter() - stopping

    def _network(self, name: str, *, internal: bool, networks: list[Network]) -> Network:
        network = self.client.networks.create(name, driver="bridge", internal=internal, labels=self.labels)
        networks.append(network)
        # The host firewall keeps the fixer's network off the host in every mode: on the host
        # this process installs the rules, inside the runner container (no capabilities) a
        # short-lived helper does (runner/sandbox/_firewall.py) — never skipped.
        if internal:
            try:
                isolate_network(_id_of(network), _label(self.label))
            except FirewallError as exc:
                raise FixSandboxError(f"could not keep the fix sandbox off the host: {exc}") from exc
        return network

    def _proxy(self, name: str, inner: Network, outer: Network, allow: tuple[str, int],
               created: list[Container]) -> Container:
        proxy = self.client.containers.run(
            self.image, command=["python3", "/opt/trialbox/egress_proxy.py"], name=name, detach=True,
            network=outer.name, read_only=True, extra_hosts={HOST_ALIAS: "host-gateway"},
            environment={"TRIALBOX_EGRESS_ALLOW": f"{allow[0]}:{allow[1]}",
                         "TRIALBOX_EGRESS_PORT": str(PROXY_PORT)},
            labels=self.labels | {ROLE_LABEL: "egress-proxy"},
            **self._hardening("128m", 64, 0.5))
        created.append(proxy)
        inner.connect(proxy, aliases=[PROXY_ALIAS])
        deadline = time.monotonic() + 20
        while b'"listening"' not in proxy.logs():
            proxy.reload()
            if proxy.status == "exited" or time.monotonic() > deadline:
                raise FixSandboxError(f"the egress proxy did not start: {proxy.logs(tail=10).decode(errors='replace')}")
            time.sleep(0.1)
        return proxy

    def _wait(self, fixer: Container, timeout_s: float) -> tuple[int | None, bool, float]:
        started = time.perf_counter()
        fixer.start()
        try:
            result = fixer.wait(timeout=timeout_s)
            return int(result.get("StatusCode", -1)), False, time.perf_counter() - started
        except Exception:  # noqa: BLE001 — requests' read timeout: the budget is spent
            try:
                fixer.kill()
            except APIError:
                pass
            fixer.wait(timeout=30)
            return None, True, time.perf_counter() - started

    def _teardown(self, created: list[Container], networks: list[Network]) -> None:
        for container in reversed(created):
            try:
                container.remove(force=True)
            except (NotFound, APIError):
                pass
        for network in networks:
            try:
                network.reload()
                for attached in network.containers:  # the stack's LLM server, when it was joined
                    network.disconnect(attached, force=True)
                network.remove()
            except (NotFound, APIError):
                pass
            if network.id is not None:  # no id: never isolated either
                try:
                    release_network(network.id)
                except FirewallError:
                    pass  # swept by label on the next cleanup


def _id_of(network: Network) -> str:
    """docker-py reads a model's id from its attributes, which a created network always has."""
    if network.id is None:
        raise FixSandboxError(f"Docker created network {network.name} without an id")
    return network.id


def _read(container: Container, path: str) -> bytes | None:
    import io
    import tarfile

    try:
        stream, _ = container.get_archive(path)
    except NotFound:
        return None
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
        member = archive.getmembers()[0]
        extracted = archive.extractfile(member) if member.isfile() else None
        return extracted.read() if extracted else None


def _label(label: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_.:-]", "-", label)[:100]


def proxy_refusals(proxy_log: str) -> int:
    count = 0
    for line in proxy_log.splitlines():
        try:
            count += json.loads(line).get("decision") == "refused"
        except ValueError:
            continue
    return count
