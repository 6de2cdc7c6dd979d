"""`trialbox run --cluster ADDRESS [--on KEY=VALUE] [--per-node]`: a run whose jobs go to nodes.

Everything before the first job is the local run's (run/prepare.py): the selection, the judge and
its calibration, the results folder, the writer. Only the conversations come from the cluster.
`--per-node` runs the whole selection once on each matching node — one run folder per node,
its scorecard carrying that node's hardware and LLM server — and compares them as driver
builds (the first node is the reference).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from pydantic import BaseModel, Field

from runner.cluster._conversations import ClusterConversations, connect, matching_nodes
from runner.cluster._node import NodeConfig, load_node_config
from runner.cluster._placements import ClusterError, ClusterNode
from runner.cluster._remote import sweep_here
from runner.report import (
    DeviceMismatchError,
    RunConfig,
    RunWriter,
    Scorecard,
    driver_report,
    read_traces,
    render_driver_md,
    served_model_of,
)
from runner.run.decoding import decoding_label
from runner.run.engine import Engine
from runner.run.errors import InfraError, ModelChanged, UsageError, first_line
from runner.run.launch import open_writer, run_to_end
from runner.run.lock import is_owned, owning
from runner.run.prepare import (
    REJECTED_WARNING,
    agent_registry,
    check_results_root,
    prepare_judge,
    resolve_providers,
    selected_scenarios,
)
from runner.run.resume import resume_settings
from runner.run.settings import RESUME_MAY_CHANGE, RunSettings, new_run_id
from runner.system.bounded_read import SCORECARD_BYTES, SETTINGS_BYTES, read_bounded_text
from runner.system.writes import WriteRefused, atomic_write

MAX_CONCURRENCY = 16  # RunSettings' own bound: run.json records at most this
SWEEP_TIMEOUT_S = 120.0
#: In every run folder of one `--per-node` run: the node runs planned together.
PER_NODE_FILE = "per-node.json"


def engine_admits(planned_jobs: int) -> int:
    """How many jobs the engine of a cluster run lets wait for a slot at once: all of them.
    The bound is the cluster's own admission (ClusterConversations sends a job only to a free
    slot of the matching nodes as they are now), so every slot is used however many there
    are — past RunSettings' 16, and on nodes that join mid-run."""
    return max(1, planned_jobs)


async def run_on_cluster(settings: RunSettings, address: str, on: dict[str, str],
                         say: Callable[[str], None], resume: bool = False,
                         node: ClusterNode | None = None,
                         extra: dict[str, Any] | None = None) -> Scorecard:
    """The local run's steps with ClusterConversations; raises UsageError/InfraError early."""
    if resume and is_owned(settings.run_dir):
        with owning(settings.run_dir):  # raises the one-line refusal naming the live owner
            pass
    if resume and node is None and (settings.run_dir / PER_NODE_FILE).is_file():
        raise UsageError(f"--resume {settings.run_dir}: this is one node's run of a --per-node "
                         "run — resume it with --per-node (every node's run continues)")
    scenarios, manifest, rejected = selected_scenarios(settings, say)
    check_results_root(settings)
    agents = agent_registry(settings, scenarios)
    # Resolved here, once, before the settings are shipped: `auto` means what it means on
    # this machine (as a local run), and every node gets the same concrete choice.
    resolve_providers(settings)
    # One owner per run folder, as a local run: a second run or resume of a live cluster run
    # stops here, before its sweep could remove the live run's sandboxes on the nodes.
    with owning(settings.run_dir):
        return await _run_owned(settings, address, on, say, resume, node, extra or {},
                                scenarios, manifest, rejected, agents)


async def _run_owned(settings: RunSettings, address: str, on: dict[str, str],
                     say: Callable[[str], None], resume: bool, node: ClusterNode | None,
                     extra: dict[str, Any], scenarios: list[Any], manifest: Any,
                     rejected: list[str], agents: Any) -> Scorecard:
    conversations = ClusterConversations(address, settings, on, manifest=manifest, agents=agents,
                                         node_id=node.node_id if node else None, say=say,
                                         resume=resume)
    try:
        nodes = conversations.start()
    except ClusterError as exc:
        raise InfraError(str(exc)) from None
    # Recorded: the cluster's slots when the run started (run.json keeps at most RunSettings'
    # bound, the scorecard the slots themselves).
    slots = conversations.capacity()
    settings.concurrency = min(MAX_CONCURRENCY, slots)
    say(f"run {settings.run_id}: {len(scenarios)} scenario(s) × {settings.trials} trial(s) on "
        f"{len(nodes)} node(s) ({', '.join(f'{n.name}:{n.device}×{n.slots}' for n in nodes)}), "
        f"concurrency {slots}")
    judge, _ = await prepare_judge(settings, say)
    described = await _describe_nodes(nodes, say, strict=node is not None)
    cluster_extra = {"cluster": {"nodes": [n.model_dump(mode="json") for n in nodes],
                                 "selector": on,
                                 "served_models": {c.name: served_model_of(identity)
                                                   for c, identity in described}}}
    if resume:
        sweep_nodes(settings.run_id, nodes, say, "left over from the interrupted run")
    writer = open_writer(settings, scenarios, resume, {**extra, **cluster_extra,
                                                       "agents": agents.describe(),
                                                       "decoding": decoding_label(settings)})
    if resume:
        check_served_models(settings, writer, described, say)
    elif described:
        # The scorecard describes the nodes that ran it, not the controller (--per-node: its
        # one node, so the driver-build comparison compares the nodes).
        record_nodes(writer.config, described, slots)
        writer.write()
    for problem in rejected:
        if REJECTED_WARNING + problem not in writer.warnings:
            writer.warn(REJECTED_WARNING + problem)
    say(f"results: {settings.run_dir}")
    # No controller-side LLM health probe: each node checks its own server before each job.
    # model_copy does not re-validate, so RunSettings' bound does not apply to this copy.
    admits = engine_admits(len(scenarios) * settings.trials)
    engine = Engine(settings.model_copy(update={"concurrency": admits}), scenarios,
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


def record_nodes(config: RunConfig, described: list[tuple[NodeConfig, dict[str, Any]]],
                 slots: int) -> None:
    """The run's hardware, device and LLM server as the nodes have them: each one value where
    the nodes agree; where they differ, every node's (hardware and LLM server by node name,
    device and served model joined with " + "), so nothing reads as one machine's."""
    configs = [c for c, _ in described]
    models = sorted({served_model_of(identity) or "unknown" for _, identity in described})
    devices = sorted({c.device for c in configs})
    if len({c.fingerprint_id for c in configs}) == 1:
        config.hardware = configs[0].fingerprint.model_dump(mode="json")
    else:
        config.hardware = {"per_node": {c.name: c.fingerprint.model_dump(mode="json") for c in configs}}
    if len(models) == 1:
        config.llm_server = described[0][1]
        config.served_model = served_model_of(described[0][1])
    else:
        config.llm_server = {"per_node": {c.name: identity for c, identity in described}}
        config.served_model = " + ".join(models)
    config.device = " + ".join(devices)
    config.concurrency = slots


def check_served_models(settings: RunSettings, writer: RunWriter,
                        described: list[tuple[NodeConfig, dict[str, Any]]],
                        say: Callable[[str], None]) -> None:
    """A resumed cluster run must be answered by the model(s) it started with: ModelChanged
    (exit 2) naming each node that now serves another, unless --allow-model-change (then the
    scorecard says so). What it started with: the models its rows ran on and its nodes served
    at the start; a node whose server does not say is left to its own health probe."""
    changes = model_changes(writer, described)
    if not changes:
        return
    change = "; ".join(changes)
    if not settings.allow_model_change:
        raise ModelChanged(f"--resume {settings.run_dir}: {change} — serve that model again on "
                           "those nodes, or pass --allow-model-change to mix them in one scorecard")
    say(f"warning: {change} (--allow-model-change)")
    writer.warn(f"resumed with another model: {change}")


def model_changes(writer: RunWriter, described: list[tuple[NodeConfig, dict[str, Any]]]) -> list[str]:
    """One line per node serving a model the run did not start with (empty: none)."""
    started = {r.node.served_model for r in writer.results if r.node and r.node.served_model}
    cluster = writer.config.extra.get("cluster", {})
    started |= {m for m in (cluster.get("served_models") or {}).values() if m}
    if not started and writer.config.served_model:
        started = {writer.config.served_model}
    if not started:
        return []
    was = " / ".join(sorted(started))
    return [f"node {c.name} now serves {now}; this run started with {was}"
            for c, identity in described
            if (now := served_model_of(identity)) is not None and now not in started]


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


class PerNodePlan(BaseModel):
    """per-node.json, written into every run folder of one `--per-node` run before the first
    starts: which node runs which folder, so resuming any of them resumes them all."""

    selector: dict[str, str] = Field(default_factory=dict, description="the --on selection")
    runs: list[NodeRun] = Field(description="one run per matching node, in cluster order; the first is the reference")


class PerNodeResult(BaseModel):
    """What `--per-node` wrote: one run per node and the comparisons against the first."""

    runs: list[NodeRun] = Field(description="one run per matching node, in cluster order")
    comparisons: list[Path] = Field(description="driver-build reports (Markdown), first node vs each other")
    left: list[NodeRun] = Field(default_factory=list, description=(
        "--resume: planned node runs whose node is not in the cluster now (left as they were)"))


async def run_per_node(settings: RunSettings, address: str, on: dict[str, str],
                       say: Callable[[str], None], resume: bool = False) -> PerNodeResult:
    """The whole selection once on every matching node, then the driver-build comparison.
    With `resume` (settings from one of its folders) every node's run continues where it
    stopped, on the node of the same name; one never started starts under its planned id."""
    try:
        connect(address)
    except ClusterError as exc:
        raise InfraError(str(exc)) from None
    if resume:
        plan = read_plan(settings.run_dir)
        on = plan.selector
    else:
        nodes = matching_nodes(on)
        if not nodes:
            raise InfraError("no node matches --on " + " ".join(f"{k}={v}" for k, v in on.items())
                             + " — join one with `trialbox node join ADDRESS`")
        plan = PerNodePlan(selector=on, runs=[NodeRun(node=n, run_id=new_run_id()) for n in nodes])
        for planned in plan.runs:
            folder = settings.results_root / planned.run_id
            folder.mkdir(parents=True, exist_ok=True)
            (folder / PER_NODE_FILE).write_text(plan.model_dump_json(indent=2))
        # An interrupted --per-node run is resumed from its first folder (the Ctrl-C line names it).
        settings.run_id = plan.runs[0].run_id
    now = {n.name: n for n in matching_nodes(on)}
    runs: list[NodeRun] = []
    left: list[NodeRun] = []
    for planned in plan.runs:
        node = now.get(planned.node.name)
        folder = settings.results_root / planned.run_id
        if node is None:
            say(f"--per-node: node {planned.node.name} is not in the cluster now: its run {folder} "
                "is left as it is — join it again, then resume")
            left.append(planned)
            continue
        continues = resume and (folder / "run.json").is_file()
        mine = resume_settings(folder) if continues else settings.model_copy(
            deep=True, update={"run_id": planned.run_id})
        for name in (*RESUME_MAY_CHANGE, "allow_model_change", "allow_device_fallback"):
            setattr(mine, name, getattr(settings, name))  # what this invocation may change
        say(f"--per-node: node {node.name} ({node.device}, driver {node.driver})"
            + (f", resuming {folder}" if continues else ""))
        await run_on_cluster(mine, address, on, say, resume=continues, node=node,
                             extra={"node": node.model_dump(mode="json")})
        runs.append(NodeRun(node=node, run_id=planned.run_id))
    return PerNodeResult(runs=runs, comparisons=_compare_nodes(settings, runs, say), left=left)


def read_plan(run_dir: Path) -> PerNodePlan:
    """The plan of the --per-node run `run_dir` belongs to; UsageError when it is none's."""
    path = run_dir / PER_NODE_FILE
    if not path.is_file():
        raise UsageError(f"--resume {run_dir} --per-node: not a folder of a --per-node run (no "
                         f"{PER_NODE_FILE}) — resume it without --per-node")
    try:
        return PerNodePlan.model_validate_json(read_bounded_text(path, SETTINGS_BYTES))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a readable --per-node plan ({first_line(exc)}) "
                         "— start a new --per-node run") from None


def _compare_nodes(settings: RunSettings, runs: list[NodeRun], say: Callable[[str], None]) -> list[Path]:
    """The driver-build comparison of the first node's run against each other's."""
    reports: list[Path] = []
    if not runs:
        return reports
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
        try:  # each whole or not at all; a folder or FIFO by that name is refused, left as it is
            atomic_write(path, render_driver_md(report))
            atomic_write(path.with_suffix(".json"), report.model_dump_json(indent=2))
        except WriteRefused as exc:  # the runs are kept; only this report is not written
            say(f"no driver-build comparison {runs[0].node.name} → {other.node.name}: {exc}")
            continue
        say(f"driver-build comparison {runs[0].node.name} → {other.node.name}: {path}")
        reports.append(path)
    return reports


#: A cluster coroutine to its end, as a local run ends (SIGTERM treated like Ctrl-C: unfinished
#: jobs are cancelled on their nodes, recorded NOT_RUN, KeyboardInterrupt raised).
run_blocking = run_to_end


def _card(run_dir: Path) -> Scorecard:
    return Scorecard.model_validate_json(read_bounded_text(run_dir / "scorecard.json", SCORECARD_BYTES))


@ray.remote(num_cpus=0)
def _node_config() -> tuple[str, dict[str, Any]]:
    """Run on the node: its config and its LLM server's identity (only the node can reach it)."""
    from runner.run.llm_server import llm_identity

    config = load_node_config()
    return config.model_dump_json(), llm_identity(config.llm_url)


async def _describe_nodes(nodes: list[ClusterNode], say: Callable[[str], None], strict: bool
                          ) -> list[tuple[NodeConfig, dict[str, Any]]]:
    """Every node's config and LLM identity. `strict` (--per-node, whose run is its node's):
    a node that cannot describe itself stops the run; otherwise it is left out of the record
    (its jobs say why it cannot run them)."""
    described = []
    for answer in await asyncio.gather(*(_describe_node(n) for n in nodes), return_exceptions=True):
        if isinstance(answer, InfraError) and not strict:
            say(f"warning: {answer}")
        elif isinstance(answer, BaseException):
            raise answer
        else:
            described.append(answer)
    return described


async def _describe_node(node: ClusterNode) -> tuple[NodeConfig, dict[str, Any]]:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    strategy = NodeAffinitySchedulingStrategy(node.node_id, soft=False)
    try:
        text, identity = await _node_config.options(scheduling_strategy=strategy).remote()
    except ray.exceptions.RayError as exc:
        raise InfraError(f"node {node.name} could not describe itself: {exc}") from None
    return NodeConfig.model_validate_json(text), identity
