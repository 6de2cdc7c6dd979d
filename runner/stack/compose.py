"""Start and stop the stack's LLM service with ``docker compose`` for a given device.

Compose (not the SDK) because the stack *is* the compose files: a user can run the same
``docker compose -f ... up`` by hand and get the same thing. Health is read through the SDK.

The LLM server's admin token (``TRIALBOX_LLM_ADMIN_TOKEN``, see images/llm-cpu/trialbox_llm/admin.py)
is decided here: the caller's, else the one the running LLM container already has (so a second
``up`` or ``compose run runner`` does not change the service's config and recreate it under a
run), else a new random one. Sandboxes never see it.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import docker
from docker.errors import DockerException
from docker.models.containers import Container

from runner.stack.hardware import DEVICES
from runner.stack.labels import ROLE_LABEL
from trialbox_llm.admin import ADMIN_TOKEN_ENV, AdminTokenError, token_from_environment

LLM_SERVICE = "llm"
#: The LLM servers trialbox can start: its own llm-cpu, or the real Lemonade Server
#: (trialbox/lemonade, from Debian's archive) behind the front door.
LLM_SERVERS = ("llm-cpu", "lemonade")
#: The server on the CPU when none is named (`--llm-server`): llm-cpu, because side by side on the
#: same files Lemonade decoded at 0.69 of its speed (scripts/bench-servers; README "Which LLM
#: server on the CPU").
DEFAULT_CPU_SERVER = "llm-cpu"
LLM_PORT = 13305
DEFAULT_PROJECT = "trialbox"
DEFAULT_RUN_ID = "stack"


class ComposeError(RuntimeError):
    """The stack could not be started or stopped; the message says why and what to do."""


@dataclass(frozen=True)
class LlmStack:
    """A running LLM service: where to reach it from the host and which container it is."""

    project: str
    device: str
    #: Which server answers behind `llm` (llm-cpu itself, or Lemonade behind the front door).
    server: str
    container: str
    url: str
    #: The LLM server's admin token (state-changing routes); never hand it to a sandbox.
    admin_token: str = field(default="", repr=False)


def compose_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "compose"


def overlay_name(device: str, server: str | None = None) -> str:
    """The overlay for ``device`` served by ``server`` (default: `server_for`): on the CPU
    either server (llm-cpu → compose.cpu.yaml, lemonade → compose.lemonade.yaml); an
    accelerator is always Lemonade's."""
    server = server_for(device, server)
    if device not in DEVICES:
        raise ComposeError(
            f"no compose overlay for device {device!r}; use one of: {', '.join(DEVICES)}"
        )
    if server not in LLM_SERVERS:
        raise ComposeError(f"--llm-server {server!r} is not a server; use one of: "
                           f"{', '.join(LLM_SERVERS)}")
    if device == "cpu":
        return "lemonade" if server == "lemonade" else "cpu"
    if server != "lemonade":
        raise ComposeError(f"--llm-server {server} serves on the CPU only; --device {device} is "
                           "served by Lemonade (--llm-server lemonade, the default there)")
    return device


def compose_files(device: str, directory: Path | None = None,
                  server: str | None = None) -> list[Path]:
    """The base file plus the one overlay for ``device`` and ``server`` (later files override
    earlier ones)."""
    directory = directory or compose_dir()
    return [directory / "compose.yaml", directory / f"compose.{overlay_name(device, server)}.yaml"]


def server_for(device: str, server: str | None) -> str:
    """The LLM server a device gets when none is named: Lemonade on an accelerator, the CPU
    default (DEFAULT_CPU_SERVER, chosen by scripts/bench-servers) on the CPU."""
    if server:
        return server
    return DEFAULT_CPU_SERVER if device == "cpu" else "lemonade"


def project_name(run_id: str | None = None) -> str:
    """Compose project names allow [a-z0-9_-] and must start with a letter or digit."""
    if not run_id or run_id == DEFAULT_RUN_ID:
        return DEFAULT_PROJECT
    slug = re.sub(r"[^a-z0-9_-]", "-", run_id.lower()).strip("-_")
    return f"{DEFAULT_PROJECT}-{slug}" if slug else DEFAULT_PROJECT


def _socket_gid(path: str = "/var/run/docker.sock") -> str:
    try:
        return str(os.stat(path).st_gid)
    except OSError:
        return "0"


def admin_token_of(container: str, client: docker.DockerClient | None = None) -> str | None:
    """The admin token a (running) LLM container was started with; None when it has none."""
    client = client or docker.from_env()
    env: list[str] = client.containers.get(container).attrs.get("Config", {}).get("Env") or []
    for entry in env:
        name, _, value = entry.partition("=")
        if name == ADMIN_TOKEN_ENV and value.strip():
            return value.strip()
    return None


def _running_llm(project: str, client: docker.DockerClient) -> list[Container]:
    """This compose project's running LLM containers (none, or the one)."""
    return client.containers.list(filters={
        "label": [f"com.docker.compose.project={project}", f"{ROLE_LABEL}=llm"], "status": "running",
    })  # fmt: skip


def running_admin_token(project: str) -> str | None:
    """The token of this compose project's running LLM container, if one runs."""
    try:
        client = docker.from_env()
        try:
            found = _running_llm(project, client)
            return admin_token_of(str(found[0].id), client) if found else None
        finally:
            client.close()
    except DockerException:
        return None


def stack_environment(
    run_id: str | None,
    port: int,
    base: dict[str, str] | None = None,
    token_lookup: Callable[[str], str | None] = running_admin_token,
) -> dict[str, str]:
    """The variables compose.yaml reads, on top of the caller's environment (keys pass through).

    `token_lookup(project)` finds the running LLM container's admin token (see the module
    docstring); tests pass their own.
    """
    env = dict(os.environ if base is None else base)
    repo = compose_dir().parent
    try:
        given = token_from_environment(env)
    except AdminTokenError as exc:
        raise ComposeError(str(exc)) from exc
    env.update(
        TRIALBOX_RUN_ID=run_id or DEFAULT_RUN_ID,
        TRIALBOX_LLM_PORT=str(port),
        TRIALBOX_DOCKER_GID=env.get("TRIALBOX_DOCKER_GID") or _socket_gid(),
        TRIALBOX_HOST_EVAL_DIR=env.get("TRIALBOX_HOST_EVAL_DIR") or str(repo / "eval"),
        TRIALBOX_LLM_ADMIN_TOKEN=given
        or token_lookup(project_name(run_id))
        or secrets.token_urlsafe(32),
    )
    return env


def compose_command(device: str, project: str, *args: str, server: str | None = None) -> list[str]:
    cmd = ["docker", "compose", "-p", project]
    for path in compose_files(device, server=server):
        cmd += ["-f", str(path)]
    return [*cmd, *args]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True when something already listens on host:port (binding fails with EADDRINUSE)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def _run(cmd: list[str], env: dict[str, str], what: str, timeout: float = 600) -> str:
    try:
        done = subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise ComposeError(
            f"{what} did not finish within {timeout:.0f}s: {' '.join(cmd)}"
        ) from error
    if done.returncode != 0:
        raise ComposeError(
            f"{what} failed: {' '.join(cmd)}\n{(done.stderr or done.stdout).strip()[-2000:]}"
        )
    return done.stdout


def _llm_container_id(project: str, env: dict[str, str], device: str, server: str) -> str:
    out = _run(compose_command(device, project, "ps", "-q", LLM_SERVICE, server=server), env,
               "docker compose ps")
    ids = out.split()
    if not ids:
        raise ComposeError(f"compose project {project} has no {LLM_SERVICE} container after `up`")
    return ids[0]


def _our_llm_running(project: str) -> bool:
    """Is the port held by this very project's LLM container (then `up` is a no-op, not a clash)?"""
    try:
        client = docker.from_env()
        try:
            return bool(_running_llm(project, client))
        finally:
            client.close()
    except DockerException:
        return False


def wait_healthy(
    container: str,
    timeout_s: float,
    client: docker.DockerClient | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Poll the container's healthcheck until ``healthy``; fail fast if it exits or turns unhealthy."""
    client = client or docker.from_env()
    deadline = clock() + timeout_s
    status = "unknown"
    while True:
        item = client.containers.get(container)
        state = item.attrs.get("State", {})
        status = (state.get("Health") or {}).get("Status") or state.get("Status", "unknown")
        if status == "healthy":
            return
        if state.get("Status") in ("exited", "dead") or status == "unhealthy":
            break
        if clock() >= deadline:
            break
        sleep(1.0)
    logs = item.logs(tail=20).decode(errors="replace").rstrip()
    raise ComposeError(
        f"the LLM container {item.name} is {status!r}, not healthy, after "
        f"{'its exit' if state.get('Status') in ('exited', 'dead') else f'{timeout_s:.0f}s'}. "
        f"Last log lines:\n{logs}\n"
        f"Fix: read `docker logs {item.name}`; if it is only slow, raise the timeout."
    )


def up_llm(
    device: str,
    run_id: str | None = None,
    port: int = LLM_PORT,
    timeout_s: float = 360.0,
    server: str | None = None,
) -> LlmStack:
    """Start (or keep) the LLM service for ``device`` (served by ``server``, default
    `server_for`) and return once its healthcheck passes (Lemonade's first: both models loaded)."""
    server = server_for(device, server)
    overlay_name(device, server)  # a server the device cannot have is refused before compose runs
    project = project_name(run_id)
    env = stack_environment(run_id, port)
    if port_in_use(port) and not _our_llm_running(project):
        raise ComposeError(
            f"port {port} on 127.0.0.1 is already in use by another program, so the LLM server "
            f"cannot publish it. Fix: stop that program, or choose another port "
            f"(TRIALBOX_LLM_PORT / --llm-port)."
        )
    _run(
        compose_command(device, project, "up", "-d", "--no-build", "--remove-orphans", LLM_SERVICE,
                        server=server),
        env,
        "docker compose up",
    )
    container = _llm_container_id(project, env, device, server)
    wait_healthy(container, timeout_s)
    name = docker.from_env().containers.get(container).name
    return LlmStack(
        project=project,
        device=device,
        server=server,
        container=name or container,
        url=f"http://127.0.0.1:{port}",
        admin_token=env[ADMIN_TOKEN_ENV],
    )


def down(device: str, run_id: str | None = None, volumes: bool = False,
         server: str | None = None) -> None:
    """Stop and remove the stack's containers and network (model-cache volumes only on request);
    `--remove-orphans` takes the other server's containers too, whichever overlay started them."""
    project = project_name(run_id)
    env = stack_environment(run_id, LLM_PORT)
    args = ["down", "--remove-orphans", "--timeout", "10"] + (["--volumes"] if volumes else [])
    _run(compose_command(device, project, "--profile", "run", *args, server=server), env,
         "docker compose down")
