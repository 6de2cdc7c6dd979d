"""Test containers the suite starts itself: testcontainers' `DockerContainer` with a wait
strategy, every one labelled `trialbox.run=<tag>` and swept by that label when its test is done.

The llm-cpu server is the one most tests need (`llm_cpu` in tests/conftest.py); the engine and
the sandboxes reach it at its address on Docker's default bridge, as a real run does.

Ryuk (testcontainers' reaper) is off: it is an image from a registry this machine cannot reach,
and the label sweep does its job (tests/conftest.py sets the switch before this module is
imported, the Makefile sets it for `make test`).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import docker
from docker.models.containers import Container
from testcontainers.core.container import DockerContainer
from testcontainers.core.wait_strategies import HealthcheckWaitStrategy

LLM_CPU_IMAGE = "trialbox/llm-cpu:dev"
LLM_PORT = 13305
HEALTHY_WITHIN_S = 180


class ContainerExited(RuntimeError):
    """The container stopped before it became healthy; the message ends with its last log lines."""


class HealthyOrExited(HealthcheckWaitStrategy):
    """Docker's health status "healthy", failing at once (with the last log lines) when the
    container exits — testcontainers' own strategy would wait out its whole timeout then."""

    def wait_until_ready(self, container: Any) -> None:
        wrapped = container.get_wrapped_container()
        deadline = time.monotonic() + self._startup_timeout
        while True:
            wrapped.reload()
            state = wrapped.attrs["State"]
            health = state.get("Health", {}).get("Status")
            if health == "healthy":
                return
            if state.get("Status") in ("exited", "dead"):
                raise ContainerExited(f"{wrapped.name} exited (code {state.get('ExitCode')}) before it was "
                                      f"healthy; last lines:\n{wrapped.logs(tail=30).decode(errors='replace')}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{wrapped.name} not healthy in {self._startup_timeout:.0f} s (health: "
                                   f"{health}); last lines:\n{wrapped.logs(tail=30).decode(errors='replace')}")
            time.sleep(self._poll_interval)


def new_tag(purpose: str) -> str:
    """A run label no other test (or concurrent session) uses: `pytest-<purpose>-<random>`."""
    return f"pytest-{purpose}-{secrets.token_hex(3)}"


def sweep_label(tag: str) -> list[str]:
    """Remove every container and network labelled `trialbox.run=<tag>`; returns their names."""
    client = docker.from_env()
    selector: dict[str, str | list[str] | bool] = {"label": f"trialbox.run={tag}"}
    removed: list[str] = []
    for container in client.containers.list(all=True, filters=selector):
        container.remove(force=True)
        removed.append(str(container.name))
    for network in client.networks.list(filters=selector):
        network.remove()
        removed.append(str(network.name))
    return removed


@dataclass(frozen=True)
class LlmCpu:
    """A running llm-cpu server: what `--llm-container` and `--llm-url` are given."""

    name: str
    url: str
    container: Container
    tag: str


@contextmanager
def llm_cpu_container(tag: str, environment: dict[str, str] | None = None) -> Iterator[LlmCpu]:
    """An llm-cpu container labelled with `tag`, yielded once Docker reports it healthy;
    removed afterwards, together with anything else left under its label."""
    client = docker.from_env()
    try:
        client.images.get(LLM_CPU_IMAGE)
    except docker.errors.ImageNotFound:
        # testcontainers would try to pull it, from a registry that does not have it.
        raise RuntimeError(f"{LLM_CPU_IMAGE} is not built — `make images` (make test builds it first)") from None
    server = (
        DockerContainer(LLM_CPU_IMAGE, env=environment or {}, name=f"tbx-{tag}-llm")
        # The network is named so testcontainers does not put the server on the network of the
        # container the tests run in (it does when it detects one): a real run uses the bridge.
        .with_kwargs(init=True, labels={"trialbox.run": tag, "trialbox.role": "llm"}, network="bridge")
        .waiting_for(HealthyOrExited().with_startup_timeout(HEALTHY_WITHIN_S))
    )
    try:
        server.start()
        wrapped = server.get_wrapped_container()
        wrapped.reload()
        address = wrapped.attrs["NetworkSettings"]["Networks"]["bridge"]["IPAddress"]
        yield LlmCpu(str(wrapped.name), f"http://{address}:{LLM_PORT}", wrapped, tag)
    finally:
        with suppress(docker.errors.NotFound):
            server.stop()
        # A container that never became healthy, or anything a test made under this label.
        sweep_label(tag)
