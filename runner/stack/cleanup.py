"""Remove what trialbox created, found by the ``trialbox.run`` label — and nothing else.

The engine is shared with other work on the same machine, so cleanup never goes by name or
"everything stopped": only objects that carry our label are touched. Images are kept (they
are build artifacts, not run state); ``docker image rm`` them by tag when wanted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import docker
from docker.errors import APIError, NotFound
from docker.models.containers import Container
from docker.models.networks import Network

RUN_LABEL = "trialbox.run"


@dataclass
class CleanupReport:
    """Names of what was removed, and what could not be (with the engine's reason)."""

    containers: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def removed(self) -> int:
        return len(self.containers) + len(self.networks) + len(self.volumes)


def label_filter(run_id: str | None) -> dict[str, str]:
    """``trialbox.run`` (any run) or ``trialbox.run=<id>`` (one run), as a Docker filter."""
    if run_id is not None and not run_id.strip():
        raise ValueError("run id must not be empty; pass None to clean every trialbox run")
    return {"label": RUN_LABEL if run_id is None else f"{RUN_LABEL}={run_id}"}


def cleanup(run_id: str | None = None, client: docker.DockerClient | None = None) -> CleanupReport:
    """Remove labelled containers, then networks, then volumes (that order frees references)."""
    client = client or docker.from_env()
    filters: dict[str, str | list[str] | bool] = {**label_filter(run_id)}
    report = CleanupReport()
    for container in client.containers.list(all=True, filters=filters):
        _remove(partial(container.remove, force=True, v=True), _name(container),
                report.containers, report)
    for network in client.networks.list(filters=filters):
        _disconnect_all(network)
        _remove(network.remove, _name(network), report.networks, report)
    for volume in client.volumes.list(filters=filters):
        _remove(partial(volume.remove, force=True), volume.name, report.volumes, report)
    _sweep_firewall(run_id, report)
    return report


def _name(thing: Container | Network) -> str:
    """What the report calls it: its name, else its id (the engine always gives one of them)."""
    return str(thing.name or thing.id)


def _sweep_firewall(run_id: str | None, report: CleanupReport) -> None:
    """Host firewall rules a crashed run left for its sandbox networks (they carry its label)."""
    from runner.sandbox._firewall import FirewallError, sweep
    from runner.sandbox.docker import _slug

    try:
        sweep(_slug(run_id) if run_id is not None else None)
    except FirewallError as exc:
        report.failures.append(f"firewall rules: {exc}")


def _disconnect_all(network: Network) -> None:
    """An unlabelled container (e.g. a CI job) may have been attached to our network."""
    try:
        network.reload()
        for container in network.containers:
            network.disconnect(container, force=True)
    except (APIError, NotFound):
        pass


def _remove(
    action: Callable[[], object], name: str, removed: list[str], report: CleanupReport
) -> None:
    try:
        action()
        removed.append(name)
    except NotFound:
        pass  # already gone (a container's network removed with it, a race with compose down)
    except APIError as error:
        report.failures.append(f"{name}: {error.explanation or error}")
