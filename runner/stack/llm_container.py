"""Start, find and stop an llm-cpu server container of one's own, outside the compose stack.

Benchmarks, the soak and the test suite each need an LLM server they own (labelled, so it is
swept with the rest of their run); they all start it here, one way: ``trialbox/llm-cpu:dev``
with tini, labelled ``trialbox.role=llm`` beside the caller's labels, returned once Docker
reports it healthy (its healthcheck asks ``/live``, which answers once both models are loaded).
``find_llm_container`` finds the compose stack's server (``trialbox up``) instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import docker
from docker.errors import DockerException, NotFound
from docker.models.containers import Container

from runner.stack.compose import DEFAULT_PROJECT, LLM_PORT, LLM_SERVICE, wait_healthy
from runner.stack.image_store import image_exists, image_tag, repo_root
from runner.stack.labels import ROLE_LABEL

LLM_CPU_IMAGE = image_tag("llm-cpu")
#: Where the server's model files are inside the image (and where ``models=True`` mounts
#: the checkout's .cache/models over them).
MODELS_DIR = "/models"
#: The labels compose puts on the default stack's LLM container.
STACK_LABELS = {"com.docker.compose.project": DEFAULT_PROJECT, "com.docker.compose.service": LLM_SERVICE}


class LlmContainerError(RuntimeError):
    """The llm-cpu container could not be started; the message says why and what to do."""


@dataclass(frozen=True)
class LlmContainer:
    """A running llm-cpu server of one's own: what `--llm-container` and `--llm-url` are given."""

    #: The container's name.
    name: str
    #: Where this host reaches the server: its published loopback port, else its address.
    url: str
    #: The docker SDK's container (to update, stop or restart it).
    container: Container


def start_llm_container(
    name: str,
    labels: dict[str, str],
    *,
    args: list[str] | None = None,
    environment: dict[str, str] | None = None,
    volumes: dict[str, dict[str, str]] | None = None,
    models: bool = False,
    network: str = "bridge",
    address: str | None = None,
    publish: bool = False,
    wait: bool = True,
    timeout_s: float = 300.0,
    client: docker.DockerClient | None = None,
    image: str = LLM_CPU_IMAGE,
    **options: Any,
) -> LlmContainer:
    """Start ``trialbox/llm-cpu:dev`` as `name`, labelled `labels` and ``trialbox.role=llm``.

    `args` are added to the server's command line (``--double``, ``--embedder-slots 4``);
    `image`: another build of llm-cpu (`trialbox ab`'s sides); `volumes` are the SDK's mounts (server code over the image's); `models` mounts the
    checkout's .cache/models over the image's model files. On `network` (Docker's bridge unless
    told), at the fixed `address` when one is given (so a restarted server comes back where a
    run expects it); `publish` maps the server's port to a free loopback port, which `url` then
    names. `options` go to the SDK as they are (``cpu_shares``, ``read_only``, ``tmpfs``).
    With `wait`, returns once Docker reports it healthy (``wait_until_ready`` otherwise)."""
    client = client or docker.from_env()
    if not image_exists(image):
        # The SDK would try to pull it, from a registry that does not have it.
        raise LlmContainerError(f"{image} is not built — `trialbox images` (or `make images`)")
    mounts = dict(volumes or {})
    if models:
        mounts[str(repo_root() / ".cache" / "models")] = {"bind": MODELS_DIR, "mode": "ro"}
    # No host port given: the engine picks a free one (no race with another process's pick).
    ports: dict[str, Any] = {f"{LLM_PORT}/tcp": ("127.0.0.1", None)} if publish else {}
    command = ["--host", "0.0.0.0", "--port", str(LLM_PORT), "--models-dir", MODELS_DIR, *(args or [])]
    try:
        container = client.containers.create(
            image, command, name=name, detach=True, init=True,
            labels={**labels, ROLE_LABEL: "llm"}, environment=environment or {}, volumes=mounts,
            network=network, ports=ports,
            **options,
        )  # fmt: skip
        if address is not None:
            client.api.disconnect_container_from_network(str(container.id), network)
            client.api.connect_container_to_network(str(container.id), network, ipv4_address=address)
        container.start()
        container.reload()
    except DockerException as error:
        raise LlmContainerError(f"could not start the LLM container {name}: {error}") from error
    server = LlmContainer(str(container.name), _url_of(container, network, publish), container)
    if wait:
        wait_until_ready(server, timeout_s, client)
    return server


def _url_of(container: Container, network: str, published: bool) -> str:
    if published:
        port = container.attrs["NetworkSettings"]["Ports"][f"{LLM_PORT}/tcp"][0]["HostPort"]
        return f"http://127.0.0.1:{port}"
    address = container.attrs["NetworkSettings"]["Networks"][network]["IPAddress"]
    return f"http://{address}:{LLM_PORT}"


def wait_until_ready(server: LlmContainer, timeout_s: float = 300.0,
                     client: docker.DockerClient | None = None) -> None:
    """Until Docker reports the server healthy; at once, with its last log lines, if it exits."""
    wait_healthy(str(server.container.id), timeout_s, client)


def stop_llm_container(name: str, client: docker.DockerClient | None = None) -> None:
    """Remove the container `name` if it is there (running or not)."""
    client = client or docker.from_env()
    try:
        client.containers.get(name).remove(force=True)
    except NotFound:
        pass


def find_llm_container() -> str | None:
    """The running LLM server container of the default stack, if any."""
    try:
        client = docker.from_env()
        filters: dict[str, str | list[str] | bool] = {
            "label": [f"{k}={v}" for k, v in STACK_LABELS.items()], "status": "running",
        }
        found = client.containers.list(filters=filters)
    except DockerException:
        return None
    return found[0].name if found else None


__all__ = [
    "LLM_CPU_IMAGE",
    "MODELS_DIR",
    "STACK_LABELS",
    "LlmContainer",
    "LlmContainerError",
    "find_llm_container",
    "start_llm_container",
    "stop_llm_container",
    "wait_until_ready",
]
