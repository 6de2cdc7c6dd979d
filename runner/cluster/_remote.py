"""What runs on a node: one job in this node's Docker sandbox, against this node's LLM server.

The task rebuilds a `LiveConversations` from the controller's settings with the node's own
parts swapped in (LLM container and URL, device, the shipped corpus unpacked locally), runs the
job exactly as a local run would, and sends back a `JobReport` as JSON plus the artifacts'
bytes. JSON rather than pickled objects: a node on another trialbox version fails with a
validation message instead of a confusing unpickling error. Judging stays on the controller.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from runner.cluster._node import NodeConfig, NodeError, load_node_config
from runner.cluster._ship import Packed, unpack
from runner.records.status import Status
from runner.records.transcript import Transcript
from runner.report import NodeIdentity, served_model_of

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from runner.run.jobs import Job
    from runner.sandbox import Sandbox, SandboxBackend


class JobReport(BaseModel):
    """One job's result as it crosses from the node to the controller."""

    node_id: str = Field(description="Ray node id the job ran on")
    node_name: str = Field(description="the node's name (its `node join --name`, or host name)")
    device: str = Field(description="the node's stack device")
    fingerprint_id: str = Field(description="the node's hardware fingerprint label")
    driver: str = Field(description="the node's driver build label")
    attempt: int = Field(description="1 = first try, 2 = the retry after a node was lost")
    transcript: Transcript | None = Field(default=None, description="the conversation, when there was one")
    infra: Status | None = Field(default=None, description="infrastructure status, None when the agent answered")
    error: str | None = Field(default=None, description="why the job has an infrastructure status")
    warning: str | None = Field(default=None, description="a problem that did not spoil the result")
    after: str | None = Field(default=None, description=(
        "what went wrong after the conversation finished (collecting, removing the sandbox)"))
    converse_s: float = Field(description="seconds the node spent on the job (sandbox + conversation)")
    node: NodeIdentity | None = Field(default=None, description=(
        "the node with its hardware and served model, for the scenario's row (None: the job "
        "never reached a node that could describe itself)"))


@dataclass
class Shipment:
    """What every job needs from the controller besides its scenario (Ray object refs resolve
    to these on the node)."""

    settings_json: str
    corpus: Packed
    agent_dirs: list[Packed]
    manifest: Any  # runner.scenarios.Manifest | None
    agents: Any  # runner.conversation.agents.AgentRegistry | None


@dataclass
class _Attempted:
    """A retry opens its sandbox under other names: the lost node's containers may still exist
    on a shared Docker engine (a test cluster), and names must not collide."""

    inner: SandboxBackend
    suffix: str

    def open(self, scenario_id: str, *, memory: bool = False) -> AbstractAsyncContextManager[Sandbox]:
        return self.inner.open(f"{scenario_id}{self.suffix}", memory=memory)


def run_job_here(job: Job, shipment: Shipment, attempt: int, node_id: str) -> tuple[str, dict[str, bytes]]:
    """The body of the Ray task: returns (JobReport JSON, artifact name → bytes)."""
    started = time.perf_counter()
    node = load_node_config()
    scratch = Path(tempfile.mkdtemp(prefix="trialbox-job-"))
    try:
        report, artifacts = asyncio.run(_converse(job, shipment, node, attempt, scratch))
    except KeyboardInterrupt:
        # ray.cancel (the controller's Ctrl-C) raises this in the middle of the event loop, where
        # the sandbox's own teardown may not get to run. Only a Ctrl-C cancels, so every job of
        # the run is going: sweep the run's objects on this node before the task ends — the
        # controller waits for that, and ends with the node clean.
        sweep_here(json.loads(shipment.settings_json)["run_id"])
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report = report.model_copy(update={"node_id": node_id, "node": describe_node(node, node_id),
                                       "converse_s": round(time.perf_counter() - started, 3)})
    return report.model_dump_json(), artifacts


def describe_node(node: NodeConfig, node_id: str) -> NodeIdentity:
    """This node as a scenario row records it. The served model is asked when the job ends:
    the model that answered it, even if the node's server was changed since the run began."""
    from runner.run.llm_server import llm_identity

    return NodeIdentity(name=node.name, node_id=node_id, host=socket.gethostname(),
                        device=node.device, fingerprint_id=node.fingerprint_id, driver=node.driver,
                        hardware=node.fingerprint.model_dump(mode="json"),
                        served_model=served_model_of(llm_identity(node.llm_url)))


async def _converse(job: Job, shipment: Shipment, node: NodeConfig, attempt: int,
                    scratch: Path) -> tuple[JobReport, dict[str, bytes]]:
    from runner.run.backend import make_backend
    from runner.run.conversations import LiveConversations
    from runner.run.decoding import with_decoding
    from runner.run.errors import InfraError
    from runner.run.llm_server import SESSION_DEVICE, llm_health_probe, served_capabilities
    from runner.run.settings import Backend, RunSettings

    controller = RunSettings.model_validate_json(shipment.settings_json)
    base = JobReport(node_id="", node_name=node.name, device=node.device,
                     fingerprint_id=node.fingerprint_id, driver=node.driver, attempt=attempt,
                     converse_s=0.0)
    problem = await llm_health_probe(node.llm_url)
    if problem is not None:
        # No node name in the error: the engine stops after three identical errors, and the
        # same cause on two nodes must compare equal (the controller names the node beside it).
        return base.model_copy(update={"infra": Status.INFRA_ERROR, "error": (
            f"the node's LLM server stopped answering ({problem}); restart it on that node "
            "with `trialbox up`")}), {}
    settings = controller.model_copy(update={
        "llm_url": node.llm_url,
        "llm_container": node.llm_container,
        "device": SESSION_DEVICE[node.device],
        "backend": Backend.DOCKER,
        "target_url": None,
        "results_root": scratch,
        "corpus_root": unpack(shipment.corpus, node.cache_dir),
        "agent_dirs": [unpack(packed, node.cache_dir) for packed in shipment.agent_dirs],
        "simulator_url": _on_node(controller.simulator_url, controller.llm_url, node.llm_url),
    })
    try:
        # As on a local run: --repeatable-decoding leases greedy decoding for each sandbox at
        # this node's front door (a cluster run that sampled instead would compare unlike runs).
        backend = with_decoding(settings, make_backend(settings))
    except InfraError as exc:
        return base.model_copy(update={"infra": Status.INFRA_ERROR, "error": str(exc)}), {}
    if attempt > 1:
        backend = _Attempted(backend, f"-a{attempt}")
    simulator = _simulator(settings, node)
    conversations = LiveConversations(settings, backend, simulator, manifest=shipment.manifest,
                                      capabilities=served_capabilities(node.llm_url),
                                      agents=shipment.agents)
    outcome = await conversations.converse(job)
    after = [outcome.after] if outcome.after else []
    if outcome.leave is not None:
        # A local engine leaves the sandbox after recording the row; here the row is the
        # controller's, so the node collects and removes it now, before sending the artifacts.
        left = await outcome.leave()
        after += left.problems
        setup = outcome.transcript.setup if outcome.transcript is not None else None
        if outcome.transcript is not None and setup is not None:
            outcome.transcript.setup = setup.model_copy(update={"teardown_s": left.seconds})
    folder = settings.run_dir / "artifacts" / job.key
    artifacts = {p.name: p.read_bytes() for p in sorted(folder.glob("*")) if p.is_file()} if folder.is_dir() else {}
    return base.model_copy(update={"transcript": outcome.transcript, "infra": outcome.infra,
                                   "error": outcome.error, "warning": outcome.warning,
                                   "after": "; ".join(after) or None}), artifacts


def sweep_here(run_id: str) -> tuple[int, list[str]]:
    """Remove what run `run_id` left on this node's Docker engine (by its label, as a local run
    does at its end): (objects removed, what could not be)."""
    from runner.run.cleanup import cleanup

    report = cleanup(run_id)
    problems = list(report.failures)
    try:
        node = load_node_config()
    except NodeError:
        return report.removed, problems  # a stray Ray worker: no LLM container of ours here
    try:
        import docker

        from runner.sandbox.docker import repair_llm_networks

        # A stopped LLM container keeps references to removed networks: `docker start` would
        # fail on them.
        repair_llm_networks(docker.from_env(), node.llm_container)
    except Exception as exc:  # noqa: BLE001 — a repair failure must not hide the sweep's result
        problems.append(f"LLM container {node.llm_container}: {exc}")
    return report.removed, problems


def _on_node(url: str | None, controller_llm: str, node_llm: str) -> str | None:
    """A simulator URL that pointed at the controller's LLM server points at the node's."""
    if url and url.startswith(controller_llm.rstrip("/")):
        return node_llm + url[len(controller_llm.rstrip("/")):]
    return url


def _simulator(settings: Any, node: NodeConfig) -> Any:
    from runner.conversation.simulate import make_simulator
    from runner.judge import from_env_and_flags

    choices = from_env_and_flags(judge="none", simulator=settings.simulator_mode,
                                 simulator_model=settings.simulator_model,
                                 simulator_url=settings.simulator_url,
                                 llm_url=f"{node.llm_url}/api/v1")
    return make_simulator(choices.simulator)
