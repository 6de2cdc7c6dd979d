"""Start a real Lemonade Server of one's own, and trialbox's front door before it, outside the
compose stack: the layout compose.lemonade.yaml makes, for tests and benchmarks.

``trialbox/lemonade:dev`` (images/lemonade) on a network of the caller's (the stack network:
no sandbox joins it), hardened as compose runs it (read-only image, HOME on a tmpfs, no
capabilities), returned once Docker reports it healthy — lemond answers and both models are
loaded. ``start_front_door`` puts ``python -m trialbox_llm.front_door`` (the llm-cpu image)
before it on the same network; a sandbox network is then connected to the door only.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import docker
import httpx
from docker.errors import DockerException
from docker.models.containers import Container

from runner.stack.compose import LLM_PORT, wait_healthy
from runner.stack.image_store import image_exists
from runner.stack.labels import ROLE_LABEL
from runner.stack.lemonade_image import lemonade_tag
from runner.stack.llm_container import LLM_CPU_IMAGE, LlmContainerError
from trialbox_llm.admin import ADMIN_TOKEN_ENV

LEMONADE_IMAGE = lemonade_tag()
#: The chat model's threads on the CPU (images/lemonade/start-lemond's LEMONADE_CPU_THREADS).
CPU_THREADS_ENV = "TRIALBOX_LEMONADE_CPU_THREADS"
#: The hardening compose.lemonade.yaml gives the service (lemond writes only its HOME and /tmp).
HARDENING: dict[str, Any] = {
    "read_only": True,
    "tmpfs": {"/tmp": "rw,nosuid,nodev,size=64m",
              "/home/lemonade": "rw,nosuid,nodev,size=64m,uid=10001,gid=10001"},
    "cap_drop": ["ALL"], "security_opt": ["no-new-privileges:true"], "mem_limit": "4g",
    "pids_limit": 512,
}


@dataclass(frozen=True)
class LemonadeServer:
    """A running Lemonade container of one's own."""

    name: str
    #: Its address on the network it was started on (lemond binds that address only).
    address: str
    #: Where the host reaches it: http://ADDRESS:13305 (Docker's bridges are routed to the host).
    url: str
    container: Container


def _address(container: Container, network: str) -> str:
    container.reload()
    return str(container.attrs["NetworkSettings"]["Networks"][network]["IPAddress"])


def start_lemonade(name: str, labels: dict[str, str], network: str, *, image: str = LEMONADE_IMAGE,
                   environment: dict[str, str] | None = None, wait: bool = True,
                   timeout_s: float = 300.0, client: docker.DockerClient | None = None,
                   **options: Any) -> LemonadeServer:
    """Start `image` as `name` on `network`, labelled `labels` and ``trialbox.role=lemonade``.
    `options` go to the SDK over the hardening (``cpu_quota``, ``network_mode``...). The chat
    model's CPU threads follow `TRIALBOX_LEMONADE_CPU_THREADS` as in compose.lemonade.yaml, so
    `trialbox up`, `trialbox ab` and scripts/bench-servers start Lemonade alike."""
    threads = os.environ.get(CPU_THREADS_ENV)
    environment = {**({"LEMONADE_CPU_THREADS": threads} if threads else {}), **(environment or {})}
    client = client or docker.from_env()
    if not image_exists(image):
        raise LlmContainerError(f"{image} is not built — `trialbox images` (or `make images`)")
    settings = {**HARDENING, **options}
    if "network_mode" not in settings:
        settings["network"] = network
    try:
        container = client.containers.run(
            image, name=name, detach=True, init=True, labels={**labels, ROLE_LABEL: "lemonade"},
            environment=environment, **settings)
    except DockerException as error:
        raise LlmContainerError(f"could not start the Lemonade container {name}: {error}") from error
    if wait:
        wait_healthy(str(container.id), timeout_s, client)
    address = environment.get("LEMONADE_HOST") or _address(container, network)
    return LemonadeServer(str(container.name), address, f"http://{address}:{LLM_PORT}", container)


#: The bundled MiniLM's window as the front door cuts embedding inputs to it (compose.lemonade.yaml).
EMBED_MAX_TOKENS = 256
#: The chat model's slots as start-lemond loads it (`--parallel 2`, GAIA's own flag), over
#: which the front door places chats GAIA pins to slot 0 (compose.lemonade.yaml).
CHAT_SLOTS = 2


def start_front_door(name: str, labels: dict[str, str], network: str, upstream: str, *,
                     admin_token: str | None = None, embed_max_tokens: int | None = EMBED_MAX_TOKENS,
                     embedding_cache_mib: int = 0, chat_slots: int | None = CHAT_SLOTS,
                     client: docker.DockerClient | None = None) -> tuple[Container, str]:
    """trialbox's front door before `upstream`, on `network`, as compose.lemonade.yaml starts it
    (embedding inputs cut to `embed_max_tokens`; computed embeddings kept in
    `embedding_cache_mib`, 0: none, as for `trialbox ab`; pinned chats placed over `chat_slots`
    slots, None: passed as sent); returns it and its URL there."""
    client = client or docker.from_env()
    try:
        door = client.containers.run(
            LLM_CPU_IMAGE, name=name, detach=True, init=True, network=network,
            labels={**labels, ROLE_LABEL: "llm"},
            entrypoint=["tini", "--", "python", "-m", "trialbox_llm.front_door"],
            command=["--upstream", upstream, "--host", "0.0.0.0", "--port", str(LLM_PORT),
                     *(["--embed-max-tokens", str(embed_max_tokens)] if embed_max_tokens else []),
                     "--embedding-cache-mib", str(embedding_cache_mib),
                     *(["--chat-slots", str(chat_slots)] if chat_slots else [])],
            environment={ADMIN_TOKEN_ENV: admin_token} if admin_token else {},
            read_only=True, tmpfs={"/tmp": "rw,nosuid,nodev,noexec,size=16m"},
            cap_drop=["ALL"], security_opt=["no-new-privileges:true"])
    except DockerException as error:
        raise LlmContainerError(f"could not start the front door {name}: {error}") from error
    url = f"http://{_address(door, network)}:{LLM_PORT}"
    _wait_live(door, url, 60)
    return door, url


def _wait_live(door: Container, url: str, timeout_s: float) -> None:
    """Until the door answers /live (asked here: its image's healthcheck runs every 10 s)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{url}/live", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        door.reload()
        if door.status != "running" or time.monotonic() > deadline:
            raise LlmContainerError(f"the front door {door.name} did not answer {url}/live: "
                                    f"{door.logs(tail=10).decode(errors='replace')}")
        time.sleep(0.2)


__all__ = ["LEMONADE_IMAGE", "LemonadeServer", "start_front_door", "start_lemonade"]
