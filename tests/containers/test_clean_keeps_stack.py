"""`trialbox clean` never removes the stack a run is using: real Docker objects of our own.

Every object here carries the test's own owner label, and the Docker client the cleanup gets
only ever lists objects with that label: the machine's real stack and other sessions' runs are
never in reach. The host firewall sweep is recorded instead of run, for the same reason (a
sweep of every label would remove live runs' rules on a shared machine).
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# runner.stack re-exports the function `cleanup` under the module's name.
cleaning = importlib.import_module("runner.run.cleanup")

docker = pytest.importorskip("docker")

pytestmark = pytest.mark.containers

IMAGE = "trialbox/base:bookworm"


class _Scoped:
    """A collection (containers, networks, volumes) that lists only the test's own objects."""

    def __init__(self, collection: Any, owner: str) -> None:
        self.collection, self.owner = collection, owner

    def list(self, **kwargs: Any) -> list[Any]:
        filters = dict(kwargs.pop("filters", None) or {})
        labels = filters.get("label", [])
        filters["label"] = [*([labels] if isinstance(labels, str) else labels), self.owner]
        return list(self.collection.list(filters=filters, **kwargs))


class ScopedClient:
    """The real Docker client, narrowed to objects carrying ``owner`` (a label)."""

    def __init__(self, client: Any, owner: str) -> None:
        self.containers = _Scoped(client.containers, owner)
        self.networks = _Scoped(client.networks, owner)
        self.volumes = _Scoped(client.volumes, owner)


@pytest.fixture
def owned(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, ScopedClient, dict[str, str]]]:
    client = docker.from_env()
    client.images.get(IMAGE)  # ImageNotFound: `trialbox images`
    owner = f"pytest.clean-owner={uuid.uuid4().hex[:10]}"
    key, value = owner.split("=")
    swept: list[str | None] = []
    monkeypatch.setattr(cleaning, "_sweep_firewall", lambda run_id, report: swept.append(run_id))
    try:
        yield client, ScopedClient(client, owner), {key: value}
    finally:
        for container in client.containers.list(all=True, filters={"label": owner}):
            container.remove(force=True)
        for network in client.networks.list(filters={"label": owner}):
            network.remove()


def _make(client: Any, tag: dict[str, str], run: str, *, compose: bool = False, running: bool = False) -> str:
    labels = {**tag, "trialbox.run": run}
    if compose:
        labels["com.docker.compose.project"] = "pytest-clean"
    name = f"pytest-clean-{uuid.uuid4().hex[:10]}"
    if running:
        client.containers.run(IMAGE, ["sleep", "300"], name=name, labels=labels, detach=True,
                              network_mode="none")
    else:
        client.containers.create(IMAGE, ["true"], name=name, labels=labels, network_mode="none")
    return name


def _names(client: Any, tag: dict[str, str]) -> set[str]:
    (key, value), = tag.items()
    return {c.name for c in client.containers.list(all=True, filters={"label": f"{key}={value}"})}


def test_clean_without_a_run_id_keeps_the_stack_and_removes_runs(owned: Any) -> None:
    client, scoped, tag = owned
    stack = _make(client, tag, "stack", running=True)
    composed = _make(client, tag, "pytest-other-stack-id", compose=True)
    leftover = _make(client, tag, "20260101-000000-abcd")
    network = client.networks.create(f"pytest-clean-{uuid.uuid4().hex[:8]}", labels={**tag, "trialbox.run": "stack"})
    report = cleaning.cleanup(None, scoped)  # type: ignore[arg-type]
    assert _names(client, tag) == {stack, composed}, "the stack went, or a run's leftover stayed"
    assert report.containers == [leftover]
    assert set(report.kept) == {stack, composed, network.name}
    network.reload()  # NotFound if the stack's network went


def test_clean_all_refuses_while_a_run_is_alive_then_removes_the_stack(owned: Any, tmp_path: Path) -> None:
    client, scoped, tag = owned
    stack = _make(client, tag, "stack", running=True)
    live = _make(client, tag, "20260101-000000-beef", running=True)
    assert cleaning.live_runs(scoped, tmp_path) == ["20260101-000000-beef"]  # type: ignore[arg-type]
    client.containers.get(live).remove(force=True)
    assert cleaning.live_runs(scoped, tmp_path) == []  # type: ignore[arg-type]
    report = cleaning.cleanup(None, scoped, include_stack=True)  # type: ignore[arg-type]
    assert report.containers == [stack] and _names(client, tag) == set()


def test_a_locked_run_folder_is_a_live_run(owned: Any, tmp_path: Path) -> None:
    from runner.run.lock import owning

    _, scoped, _ = owned
    run_dir = tmp_path / "20260101-000000-cafe"
    with owning(run_dir):
        assert cleaning.live_runs(scoped, tmp_path) == [run_dir.name]  # type: ignore[arg-type]
    assert cleaning.live_runs(scoped, tmp_path) == []  # type: ignore[arg-type]


def test_clean_keeps_the_sandboxes_and_firewall_rules_of_a_run_whose_owner_is_alive(
    owned: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.run.lock import owning

    client, scoped, tag = owned
    alive, dead = "20260101-000000-aaaa", "20260101-000000-dddd"
    kept = _make(client, tag, alive, running=True)
    leftover = _make(client, tag, dead, running=True)
    swept: list[str | None] = []
    monkeypatch.setattr(cleaning, "_sweep_firewall", lambda run_id, report: swept.append(run_id))
    with owning(tmp_path / alive):
        owners = cleaning.owned_runs(tmp_path)
        assert owners == {alive}
        report = cleaning.cleanup(None, scoped, keep_runs=owners)  # type: ignore[arg-type]
    assert report.containers == [leftover] and kept in report.kept
    assert _names(client, tag) == {kept}
    assert swept == [dead], "a live run's firewall rules were swept (or the dead run's were not)"


def test_clean_all_with_a_run_id_is_a_usage_error_that_removes_nothing() -> None:
    from typer.testing import CliRunner

    from runner.cli.app import app

    result = CliRunner().invoke(app, ["clean", "--all", "--run-id", "20260101-000000-abcd"],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--all and --run-id exclude each other" in lines[0]
