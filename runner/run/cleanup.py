"""Remove what trialbox created, found by the ``trialbox.run`` label — and nothing else.

The engine is shared with other work on the same machine, so cleanup never goes by name or
"everything stopped": only objects that carry our label are touched. Images are kept (they
are build artifacts, not run state); ``docker image rm`` them by tag when wanted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import docker
from docker.errors import APIError, NotFound
from docker.models.containers import Container
from docker.models.networks import Network

from runner.stack.labels import RUN_LABEL

#: The label value of the shared stack (`trialbox up`, runner/stack/compose.py's default).
STACK_RUN_ID = "stack"
#: What Docker Compose puts on what it made: the stack, never a run's sandboxes.
COMPOSE_PROJECT_LABEL = "com.docker.compose.project"


@dataclass
class CleanupReport:
    """Names of what was removed, and what could not be (with the engine's reason)."""

    containers: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # the shared stack's objects, left alone

    @property
    def removed(self) -> int:
        return len(self.containers) + len(self.networks) + len(self.volumes)


def label_filter(run_id: str | None) -> dict[str, str]:
    """``trialbox.run`` (any run) or ``trialbox.run=<id>`` (one run), as a Docker filter."""
    if run_id is not None and not run_id.strip():
        raise ValueError("run id must not be empty; pass None to clean every trialbox run")
    return {"label": RUN_LABEL if run_id is None else f"{RUN_LABEL}={run_id}"}


def is_stack(labels: dict[str, str] | None) -> bool:
    """Whether a labelled object belongs to the shared stack (`trialbox up`: the LLM server and
    its network), which every run uses, rather than to one run's sandboxes."""
    labels = labels or {}
    return labels.get(RUN_LABEL) == STACK_RUN_ID or COMPOSE_PROJECT_LABEL in labels


def cleanup(run_id: str | None = None, client: docker.DockerClient | None = None, *,
            include_stack: bool = False, keep_runs: frozenset[str] = frozenset()) -> CleanupReport:
    """Remove labelled containers, then networks, then volumes (that order frees references).

    Without a run id every run's objects go but the shared stack's stay (a run may be using
    the LLM server): it goes with `trialbox down`, or with ``include_stack`` (`clean --all`,
    which first makes sure no run is alive — see ``live_runs``). ``keep_runs``: runs whose
    owner is alive (``owned_runs``) keep their sandboxes and firewall rules."""
    client = client or docker.from_env()
    filters: dict[str, str | list[str] | bool] = {**label_filter(run_id)}
    report = CleanupReport()
    swept_runs: set[str] = set()

    def kept(labels: dict[str, str] | None, name: str) -> bool:
        labels = labels or {}
        if run_id is None and ((not include_stack and is_stack(labels))
                               or labels.get(RUN_LABEL) in keep_runs):
            report.kept.append(name)
            return True
        swept_runs.add(labels.get(RUN_LABEL, ""))
        return False

    for container in client.containers.list(all=True, filters=filters):
        if not kept(container.labels, _name(container)):
            _remove(partial(container.remove, force=True, v=True), _name(container),
                    report.containers, report)
    for network in client.networks.list(filters=filters):
        if not kept(network.attrs.get("Labels"), _name(network)):
            _disconnect_all(network)
            _remove(network.remove, _name(network), report.networks, report)
    for volume in client.volumes.list(filters=filters):
        if not kept(volume.attrs.get("Labels"), volume.name):
            _remove(partial(volume.remove, force=True), volume.name, report.volumes, report)
    if run_id is None and keep_runs:
        # A live run's rules keep its sandboxes off the host: only the swept runs' rules go.
        for swept in sorted(swept_runs - {""}):
            _sweep_firewall(swept, report)
    else:
        _sweep_firewall(run_id, report)
    return report


def owned_runs(results_root: Path | None) -> frozenset[str]:
    """Run folders under ``results_root`` whose owner process is alive (runner/run/lock.py)."""
    from runner.run.lock import is_owned

    if results_root is None or not results_root.is_dir():
        return frozenset()
    return frozenset(folder.name for folder in results_root.iterdir()
                     if folder.is_dir() and is_owned(folder))


def live_runs(client: docker.DockerClient | None = None, results_root: Path | None = None) -> list[str]:
    """The runs alive now: a running container of a run (not the stack's), or a run folder
    under ``results_root`` whose owner's lock is held (runner/run/lock.py)."""
    client = client or docker.from_env()
    alive = {container.labels.get(RUN_LABEL, "")
             for container in client.containers.list(filters={"label": RUN_LABEL, "status": "running"})
             if not is_stack(container.labels)}
    return sorted((alive | owned_runs(results_root)) - {""})


def _name(thing: Container | Network) -> str:
    """What the report calls it: its name, else its id (the engine always gives one of them)."""
    return str(thing.name or thing.id)


def _sweep_firewall(run_id: str | None, report: CleanupReport) -> None:
    """Host firewall rules a crashed run left for its sandbox networks (they carry its label)."""
    from runner.sandbox import FirewallError, safe_name, sweep_firewall

    try:
        sweep_firewall(safe_name(run_id) if run_id is not None else None)
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
