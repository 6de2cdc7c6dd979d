"""`trialbox run --cluster ADDRESS [--on KEY=VALUE] [--per-node]`: a run whose jobs go to nodes.

Everything before the first job is the local run's (launch.py): the selection, the judge and
its calibration, the results folder, the writer. Only the conversations come from the cluster.
`--per-node` runs the whole selection once on each matching node — one run folder per node,
its scorecard carrying that node's hardware and LLM server — and compares them as driver
builds (the first node is the reference).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import ray
from pydantic import BaseModel, Field

from runner.cluster._conversations import (
    ClusterConversations,
    ClusterError,
    ClusterNode,
    connect,
    matching_nodes,
)
from runner.cluster._node import NodeConfig, load_node_config
from runner.cluster._remote import sweep_here
from runner.engine import Engine
from runner.errors import InfraError
from runner.launch import (
    REJECTED_WARNING,
    agent_registry,
    check_results_root,
    open_writer,
    prepare_judge,
    resolve_providers,
    selected_scenarios,
)
from runner.report import DeviceMismatchError, Scorecard, driver_report, render_driver_md
from runner.report._load import read_traces
from runner.settings import RunSettings, new_run_id

T = TypeVar("T")
MAX_CONCURRENCY = 16  # RunSettings' own bound
SWEEP_TIMEOUT_S = 120.0


async def run_on_cluster(settings: RunSettings, address: str, on: dict[str, str],
                         say: Callable[[str], None], resume: bool = False,
                         node: ClusterNode | None = None,
                         extra: dict[str, Any] | None = None) -> Scorecard:
    """The local run's steps with ClusterConversations; raises UsageError/InfraError early."""
    scenarios, manifest, rejected = selected_scenarios(settings, say)
    check_results_root(settings)
    agents = agent_registry(settings, scenarios)
    # Resolved here, once, before the settings are shipped: `auto` means what it means on
    # this machine (as a local run), and every node gets the same concrete choice.
    resolve_providers(settings)
    conversations = ClusterConversations(address, settings, on, manifest=manifest, agents=agents,
                                         node_id=node.node_id if node else None, say=say,
                                         resume=resume)
    try:
        nodes = conversations.start()
    except ClusterError as exc:
        raise InfraError(str(exc)) from None
    # Recorded: the cluster's slots when the run started. The engine itself admits up to the
    # bound; ClusterConversations sends a job only when a node has a free slot *now*, so a node
    # that joins mid-run takes work (runner/cluster/_conversations.py).
    slots = conversations.capacity()
    settings.concurrency = min(MAX_CONCURRENCY, slots)  # run.json's bound; the engine's is below
    say(f"run {settings.run_id}: {len(scenarios)} scenario(s) × {settings.trials} trial(s) on "
        f"{len(nodes)} node(s) ({', '.join(f'{n.name}:{n.device}×{n.slots}' for n in nodes)}), "
        f"concurrency {slots}")
    judge, _ = await prepare_judge(settings, say)
    described = await _describe_node(node) if node else None
    cluster_extra = {"cluster": {"nodes": [n.model_dump(mode="json") for n in nodes],
                                 "selector": on}}
    if resume:
        sweep_nodes(settings.run_id, nodes, say, "left over from the interrupted run")
    writer = open_writer(settings, scenarios, resume, {**(extra or {}), **cluster_extra,
                                            "agents": agents.describe()})
    if described is not None and not resume:
        # --per-node: this run's scorecard describes the node it ran on, not the controller,
        # so the driver-build comparison compares the nodes.
        config, identity = described
        writer.config.hardware = config.fingerprint.model_dump(mode="json")
        writer.config.device = config.device
        writer.config.llm_server = identity
        writer.write()
    for problem in rejected:
        if REJECTED_WARNING + problem not in writer.warnings:
            writer.warn(REJECTED_WARNING + problem)
    say(f"results: {settings.run_dir}")
    # No controller-side LLM health probe: each node checks its own server before each job.
    # Admits as many jobs as the cluster has slots (past run.json's bound of 16: a cluster of
    # 5 nodes × 8 slots runs 40 at once), and at least 16 so nodes that join mid-run get work.
    # model_copy does not re-validate, so the bound does not apply to this copy.
    engine = Engine(settings.model_copy(update={"concurrency": max(MAX_CONCURRENCY, slots)}), scenarios,
                    conversations, judge, writer, say=say, llm_health=None)
    # Jobs wait for a node's free slot after the engine let them start: they ask it first.
    conversations.stopped = lambda: engine.stopping
    try:
        return await engine.run()
    finally:
        # As a local run's end: whatever a cancelled, killed or crashed sandbox left behind on
        # a node goes by the run's label (nodes lost meanwhile are skipped).
        try:
            alive = conversations.nodes_now()
        except ray.exceptions.RayError:
            alive = nodes
        sweep_nodes(settings.run_id, alive or nodes, say, "left behind by this run")


def sweep_nodes(run_id: str, nodes: list[ClusterNode], say: Callable[[str], None], why: str) -> None:
    """Remove run `run_id`'s Docker objects on every node (by label); never raises: a sweep must
    not hide the run's own outcome. One node after the other: nodes that share a Docker engine
    (a test cluster, two nodes on one box) would otherwise race to remove the same objects."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    for node in nodes:
        strategy = NodeAffinitySchedulingStrategy(node.node_id, soft=False)
        try:
            count, problems = ray.get(_sweep_task.options(scheduling_strategy=strategy).remote(run_id),
                                      timeout=SWEEP_TIMEOUT_S)
        except (ray.exceptions.RayError, TimeoutError) as exc:
            text = str(exc).strip()
            say(f"warning: could not sweep run {run_id}'s Docker objects on node {node.name}: "
                f"{text.splitlines()[0] if text else type(exc).__name__}")
            continue
        for problem in problems:
            say(f"warning: node {node.name}: could not remove {problem}")
        if count:
            say(f"removed {count} Docker object(s) {why} on node {node.name} "
                f"(label trialbox.run={run_id})")


@ray.remote(num_cpus=0, max_retries=0)
def _sweep_task(run_id: str) -> tuple[int, list[str]]:
    return sweep_here(run_id)


class NodeRun(BaseModel):
    node: ClusterNode = Field(description="the node the run used")
    run_id: str = Field(description="its run folder under the results root")


class PerNodeResult(BaseModel):
    """What `--per-node` wrote: one run per node and the comparisons against the first."""

    runs: list[NodeRun] = Field(description="one run per matching node, in cluster order")
    comparisons: list[Path] = Field(description="driver-build reports (Markdown), first node vs each other")


async def run_per_node(settings: RunSettings, address: str, on: dict[str, str],
                       say: Callable[[str], None]) -> PerNodeResult:
    """The whole selection once on every matching node, then the driver-build comparison."""
    try:
        connect(address)
    except ClusterError as exc:
        raise InfraError(str(exc)) from None
    nodes = matching_nodes(on)
    if not nodes:
        raise InfraError("no node matches --on " + " ".join(f"{k}={v}" for k, v in on.items())
                         + " — join one with `trialbox node join ADDRESS`")
    runs: list[NodeRun] = []
    for node in nodes:
        mine = settings.model_copy(deep=True, update={"run_id": new_run_id()})
        say(f"--per-node: node {node.name} ({node.device}, driver {node.driver})")
        await run_on_cluster(mine, address, on, say, node=node,
                             extra={"node": node.model_dump(mode="json")})
        runs.append(NodeRun(node=node, run_id=mine.run_id))
    reports = []
    reference = settings.results_root / runs[0].run_id
    for other in runs[1:]:
        folder = settings.results_root / other.run_id
        card_a, card_b = _card(reference), _card(folder)
        try:  # --allow-device-fallback is the user's word that a fallback run still compares
            report = driver_report(card_a, card_b, read_traces(reference), read_traces(folder),
                                   allow_device_mismatch=settings.allow_device_fallback)
        except DeviceMismatchError as exc:  # the runs are kept; only the comparison is refused
            say(f"no driver-build comparison {runs[0].node.name} → {other.node.name}: {exc}")
            continue
        path = folder / f"driver-vs-{runs[0].node.name}.md"
        path.write_text(render_driver_md(report))
        (folder / f"driver-vs-{runs[0].node.name}.json").write_text(report.model_dump_json(indent=2))
        say(f"driver-build comparison {runs[0].node.name} → {other.node.name}: {path}")
        reports.append(path)
    return PerNodeResult(runs=runs, comparisons=reports)


def run_blocking(work: Coroutine[Any, Any, T]) -> T:
    """Run a cluster coroutine to its end; SIGTERM is treated like Ctrl-C (as launch.run_blocking:
    unfinished jobs are cancelled on their nodes, recorded NOT_RUN, KeyboardInterrupt raised)."""
    async def main() -> T:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
        try:
            return await work
        except asyncio.CancelledError:
            raise KeyboardInterrupt from None
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    return asyncio.run(main())


def _card(run_dir: Path) -> Scorecard:
    return Scorecard.model_validate_json((run_dir / "scorecard.json").read_text())


@ray.remote(num_cpus=0)
def _node_config() -> tuple[str, dict[str, Any]]:
    """Run on the node: its config and its LLM server's identity (only the node can reach it)."""
    from runner.launch import llm_identity

    config = load_node_config()
    return config.model_dump_json(), llm_identity(config.llm_url)


async def _describe_node(node: ClusterNode) -> tuple[NodeConfig, dict[str, Any]]:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    strategy = NodeAffinitySchedulingStrategy(node.node_id, soft=False)
    try:
        text, identity = await _node_config.options(scheduling_strategy=strategy).remote()
    except ray.exceptions.RayError as exc:
        raise InfraError(f"node {node.name} could not describe itself: {exc}") from None
    return NodeConfig.model_validate_json(text), identity
