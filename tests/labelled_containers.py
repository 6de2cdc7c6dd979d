"""Test containers the suite starts itself, every one labelled `trialbox.run=<tag>` and swept by
that label when its test is done.

The llm-cpu server is the one most tests need (`llm_cpu` in tests/conftest.py); it is started
the one way trialbox's scripts start theirs (runner/stack/llm_container.py), and the engine and
the sandboxes reach it at its address on Docker's default bridge, as a real run does.

Ryuk (testcontainers' reaper, for the containers other tests start with testcontainers) is off:
it is an image from a registry this machine cannot reach, and the label sweep does its job
(tests/conftest.py sets the switch before this module is imported, the Makefile sets it for
`make test`).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import docker
from docker.models.containers import Container

from runner.stack.labels import RUN_LABEL
from runner.stack.llm_container import LLM_CPU_IMAGE, start_llm_container

__all__ = ["LLM_CPU_IMAGE", "LlmCpu", "llm_cpu_container", "new_tag", "sweep_label"]

HEALTHY_WITHIN_S = 180


def new_tag(purpose: str) -> str:
    """A run label no other test (or concurrent session) uses: `pytest-<purpose>-<random>`."""
    return f"pytest-{purpose}-{secrets.token_hex(3)}"


def sweep_label(tag: str) -> list[str]:
    """Remove every container and network labelled `trialbox.run=<tag>`; returns their names."""
    client = docker.from_env()
    selector: dict[str, str | list[str] | bool] = {"label": f"{RUN_LABEL}={tag}"}
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
    try:
        server = start_llm_container(f"tbx-{tag}-llm", {RUN_LABEL: tag}, environment=environment,
                                     timeout_s=HEALTHY_WITHIN_S)
        yield LlmCpu(server.name, server.url, server.container, tag)
    finally:
        # A container that never became healthy, or anything a test made under this label.
        sweep_label(tag)
