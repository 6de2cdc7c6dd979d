"""Runs spread over a real local Ray cluster (see conftest): results equal a local run's, `--on`
places by device, a node without a config is an INFRA_ERROR, and a node killed mid-run costs
nothing but a retry — every scenario recorded exactly once."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import docker
import pytest
from local_cluster import LocalCluster

from runner.cluster import (
    ClusterConversations,
    ClusterError,
    ClusterLog,
    parse_on,
    run_on_cluster,
    run_per_node,
)
from runner.cluster._node import load_node_config
from runner.cluster._run import PER_NODE_FILE
from runner.records.status import Status
from runner.report import Scorecard
from runner.run.errors import UsageError
from runner.run.launch import run as local_run
from runner.run.resume import resume_settings

pytestmark = [pytest.mark.containers, pytest.mark.timeout(2400)]
MEASURED = Path("/tmp/trialbox-cluster-measurements.jsonl")


def _card(run_dir: Path) -> Scorecard:
    return Scorecard.model_validate_json((run_dir / "scorecard.json").read_text())


def _log(run_dir: Path) -> ClusterLog:
    return ClusterLog.model_validate_json((run_dir / "cluster.json").read_text())


def _verdicts(card: Scorecard) -> dict[str, tuple[str, list[list[tuple[str, bool | None]]]]]:
    """Status and every check's outcome per scenario: what must not depend on where it ran."""
    return {r.id: (r.status.value, [[(c.type, c.passed) for c in t.checks] for t in r.turns])
            for r in card.scenarios}


def _measure(name: str, card: Scorecard, seconds: float, log: ClusterLog | None) -> None:
    overheads = [j.overhead_s for j in (log.jobs.values() if log else []) if j.overhead_s is not None]
    with MEASURED.open("a") as out:
        out.write(json.dumps({"run": name, "scenarios": len(card.scenarios), "wall_s": round(seconds, 1),
                              "per_min": round(len(card.scenarios) / seconds * 60, 2),
                              "overhead_s": overheads}) + "\n")


def test_a_run_spreads_over_both_nodes_and_equals_a_local_run(cluster: LocalCluster, tmp_path: Path) -> None:
    local = cluster.settings(tmp_path / "local")
    local.concurrency = 2
    started = time.perf_counter()
    local_card = asyncio.run(local_run(local, print))
    _measure("local concurrency 2", local_card, time.perf_counter() - started, None)

    spread = cluster.settings(tmp_path / "cluster")
    started = time.perf_counter()
    card = asyncio.run(run_on_cluster(spread, cluster.address, {}, print))
    seconds = time.perf_counter() - started
    log = _log(spread.run_dir)
    _measure("cluster 2 nodes", card, seconds, log)

    assert _verdicts(card) == _verdicts(local_card)
    # Both decoded repeatably: the nodes held the lease as the local run did.
    assert card.config.extra["decoding"] == local_card.config.extra["decoding"]
    assert card.config.extra["decoding"].startswith("repeatable")
    assert len(card.scenarios) == 3
    assert {j.node_name for j in log.jobs.values()} == {"alpha", "beta"}
    # Each row names its node with that node's hardware and served model (the local run's none).
    configs = {name: load_node_config(cluster.configs / f"{name}.json") for name in ("alpha", "beta")}
    for result in card.scenarios:
        assert result.node is not None and result.node.name == log.jobs[result.key].node_name
        config = configs[result.node.name]
        assert result.node.fingerprint_id == config.fingerprint_id
        assert result.node.hardware == config.fingerprint.model_dump(mode="json")
        assert result.node.served_model == local_card.config.served_model is not None
    assert all(r.node is None for r in local_card.scenarios)
    # The nodes are alike (one machine, one server): the headline says nothing of nodes, and
    # the scorecard's hardware and model are theirs, its concurrency the cluster's slots.
    summary = (spread.run_dir / "summary.md").read_text()
    assert "nodes differ" not in summary
    assert card.config.hardware == configs["alpha"].fingerprint.model_dump(mode="json")
    assert card.config.served_model == local_card.config.served_model
    assert card.config.concurrency == 2
    assert all(len(j.attempts) == 1 and not j.attempts[0].lost for j in log.jobs.values())
    for result in card.scenarios:
        trace = json.loads((spread.run_dir / result.trace).read_text())
        assert trace["transcript"]["turns"], result.id
        assert trace["artifacts"], f"{result.id}: the node's artifacts did not reach the controller"
        for name in trace["artifacts"]:
            assert (spread.run_dir / name).stat().st_size > 0
    # The address (it may carry a token) is never written into the run folder.
    for path in spread.run_dir.rglob("*"):
        if path.is_file() and path.suffix in {".json", ".md", ".xml", ".html"}:
            assert cluster.address not in path.read_text(errors="replace"), path


def test_on_device_places_every_job_on_the_matching_node(cluster: LocalCluster, tmp_path: Path) -> None:
    settings = cluster.settings(tmp_path)
    started = time.perf_counter()
    card = asyncio.run(run_on_cluster(settings, cluster.address, {"device": "rocm"}, print))
    log = _log(settings.run_dir)
    _measure("cluster 1 node (--on device=rocm)", card, time.perf_counter() - started, log)
    assert [n.name for n in log.nodes] == ["beta"]
    assert {j.node_name for j in log.jobs.values()} == {"beta"}
    assert card.config.extra["cluster"]["selector"] == {"device": "rocm"}


def test_bad_selectors_and_missing_nodes_are_clear(cluster: LocalCluster, tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match="KEY one of device, fingerprint, driver, node"):
        parse_on(["gpu=yes"])
    with pytest.raises(ClusterError, match="KEY=VALUE"):
        parse_on(["device"])
    assert parse_on(["device=rocm", "driver=none"]) == {"device": "rocm", "driver": "none"}
    conversations = ClusterConversations(cluster.address, cluster.settings(tmp_path), {"device": "npu"})
    with pytest.raises(ClusterError, match="no node of the cluster offers sandbox slots for device=npu"):
        conversations.start()


def test_a_worker_without_a_node_config_records_infra_error(cluster: LocalCluster, tmp_path: Path) -> None:
    # A Ray worker that did not come from `trialbox node join`: it has no LLM server to use.
    stray = cluster.cluster.add_node(num_cpus=1, resources={"trialbox": 1, "device:npu": 1},
                                     labels={"trialbox-device": "npu", "trialbox-node": "stray"})
    try:
        settings = cluster.settings(tmp_path)
        settings.selection.ids = ["orchard_apples"]
        card = asyncio.run(run_on_cluster(settings, cluster.address, {"device": "npu"}, print))
    finally:
        cluster.cluster.remove_node(stray)
    [result] = card.scenarios
    assert result.status is Status.INFRA_ERROR
    assert "TRIALBOX_NODE_CONFIG" in (result.error or "")


def test_per_node_runs_once_per_node_and_compares_them(cluster: LocalCluster, tmp_path: Path) -> None:
    settings = cluster.settings(tmp_path)
    settings.selection.ids = ["lighthouse_fuel"]
    result = asyncio.run(run_per_node(settings, cluster.address, {}, print))
    assert sorted(r.node.name for r in result.runs) == ["alpha", "beta"]
    for run in result.runs:
        cluster.run_ids.append(run.run_id)
        log = _log(tmp_path / run.run_id)
        assert {j.node_name for j in log.jobs.values()} == {run.node.name}
        card = _card(tmp_path / run.run_id)
        assert [r.id for r in card.scenarios] == ["lighthouse_fuel"]
        assert card.config.extra["node"]["name"] == run.node.name
    [comparison] = result.comparisons
    text = comparison.read_text()
    assert result.runs[0].run_id in text and result.runs[1].run_id in text

    # Interrupted before the second node's run began (its folder holds only the plan), then
    # resumed from the first folder: the first run is kept as it was, the second runs under
    # its planned id on its node, and no other run folder appears.
    first, second = (tmp_path / r.run_id for r in result.runs)
    kept = _card(first).scenarios
    for path in sorted(second.rglob("*"), reverse=True):
        if path.name != PER_NODE_FILE:
            path.unlink() if path.is_file() else path.rmdir()
    with pytest.raises(UsageError, match="resume it with --per-node"):
        asyncio.run(run_on_cluster(resume_settings(first), cluster.address, {}, print, resume=True))
    again = asyncio.run(run_per_node(resume_settings(first), cluster.address, {}, print, resume=True))
    assert [(r.node.name, r.run_id) for r in again.runs] == [(r.node.name, r.run_id) for r in result.runs]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(r.run_id for r in result.runs)
    assert _card(first).scenarios == kept  # nothing left to do there: the row is the same row
    card = _card(second)
    assert [(r.id, r.node.name if r.node else None) for r in card.scenarios] == [
        ("lighthouse_fuel", result.runs[1].node.name)]
    assert len(again.comparisons) == 1 and not again.left


def test_a_node_killed_mid_run_costs_a_retry_and_records_each_scenario_once(
        cluster: LocalCluster, tmp_path: Path) -> None:
    settings = cluster.settings(tmp_path)
    outcome: dict[str, Scorecard] = {}

    def drive() -> None:
        outcome["card"] = asyncio.run(run_on_cluster(settings, cluster.address, {}, print))

    runner = threading.Thread(target=drive)
    runner.start()
    client = docker.from_env()
    deadline = time.monotonic() + 300
    # Both nodes busy (two Agent UIs of this run up) means alpha is mid-job: kill it then.
    while time.monotonic() < deadline:
        uis = client.containers.list(filters={"label": [f"trialbox.run={settings.run_id}",
                                                        "trialbox.role=agent-ui"]})
        if len(uis) >= 2:
            break
        time.sleep(0.5)
    else:
        pytest.fail("the run never had two sandboxes up")
    cluster.cluster.remove_node(cluster.nodes.pop("alpha"), allow_graceful=False)
    runner.join(timeout=1800)
    assert not runner.is_alive()
    card = outcome["card"]
    ids = [r.id for r in card.scenarios]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 3, ids
    assert len(list((settings.run_dir / "traces").glob("*.json"))) == 3
    assert all(r.status is not Status.NOT_RUN for r in card.scenarios)
    log = _log(settings.run_dir)
    retried = [j for j in log.jobs.values() if len(j.attempts) > 1]
    assert len(retried) == 1, log.model_dump_json(indent=2)
    [job] = retried
    assert job.attempts[0].lost and job.attempts[0].node_name == "alpha"
    assert job.node_name == "beta" and not job.attempts[1].lost
    assert any("attempt 1 lost with node alpha" in w and "retried on node beta" in w
               for w in card.warnings), card.warnings
