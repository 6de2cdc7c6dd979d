"""Removing a Docker sandbox: one job's objects, a whole run's leftovers, the LLM's stale links."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import docker
from docker.errors import APIError, NotFound
from docker.models.networks import Network

from runner.sandbox._box import _Made
from runner.sandbox._firewall import FirewallError, release_network
from runner.stack.labels import ROLE_LABEL, RUN_LABEL, SCENARIO_LABEL

#: The shape docker-py's ``list(filters=...)`` takes.
_Filters = dict[str, str | list[str] | bool]


def remove_job(client: docker.DockerClient, llm_container: str, run_id: str, scenario_id: str,
               made: _Made) -> None:
    """Remove what one job made — recorded, or found by its labels — and free the LLM."""
    job: _Filters = {"label": [f"{RUN_LABEL}={run_id}", f"{SCENARIO_LABEL}={scenario_id}"]}
    containers = {c.id: c for c in made.containers}
    for found in _listed(lambda: client.containers.list(all=True, filters=job)):
        containers.setdefault(found.id, found)
    for container in containers.values():
        try:
            container.remove(force=True)
        except (NotFound, APIError):
            pass  # gone already; a failure is swept by label at the end of the run
    networks = {made.network.id: made.network} if made.network is not None else {}
    for found in _listed(lambda: client.networks.list(filters=job)):
        networks.setdefault(found.id, found)
    for network in networks.values():
        release_sandbox_network(client, llm_container, network)


def release_sandbox_network(client: docker.DockerClient, llm_container: str, network: Network) -> None:
    """Detach everything from a sandbox network, remove it and its firewall rules.

    The LLM container is force-disconnected by name first, running or not: a stopped
    container is not listed among the network's endpoints, yet keeps a reference that
    would make its next `docker start` fail once the network is gone.
    """
    try:
        client.api.disconnect_container_from_network(llm_container, str(network.id), force=True)
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


def sweep_run(client: docker.DockerClient, llm_container: str, run_id: str) -> int:
    """Remove everything labelled with the run (a crashed or killed run's leftovers):
    containers, then networks (LLM detached first), then their firewall rules. Returns how
    many Docker objects were removed. Safe while no sandbox of this run is open."""
    run: _Filters = {"label": f"{RUN_LABEL}={run_id}"}
    removed = 0
    for container in _listed(lambda: client.containers.list(all=True, filters=run)):
        if container.labels.get(ROLE_LABEL) == "llm":
            continue  # a run's own LLM server (tests label theirs) is not a sandbox's
        try:
            container.remove(force=True)
            removed += 1
        except (NotFound, APIError):
            pass
    for network in _listed(lambda: client.networks.list(filters=run)):
        release_sandbox_network(client, llm_container, network)
        removed += 1
    repair_llm_networks(client, llm_container)
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


def _listed(listing: Callable[[], list[Any]]) -> list[Any]:
    """What a Docker listing returns, or nothing when the engine cannot list."""
    try:
        return listing()
    except (APIError, NotFound):
        return []
