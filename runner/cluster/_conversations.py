"""`ClusterConversations`: each job a Ray task on a node with a free sandbox slot.

The engine is unchanged: it plans, judges, records and stops exactly as in a local run; only
the conversation comes from a node. Ray places each task by resources — one ``trialbox`` slot,
plus ``device:<d>`` when ``--on device=d`` asks — and by labels for ``--on fingerprint=…`` or
``--on driver=…``. A node lost mid-job (the task's worker or whole node died) gets the job
retried once on another node; a second loss is INFRA_ERROR. Each job returns once, so the
engine records it once. Where every job ran goes to ``cluster.json`` in the run folder (never
the cluster address: it may carry a token).

Admission is the cluster's, not a fixed number: a job is sent only when the matching nodes, as
they are *now*, have a free slot — so a node that joins mid-run takes the next job, and a job
never waits in Ray's queue past a stop (the three-identical-errors rule) or a Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import ray
except ModuleNotFoundError as missing:  # the optional extra: say how to get it
    raise ModuleNotFoundError("`trialbox run --cluster` needs Ray, the optional extra: "
                              "pip install 'trialbox[cluster]'", name="ray") from missing
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from runner.cluster._node import (
    DEVICE_LABEL,
    DRIVER_LABEL,
    FINGERPRINT_LABEL,
    NODE_LABEL,
    QUIET_RAY_ENV,
    SLOT_RESOURCE,
)
from runner.cluster._placements import (
    SELECTORS,
    Attempt,
    ClusterError,
    ClusterLog,
    ClusterNode,
    Placement,
)
from runner.cluster._remote import JobReport, Shipment, run_job_here
from runner.cluster._ship import pack
from runner.records.status import Status
from runner.records.transcript import Transcript
from runner.run.errors import first_line
from runner.run.jobs import Job, Outcome
from runner.run.settings import RunSettings
from runner.system.bounded_read import SCORECARD_BYTES, read_bounded_text

# How often a job waiting for a slot looks at the cluster again (a node may have joined).
CAPACITY_POLL_S = 2.0
# How long a cancelled job waits for its node to tear the sandbox down before the run ends.
CANCEL_GRACE_S = 60.0
# A task that ends with one of these lost its node or worker: the job itself never failed.
LOST = (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
        ray.exceptions.LocalRayletDiedError, ray.exceptions.ObjectLostError,
        ray.exceptions.OwnerDiedError)


@ray.remote(num_cpus=0)
class _StartLedger:
    """Which node each attempt started on, and which attempts have ended there: a lost task
    cannot say so itself, and a cancelled one resolves before its node has cleaned up."""

    def __init__(self) -> None:
        self.started: dict[str, str] = {}
        self.ended: set[str] = set()

    def start(self, key: str, node_id: str) -> None:
        self.started[key] = node_id

    def end(self, key: str) -> None:
        self.ended.add(key)

    def where(self, key: str) -> str | None:
        return self.started.get(key)

    def running(self, key: str) -> bool:
        """Started and not ended (still busy on its node)."""
        return key in self.started and key not in self.ended


@ray.remote(num_cpus=0, max_retries=0)
def _job_task(job: Job, shipment: Shipment, attempt: int, ledger: Any) -> tuple[str, dict[str, bytes]]:
    node_id = ray.get_runtime_context().get_node_id()
    key = f"{job.key}#{attempt}"
    ray.get(ledger.start.remote(key, node_id))
    try:
        return run_job_here(job, shipment, attempt, node_id)
    finally:
        with contextlib.suppress(Exception):  # the ledger is only for the controller's waiting
            ray.get(ledger.end.remote(key), timeout=10)


def connect(address: str) -> None:
    """Join the cluster as its driver (once per process), with Ray's phoning home off."""
    os.environ.update(QUIET_RAY_ENV)
    if not ray.is_initialized():
        try:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise ClusterError(f"cannot reach the Ray cluster at {address} ({exc}) — start a head "
                               "with `ray start --head` and pass its address to --cluster") from None


def matching_nodes(on: dict[str, str]) -> list[ClusterNode]:
    """Alive nodes with sandbox slots whose labels match every --on selector."""
    found = []
    entries: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]  # ray ships it untyped
    for entry in entries:
        resources, labels = entry.get("Resources", {}), entry.get("Labels", {}) or {}
        if not entry.get("Alive") or resources.get(SLOT_RESOURCE, 0) < 1:
            continue
        if any(labels.get(SELECTORS[k]) != v for k, v in on.items()):
            continue
        found.append(ClusterNode(node_id=entry["NodeID"], name=labels.get(NODE_LABEL, entry["NodeID"][:12]),
                                 device=labels.get(DEVICE_LABEL, "?"),
                                 slots=int(resources.get(SLOT_RESOURCE, 0)),
                                 fingerprint_id=labels.get(FINGERPRINT_LABEL, "?"),
                                 driver=labels.get(DRIVER_LABEL, "?")))
    return found


@dataclass
class ClusterConversations:
    """The `ConversationSource` of `trialbox run --cluster`: jobs run on the cluster's nodes."""

    address: str
    settings: RunSettings
    on: dict[str, str] = field(default_factory=dict)
    manifest: Any = None  # runner.scenarios.Manifest | None, for the node's LiveConversations
    agents: Any = None  # runner.conversation.agents.AgentRegistry | None
    node_id: str | None = None  # --per-node: every job on this one node
    say: Callable[[str], None] = print
    live: bool = True
    # Why the engine stopped starting jobs (None: it did not). A job that gets a slot after a
    # stop is not sent: it is NOT_RUN with that reason, as the engine records it locally.
    stopped: Callable[[], str | None] = lambda: None
    resume: bool = False  # keep the placements the interrupted run recorded in cluster.json
    log: ClusterLog = field(default_factory=ClusterLog)
    _shipment: Any = None
    _ledger: Any = None
    _in_flight: int = 0
    _capacity: int = 0
    _polled_at: float = 0.0
    _admission: asyncio.Lock = field(default_factory=asyncio.Lock)
    _freed: asyncio.Event = field(default_factory=asyncio.Event)

    def start(self) -> list[ClusterNode]:
        """Connect, check some node can take the jobs, ship the corpus; returns the nodes."""
        connect(self.address)
        nodes = self.nodes_now()
        if not nodes:
            raise ClusterError(f"no node of the cluster offers sandbox slots for {self._wanted()} "
                               "— join one with `trialbox node join ADDRESS` (or change --on)")
        kept = self._recorded_jobs() if self.resume else {}
        self.log = ClusterLog(selector=dict(self.on), pinned_node=self.node_id, nodes=nodes,
                              jobs=kept)
        self._capacity, self._polled_at = sum(n.slots for n in nodes), time.monotonic()
        shipment = Shipment(
            settings_json=self.settings.model_dump_json(),
            corpus=pack(self.settings.corpus_root, "corpus"),
            agent_dirs=[pack(folder, f"agents{i}") for i, folder in enumerate(self.settings.agent_dirs)],
            manifest=self.manifest, agents=self.agents)
        self._shipment = ray.put(shipment)  # once: every task shares the one object
        here = ray.get_runtime_context().get_node_id()
        # On the controller's node: it outlives any worker. (@ray.remote made the class an
        # ActorClass, which mypy cannot see.)
        self._ledger = _StartLedger.options(  # type: ignore[attr-defined]
            scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)).remote()
        self._write_log()
        return nodes

    def nodes_now(self) -> list[ClusterNode]:
        """The matching nodes alive now (--per-node: the one pinned node, if alive)."""
        return [n for n in matching_nodes(self.on) if self.node_id in (None, n.node_id)]

    def capacity(self) -> int:
        """Sandbox slots across the matching nodes at start (the run's recorded concurrency)."""
        return sum(n.slots for n in self.log.nodes) or 1

    async def prepare(self, jobs: Sequence[Job]) -> None:
        """Nothing prepared ahead: each node opens its sandbox when its task starts."""

    async def close(self) -> None:
        """Nothing prepared here; the nodes tear their own sandboxes down."""

    def interrupted(self, key: str) -> Transcript | None:
        """None: a node's turns come back only with its finished outcome."""
        return None

    async def converse(self, job: Job) -> Outcome:
        if self._shipment is None:
            self.start()
        refused = await self._admit()
        if refused is not None:
            return refused
        try:
            reason = self.stopped()
            if reason is not None:
                return Outcome(infra=Status.NOT_RUN, error=reason)
            return await self._converse(job)
        finally:
            self._in_flight -= 1
            self._freed.set()

    async def _admit(self) -> Outcome | None:
        """Wait, in declared order, for a free slot on the matching nodes as they are now; an
        Outcome when none is left at all (every matching node gone)."""
        async with self._admission:  # an asyncio.Lock is FIFO: jobs start in declared order
            while self._in_flight >= self._capacity_now():
                if self._capacity == 0:
                    return Outcome(infra=Status.INFRA_ERROR, error=(
                        f"no node of the cluster offers sandbox slots for {self._wanted()} any "
                        "more — join one with `trialbox node join ADDRESS`, then resume the run"))
                self._freed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._freed.wait(), CAPACITY_POLL_S)
            self._in_flight += 1
            return None

    def _capacity_now(self) -> int:
        """Slots of the matching nodes, looked up again at most every CAPACITY_POLL_S."""
        if time.monotonic() - self._polled_at >= CAPACITY_POLL_S:
            self._capacity = sum(n.slots for n in self.nodes_now())
            self._polled_at = time.monotonic()
        return self._capacity

    def _wanted(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.on.items()) or "any device"

    def _recorded_jobs(self) -> dict[str, Placement]:
        """cluster.json's placements of an interrupted run: a resumed run keeps its finished
        jobs, so where they ran must stay on record."""
        path = self.settings.run_dir / "cluster.json"
        try:
            return ClusterLog.model_validate_json(read_bounded_text(path, SCORECARD_BYTES)).jobs
        except (OSError, ValueError):
            return {}

    async def _converse(self, job: Job) -> Outcome:
        placement = Placement(key=job.key)
        self.log.jobs[job.key] = placement
        submitted = time.perf_counter()
        report, artifacts, lost_error = await self._attempt(job, 1, placement, avoid=None)
        if report is None:
            first = placement.attempts[0]
            retry_on = self._retry_strategy(first.node_id)
            if retry_on is False:
                return self._lost(job, placement, f"{lost_error}; no other matching node to retry on")
            report, artifacts, lost_error = await self._attempt(job, 2, placement, avoid=retry_on)
            if report is None:
                return self._lost(job, placement, lost_error or "lost twice")
        assert report is not None
        placement.node_name, placement.device = report.node_name, report.device
        placement.fingerprint_id = report.fingerprint_id
        placement.converse_s = report.converse_s
        placement.round_trip_s = round(time.perf_counter() - submitted, 3)
        # Only a first-try job measures Ray: a retry's round trip includes the lost attempt.
        placement.overhead_s = (round(placement.round_trip_s - report.converse_s, 3)
                                if len(placement.attempts) == 1 else None)
        self._write_artifacts(job, artifacts)
        self._write_log()
        warning = report.warning
        if report.infra is not None and report.node_name != "?":
            # The error names no node (the stop rule compares causes across nodes): say it here.
            warning = f"ran on node {report.node_name}; {warning}" if warning else f"ran on node {report.node_name}"
        if len(placement.attempts) > 1:
            first = placement.attempts[0]
            note = (f"attempt 1 lost with node {first.node_name or 'unknown'} ({first.error}); "
                    f"retried on node {report.node_name}")
            warning = f"{note}; {warning}" if warning else note
        return Outcome(transcript=report.transcript, infra=report.infra, error=report.error,
                       warning=warning, after=report.after, node=report.node)

    async def _attempt(self, job: Job, attempt: int, placement: Placement, avoid: Any
                       ) -> tuple[JobReport | None, dict[str, bytes], str | None]:
        options: dict[str, Any] = {"resources": self._resources()}
        selector = {SELECTORS[k]: v for k, v in self.on.items() if k != "device"}
        if selector:
            options["label_selector"] = selector
        if self.node_id is not None:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(self.node_id, soft=False)
        elif avoid is not None:
            options["scheduling_strategy"] = avoid
        ref = _job_task.options(**options).remote(job, self._shipment, attempt, self._ledger)
        try:
            text, artifacts = await ref
        except asyncio.CancelledError:
            # Ctrl-C: the task is interrupted on its node and its sandbox torn down there; wait
            # for that (bounded) so the run's last sweep (run_on_cluster) finds nothing in use.
            ray.cancel(ref)
            await _settled(ref, self._ledger, f"{job.key}#{attempt}", CANCEL_GRACE_S)
            raise
        except LOST as exc:
            node_id = await self._ledger.where.remote(f"{job.key}#{attempt}")
            error = _first_line(exc)
            placement.attempts.append(Attempt(attempt=attempt, node_id=node_id, lost=True,
                                              node_name=self._name(node_id), error=error))
            self.say(f"{job.key}: attempt {attempt} lost its node ({error})")
            return None, {}, error
        except ray.exceptions.RayTaskError as exc:
            report = JobReport(node_id="", node_name="?", device="?", fingerprint_id="?", driver="?",
                               attempt=attempt, infra=Status.INFRA_ERROR, converse_s=0.0,
                               error=f"the node could not run the job: {_first_line(exc.cause or exc)}")
            placement.attempts.append(Attempt(attempt=attempt, lost=False, error=report.error))
            return report, {}, None
        report = JobReport.model_validate_json(text)
        placement.attempts.append(Attempt(attempt=attempt, node_id=report.node_id,
                                          node_name=report.node_name, lost=False))
        return report, artifacts, None

    def _resources(self) -> dict[str, float]:
        resources = {SLOT_RESOURCE: 1.0}
        if "device" in self.on:
            resources[f"device:{self.on['device']}"] = 1.0
        return resources

    def _retry_strategy(self, lost_node: str | None) -> Any:
        """False: nowhere to retry. None: plain placement (the lost node is gone, so Ray cannot
        pick it). Else a strategy pinning the retry to another node (the lost node is alive,
        only its worker died, and "another node" must be enforced)."""
        others = [n for n in matching_nodes(self.on)
                  if n.node_id != lost_node and self.node_id in (None, n.node_id)]
        if not others:
            return False
        alive = {n.node_id for n in matching_nodes(self.on)}
        if lost_node in alive:
            return NodeAffinitySchedulingStrategy(random.choice(others).node_id, soft=False)
        return None

    def _lost(self, job: Job, placement: Placement, why: str) -> Outcome:
        self._write_log()
        tries = "; ".join(f"attempt {a.attempt} on node {a.node_name or 'unknown'}: {a.error}"
                          for a in placement.attempts)
        return Outcome(infra=Status.INFRA_ERROR,
                       error=f"the job's node was lost ({why}) — {tries}")

    def _name(self, node_id: str | None) -> str | None:
        return next((n.name for n in self.log.nodes if n.node_id == node_id), node_id)

    def _write_artifacts(self, job: Job, artifacts: dict[str, bytes]) -> None:
        folder = self.settings.run_dir / "artifacts" / job.key
        shutil.rmtree(folder, ignore_errors=True)  # a resumed job's old files are not this run's
        if not artifacts:
            return
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in artifacts.items():
            (folder / Path(name).name).write_bytes(data)

    def _write_log(self) -> None:
        path = self.settings.run_dir / "cluster.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(self.log.model_dump_json(indent=2))
        tmp.replace(path)


async def _settled(ref: Any, ledger: Any, key: str, timeout_s: float) -> None:
    """Wait until a cancelled task has ended on its node, its sandbox swept (bounded). Ray
    resolves a cancelled task's result at once; the ledger hears when the task itself ends."""
    future: asyncio.Future[Any] = asyncio.wrap_future(ref.future())
    future.add_done_callback(lambda done: done.cancelled() or done.exception())
    deadline = time.monotonic() + timeout_s
    await asyncio.wait([future], timeout=timeout_s)
    while time.monotonic() < deadline:
        try:
            if not await ledger.running.remote(key):
                return
        except ray.exceptions.RayError:
            return  # the ledger is gone with the cluster: nothing left to wait for
        await asyncio.sleep(0.5)


def _first_line(exc: BaseException) -> str:
    """The error's type and the first line of its message (a remote error has no other name)."""
    return f"{type(exc).__name__}: {first_line(exc)}".rstrip(": ")
