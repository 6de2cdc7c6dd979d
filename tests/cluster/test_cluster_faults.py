"""A cluster run behaves as a local run when things go wrong, on a real local Ray cluster (see
conftest): three identical errors stop it even when they come from different nodes, a resumed
run runs only what is left, Ctrl-C tears the sandboxes down on the nodes and leaves nothing
labelled, and a node that joins mid-run takes work.

Extra nodes are added here, beside the fixture's alpha (cpu) and beta (rocm), under the device
label npu so that `--on device=npu` chooses exactly them: "dead" nodes whose LLM server URL
answers nothing (connection refused), and healthy ones on the module's llm-cpu server."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import docker
import pytest
from local_cluster import SUITE, LocalCluster

from runner.cluster import ClusterLog, run_on_cluster
from runner.cluster._node import DEVICE_LABEL, NODE_CONFIG_ENV, QUIET_RAY_ENV, make_config
from runner.records.status import Status
from runner.report import Scorecard
from runner.run.cleanup import label_filter
from runner.run.errors import EXIT_INFRA, EXIT_OK, ModelChanged, UsageError
from runner.run.gate import exit_code
from runner.run.lock import is_owned, owning
from runner.run.resume import resume_settings

pytestmark = [pytest.mark.containers, pytest.mark.timeout(1800)]
TRIALBOX = Path(sys.executable).with_name("trialbox")
# Nothing listens on port 9 (discard) of the loopback: a node's LLM server that is down.
DEAD_LLM = "http://127.0.0.1:9"


@contextmanager
def npu_nodes(cluster: LocalCluster, names: list[str], llm_url: str | None = None) -> Iterator[None]:
    """Worker nodes labelled npu, as `trialbox node join --device npu` would announce them
    (one sandbox slot each), removed again afterwards."""
    added = [_add_npu_node(cluster, name, llm_url) for name in names]
    try:
        yield
    finally:
        for node in added:
            cluster.cluster.remove_node(node)


def _add_npu_node(cluster: LocalCluster, name: str, llm_url: str | None) -> object:
    config = make_config(device="cpu", slots=1, llm_container=cluster.llm_container,
                         llm_url=llm_url or cluster.llm_url, name=name,
                         cache_dir=cluster.configs / name)
    path = cluster.configs / f"{name}.json"
    path.write_text(config.model_dump_json())
    return cluster.cluster.add_node(
        num_cpus=1, resources={"trialbox": 1, "device:npu": 1},
        labels=config.labels() | {DEVICE_LABEL: "npu"},
        env_vars={NODE_CONFIG_ENV: str(path), **QUIET_RAY_ENV})


def _card(run_dir: Path) -> Scorecard:
    return Scorecard.model_validate_json((run_dir / "scorecard.json").read_text())


def _log(run_dir: Path) -> ClusterLog:
    return ClusterLog.model_validate_json((run_dir / "cluster.json").read_text())


def _statuses(card: Scorecard) -> dict[str, Status]:
    return {r.key: r.status for r in card.scenarios}


def _labelled(run_id: str) -> list[str]:
    """Every Docker object the run left (containers, networks, volumes) on the shared engine."""
    client = docker.from_env()
    filters = label_filter(run_id)
    return ([c.name for c in client.containers.list(all=True, filters=filters)]
            + [n.name for n in client.networks.list(filters=filters)]
            + [v.name for v in client.volumes.list(filters=filters)])


def _wait_for_sandboxes(run_id: str, count: int, seconds: float = 300) -> None:
    client = docker.from_env()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        uis = client.containers.list(filters={"label": [f"trialbox.run={run_id}",
                                                        "trialbox.role=agent-ui"]})
        if len(uis) >= count:
            return
        time.sleep(0.5)
    pytest.fail(f"run {run_id} never had {count} sandbox(es) up")


def test_identical_errors_on_different_nodes_stop_the_run_and_resume_runs_the_rest(
        cluster: LocalCluster, tmp_path: Path) -> None:
    settings = cluster.settings(tmp_path)
    settings.trials = 2  # 6 jobs: the stop leaves some NOT_RUN
    with npu_nodes(cluster, ["dead1", "dead2"], llm_url=DEAD_LLM):
        card = asyncio.run(run_on_cluster(settings, cluster.address, {"device": "npu"}, print))
    statuses = _statuses(card)
    failed = [k for k, s in statuses.items() if s is Status.INFRA_ERROR]
    not_run = [k for k, s in statuses.items() if s is Status.NOT_RUN]
    assert len(statuses) == 6 and len(failed) + len(not_run) == 6, statuses
    assert 3 <= len(failed) <= 4 and not_run, statuses  # at most one more was on a node already
    assert any(w.startswith("stopped after 3 identical infrastructure errors in a row")
               for w in card.warnings), card.warnings
    assert exit_code(card, None) == EXIT_INFRA
    log = _log(settings.run_dir)
    # The same cause came from both nodes: the node's name is beside the error, not in it.
    assert {log.jobs[k].node_name for k in failed} == {"dead1", "dead2"}
    assert all("the node's LLM server stopped answering" in (r.error or "")
               for r in card.scenarios if r.status is Status.INFRA_ERROR)
    assert any("ran on node dead1" in w for w in card.warnings), card.warnings
    for result in card.scenarios:
        if result.status is Status.NOT_RUN:
            assert (result.error or "").startswith("stopped after 3 identical"), result.error
            assert result.key not in log.jobs or not log.jobs[result.key].attempts

    # A second process resuming while the run still has an owner: refused before anything.
    with owning(settings.run_dir), pytest.raises(UsageError, match="in use by a live run"):
        asyncio.run(run_on_cluster(resume_settings(settings.run_dir), cluster.address, {}, print,
                                   resume=True))
    # Planted: the run started on a model the nodes no longer serve — the resume is refused
    # (exit 2), naming each node, before any job runs.
    scorecard = settings.run_dir / "scorecard.json"
    original = scorecard.read_text()
    planted = json.loads(original)
    planted["config"]["extra"]["cluster"]["served_models"]["dead1"] = "Planted-1B Q4_0 by nobody"
    scorecard.write_text(json.dumps(planted))
    with pytest.raises(ModelChanged, match=r"node alpha now serves .*; this run started with "
                                           r"Planted-1B Q4_0 by nobody"):
        asyncio.run(run_on_cluster(resume_settings(settings.run_dir), cluster.address, {}, print,
                                   resume=True))
    assert _statuses(_card(settings.run_dir)) == statuses  # nothing ran
    scorecard.write_text(original)

    # Resumed on the healthy nodes (any device): only the NOT_RUN jobs run; the errors stay.
    again = resume_settings(settings.run_dir)
    resumed = asyncio.run(run_on_cluster(again, cluster.address, {}, print, resume=True))
    after = _statuses(resumed)
    assert sorted(after) == sorted(statuses) and len(resumed.scenarios) == 6
    assert {k for k, s in after.items() if s is Status.INFRA_ERROR} == set(failed)
    assert all(after[k] not in (Status.NOT_RUN, Status.INFRA_ERROR) for k in not_run), after
    assert len(list((settings.run_dir / "traces").glob("*.json"))) == 6
    log = _log(settings.run_dir)
    assert {log.jobs[k].node_name for k in failed} == {"dead1", "dead2"}  # kept on record
    assert {log.jobs[k].node_name for k in not_run} <= {"alpha", "beta"}
    assert _labelled(settings.run_id) == []


def test_ctrl_c_tears_the_sandboxes_down_on_the_nodes_and_resume_finishes(
        cluster: LocalCluster, tmp_path: Path) -> None:
    results = tmp_path / "results"
    command = [str(TRIALBOX), "run", str(SUITE / "scenarios"), "--corpus", str(SUITE / "corpus"),
               "--backend", "docker", "--device", "cpu", "--llm-url", cluster.llm_url,
               "--llm-container", cluster.llm_container, "--judge-provider", "none",
               "--simulator", "scripted", "--results", str(results)]
    # The address comes from the environment, as a token-bearing one would.
    env = os.environ | QUIET_RAY_ENV | {"TRIALBOX_CLUSTER": cluster.address}
    with (tmp_path / "first.log").open("w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(results.glob("*/run.json")):
            assert process.poll() is None, (tmp_path / "first.log").read_text()
            time.sleep(0.5)
        [run_json] = list(results.glob("*/run.json"))
        run_dir = run_json.parent
        cluster.run_ids.append(run_dir.name)
        _wait_for_sandboxes(run_dir.name, 2)  # one on each node
        process.send_signal(signal.SIGINT)  # Ctrl-C
        code = process.wait(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    output = (tmp_path / "first.log").read_text()
    assert code == EXIT_INFRA, output
    assert f"continue with `trialbox run --resume {run_dir} --cluster ADDRESS`" in output, output
    assert _labelled(run_dir.name) == [], output
    card = _card(run_dir)
    interrupted = [r for r in card.scenarios if r.status is Status.NOT_RUN]
    assert interrupted and all("interrupted (Ctrl-C)" in (r.error or "") for r in interrupted)

    resume = [str(TRIALBOX), "run", "--resume", str(run_dir)]
    finished = subprocess.run(resume, env=env, capture_output=True, text=True, timeout=900)
    assert finished.returncode == EXIT_OK, finished.stdout + finished.stderr
    card = _card(run_dir)
    keys = [r.key for r in card.scenarios]
    assert len(keys) == 3 and len(set(keys)) == 3, keys
    assert all(r.status is not Status.NOT_RUN for r in card.scenarios)
    assert {j.node_name for j in _log(run_dir).jobs.values()} <= {"alpha", "beta"}
    assert _labelled(run_dir.name) == []
    for path in run_dir.rglob("*"):  # never the cluster address in a result file
        if path.is_file() and path.suffix in {".json", ".md", ".xml", ".html"}:
            assert cluster.address not in path.read_text(errors="replace"), path


def test_a_node_that_joins_mid_run_takes_work(cluster: LocalCluster, tmp_path: Path) -> None:
    settings = cluster.settings(tmp_path)
    outcome: dict[str, Scorecard] = {}
    with npu_nodes(cluster, ["gamma"]):
        runner = threading.Thread(target=lambda: outcome.update(card=asyncio.run(
            run_on_cluster(settings, cluster.address, {"device": "npu"}, print))))
        runner.start()
        _wait_for_sandboxes(settings.run_id, 1)  # gamma's one slot is taken
        with npu_nodes(cluster, ["delta"]):
            runner.join(timeout=1200)
            assert not runner.is_alive()
    card = outcome["card"]
    assert sorted(r.id for r in card.scenarios) == sorted({r.id for r in card.scenarios})
    assert len(card.scenarios) == 3
    assert all(r.status is not Status.NOT_RUN for r in card.scenarios)
    log = _log(settings.run_dir)
    assert [n.name for n in log.nodes] == ["gamma"]  # at the start
    placed = {k: j.node_name for k, j in log.jobs.items()}
    assert "delta" in placed.values(), json.dumps(placed)
    assert card.config.extra["cluster"]["selector"] == {"device": "npu"}


def test_a_cluster_run_with_only_the_selection_resolves_auto_on_the_controller(
        cluster: LocalCluster, tmp_path: Path) -> None:
    """A new user's first cluster run: no --simulator, --judge-provider, --device or --llm-url.
    `auto` is resolved once on the controller (as a local run would) and shipped resolved, so
    no node is asked to resolve `auto` (which ended every job INFRA_ERROR before)."""
    results = tmp_path / "results"
    command = [str(TRIALBOX), "run", str(SUITE / "scenarios"), "-s", "lighthouse_fuel",
               "--results", str(results)]
    keys = ("ANTHROPIC_API_KEY", "TRIALBOX_JUDGE", "TRIALBOX_JUDGE_URL", "TRIALBOX_JUDGE_MODEL",
            "TRIALBOX_SIMULATOR", "TRIALBOX_SIMULATOR_URL", "TRIALBOX_SIMULATOR_MODEL")
    env = {k: v for k, v in os.environ.items() if k not in keys} | QUIET_RAY_ENV | {
        "TRIALBOX_CLUSTER": cluster.address}
    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    output = finished.stdout + finished.stderr
    [run_dir] = list(results.iterdir())
    cluster.run_ids.append(run_dir.name)
    assert finished.returncode == EXIT_OK, output
    assert "Traceback" not in output, output
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["simulator_mode"] == "local" and saved["judge_provider"] == "none", saved
    [result] = _card(run_dir).scenarios
    assert result.status not in (Status.INFRA_ERROR, Status.ERRORED), (result.status, result.error)
    assert "ProviderConfigError" not in (result.error or "")
    log = ClusterLog.model_validate_json((run_dir / "cluster.json").read_text())
    assert log.jobs[result.key].node_name in {"alpha", "beta"}  # the node it ran on, on record
    assert result.node is not None and result.node.name == log.jobs[result.key].node_name
    assert result.node.served_model, result.node  # the node's own server, asked by the node
    assert "nodes differ" not in output  # one node ran it: nothing to say in the headline
    assert (run_dir / ".owner.lock").is_file() and not is_owned(run_dir)  # owned, then released
    assert _labelled(run_dir.name) == []
