"""Where a job's conversation comes from: a live sandbox (LiveConversations) or a saved
trace (ReplayedConversations, for rescoring)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from runner.conversation import Simulator, SimulatorError, SimulatorUnavailable, preflight
from runner.conversation.agents import AgentRegistry, needs_memory
from runner.conversation.target import OpenedSession, open_session, run_conversation
from runner.records.status import Status
from runner.records.transcript import SetupTimings, Transcript
from runner.report import Trace
from runner.run.aftercare import collect_artifacts, leave_sandbox
from runner.run.jobs import Job, Outcome, describe_failure
from runner.run.settings import RunSettings
from runner.sandbox import Sandbox, SandboxBackend, stage_fixtures
from runner.sandbox.pool import Lease, WarmPool, cold, pool_for
from runner.scenarios import (
    OFFLINE_ABSENT,
    Manifest,
    Scenario,
    default_timeout_s,
    fixture_stagings,
    lacking_reason,
    missing_documents,
)
from runner.verdict import transcript_problem


@dataclass
class LiveConversations:
    """Each job in a fresh sandbox: open it, talk to the agent, collect its artifacts.

    With a warm pool (``prepare``; on unless ``settings.warm_pool`` is False, and only for
    a backend that can make sandboxes ahead — Docker) the next jobs' sandboxes are started
    while earlier jobs run; each is still used by one job only and destroyed after it."""

    settings: RunSettings
    backend: SandboxBackend
    simulator: Simulator
    # The corpus manifest: its adversarial documents may index 0 chunks without a SETUP_ERROR.
    manifest: Manifest | None = None
    # What the served model can take besides text ("vision", "audio"): scenarios needing more
    # are SKIPPED_NO_MODEL. None = unknown (nothing is skipped for it).
    capabilities: frozenset[str] | None = None
    # The agent ids the sandboxes have, and how GAIA agent types map to them (None: GAIA's own
    # default agent for every scenario).
    agents: AgentRegistry | None = None
    live: bool = True
    # Told (job key, what its set-up is doing) while that takes long — a document indexing —
    # and (key, "") when it is over: the run line shows it (`Engine.show_activity`).
    activity: Callable[[str, str], None] | None = None
    pool: WarmPool[Any] | None = field(default=None, init=False, repr=False)
    _planned: dict[str, Job] = field(default_factory=dict, init=False, repr=False)
    _interrupted: dict[str, Transcript] = field(default_factory=dict, init=False, repr=False)

    def _activity_of(self, key: str) -> Callable[[str], None] | None:
        tell = self.activity
        return None if tell is None else partial(tell, key)

    async def prepare(self, jobs: Sequence[Job]) -> None:
        """Start making the sandboxes of the first jobs, in the order they will run; a job
        known now to be skipped (its document is missing, the model lacks an input) gets none.
        Each sandbox made ahead gets its scenario's empty session too (``_open_ahead``)."""
        self._planned = {job.key: job for job in jobs}
        # As many start at once as a cold run would start: more would slow the ones jobs wait for.
        self.pool = pool_for(self.backend, _pool_ahead(self.settings), starting=self.settings.concurrency,
                             readying=self._open_ahead)
        if self.pool is not None:
            self.pool.plan((job.key, needs_memory(job.scenario)) for job in jobs
                           if self._skipped_before_sandbox(job.scenario) is None)

    async def close(self) -> None:
        """Remove every sandbox made ahead that no job used (the run stopped, or was cancelled)."""
        if self.pool is not None:
            await self.pool.close()

    def _agent_id(self, scenario: Scenario) -> str | None:
        return self.agents.resolve(scenario.agent_type) if self.agents else None

    async def _open_ahead(self, key: str, box: Sandbox) -> OpenedSession | None:
        """The job's empty GAIA session, made in its sandbox by the pool: the same call the
        conversation would make first (same title, agent, device), so the agent cannot tell;
        it only leaves the scenario's clock."""
        job = self._planned.get(key)
        if job is None:
            return None  # a job the plan did not announce: its conversation makes its own
        return await open_session(box, job.scenario, self.settings.device, self._agent_id(job.scenario))

    async def converse(self, job: Job) -> Outcome:
        scenario = job.scenario
        skipped = self._skipped_before_sandbox(scenario)
        if skipped is None:
            try:
                # Before any sandbox: a turn nobody can write (no script, no model) is known now.
                await preflight(self.simulator, scenario)
            except SimulatorUnavailable as exc:
                skipped = Outcome(infra=Status.SKIPPED_NO_MODEL, error=str(exc))
            except SimulatorError as exc:
                skipped = Outcome(infra=Status.ERRORED, error=str(exc))
        if skipped is not None:
            if self.pool is not None:
                self.pool.release(job.key)  # its sandbox, made ahead, goes now
            return skipped
        timeout_s = self.settings.timeout_s or default_timeout_s(scenario)
        artifacts = self.settings.run_dir / "artifacts" / job.key
        collect_error: str | None = None
        memory = needs_memory(scenario)
        # The transcript as it grows (handed over once the session exists), and the finished
        # one: whatever happens later, the turns done so far are kept in the trace.
        begun: list[Transcript] = []
        finished: Transcript | None = None
        removal: Callable[[], Awaitable[None]] | None = None  # the sandbox kept past the block
        box: Sandbox | None = None
        try:
            async with asyncio.timeout(timeout_s) as limit:
                leasing = (self.pool.sandbox(job.key, memory=memory) if self.pool is not None
                           else cold(self.backend, job.key, memory=memory))
                async with leasing as lease:
                    box = lease.box
                    try:
                        await stage_fixtures(box, fixture_stagings(
                            scenario, self.settings.fixtures_root)[0])
                        transcript = await run_conversation(box, scenario, self.simulator,
                                                            self.settings.device,
                                                            agent_id=self._agent_id(scenario),
                                                            keep=begun.append, session=lease.prepared,
                                                            activity=self._activity_of(job.key))
                    except asyncio.CancelledError:
                        # Our deadline or the sandbox's watchdog (a dead container), not Ctrl-C:
                        # what the sandbox still has explains the failure, so it is collected —
                        # after the row, off the clock, where the backend can keep the sandbox:
                        # collecting from a stalled stack took 9 s past an 18 s --timeout.
                        if limit.expired() or getattr(box, "died", None) is not None:
                            removal = lease.keep()
                            if removal is None:
                                collect_error = await collect_artifacts(box, artifacts)
                        raise
                    except Exception:
                        collect_error = await collect_artifacts(box, artifacts)
                        raise
                    transcript.setup = _setup_timings(lease, transcript.setup)
                    finished = transcript
                    # Collecting and removing come after the row is recorded (off the clock);
                    # a backend that cannot keep its sandbox past the block is read here.
                    removal = lease.keep()
                    if removal is None:
                        # The conversation is the result; missing logs must not discard it.
                        collect_error = await collect_artifacts(box, artifacts)
        except asyncio.CancelledError:
            if begun:  # Ctrl-C mid-conversation: the engine's NOT_RUN row keeps the turns done
                self._interrupted[job.key] = begun[0]
            if removal is not None:
                await removal()  # Ctrl-C: the row is not recorded, so nothing is left to collect
            raise
        except Exception as exc:  # noqa: BLE001 — any failure to converse is an infrastructure error
            if finished is not None:
                # The conversation finished; what failed afterwards (a container died, the
                # deadline passed while leaving the sandbox) is said, and the result is kept.
                after = (f"no result within {timeout_s:g} s" if isinstance(exc, TimeoutError)
                         else describe_failure(exc))
                outcome = _classify(scenario, finished, self.manifest)
                outcome.after = after
                outcome.warning = collect_error
                if removal is not None and box is not None:
                    outcome.leave = partial(leave_sandbox, box, artifacts, removal)
                return outcome
            if isinstance(exc, TimeoutError):
                failed = Outcome(infra=Status.TIMEOUT, error=f"no result within {timeout_s:g} s")
            elif isinstance(exc, SimulatorUnavailable):
                failed = Outcome(infra=Status.SKIPPED_NO_MODEL, error=str(exc))
            else:
                failed = Outcome(infra=Status.INFRA_ERROR, error=describe_failure(exc))
            # The status stays what it is; the turns done before the failure are kept with it.
            failed.transcript = begun[0] if begun else None
            failed.warning = collect_error
            if removal is not None and box is not None:
                failed.leave = partial(leave_sandbox, box, artifacts, removal)
            return failed
        outcome = _classify(scenario, transcript, self.manifest)
        outcome.warning = collect_error
        if removal is not None and box is not None:
            outcome.leave = partial(leave_sandbox, box, artifacts, removal)
        return outcome

    def interrupted(self, key: str) -> Transcript | None:
        return self._interrupted.get(key)

    def _skipped_before_sandbox(self, scenario: Scenario) -> Outcome | None:
        """What a scenario gets without a sandbox when the corpus or the model rules it out."""
        missing = missing_documents(scenario, self.settings.corpus_root)
        if missing:
            names = ", ".join(str(doc.path) for doc in missing)
            return Outcome(infra=Status.SKIPPED_NO_DOCUMENT, error=f"document(s) not in the corpus: {names}")
        stagings, missing_fixtures = fixture_stagings(scenario, self.settings.fixtures_root)
        if missing_fixtures:
            return Outcome(infra=Status.SKIPPED_NO_DOCUMENT,
                           error=f"fixture folder(s) missing: {', '.join(missing_fixtures)}")
        lacking = self._lacking_capabilities(scenario)
        if lacking:
            return Outcome(infra=Status.SKIPPED_NO_MODEL, error="; ".join(
                lacking_reason(scenario, need) for need in sorted(lacking)))
        return None

    def _lacking_capabilities(self, scenario: Scenario) -> set[str]:
        needed = set(getattr(scenario, "required_capabilities", set()) or set())
        if self.capabilities is None:  # the server cannot say: only what no sandbox has
            return needed & OFFLINE_ABSENT
        return needed - self.capabilities


def _pool_ahead(settings: RunSettings) -> int:
    """Sandboxes the warm pool makes ahead: concurrency + 1 (the next wave of jobs finds theirs
    ready), or none with --no-warm-pool."""
    return settings.concurrency + 1 if settings.warm_pool else 0


def _setup_timings(lease: Lease, measured: SetupTimings | None) -> SetupTimings:
    """Where the scenario's set-up went: the sandbox's phases (measured by its backend, maybe
    ahead of time) and the conversation's own set-up (session, indexing; by the target)."""
    phases = lease.box.timings

    def phase(name: str) -> float | None:
        value = phases.get(name)
        return round(value, 3) if value is not None else None

    own = measured or SetupTimings()
    return own.model_copy(update={
        "pool_hit": lease.pool_hit,
        "waited_s": round(lease.waited_s, 3),
        "container_create_s": phase("container_create_s"),
        "gaia_import_s": phase("gaia_import_s"),
        "ui_ready_s": phase("ui_ready_s"),
        "mcp_ready_s": phase("mcp_ready_s"),
    })


@dataclass
class ReplayedConversations:
    """Rescoring: the conversations a run's saved traces recorded (by job key)."""

    traces: dict[str, Trace]
    manifest: Manifest | None = None
    live: bool = False

    async def prepare(self, jobs: Sequence[Job]) -> None:
        """Nothing to prepare: the conversations are on disk."""

    async def converse(self, job: Job) -> Outcome:
        return _replayed(job, self.traces.get(job.key), self.manifest)

    def interrupted(self, key: str) -> Transcript | None:
        """None: a replayed conversation is read whole or not at all."""
        return None

    async def close(self) -> None:
        """Nothing to release."""


# Statuses of a conversation cut short: a trace may hold its turns so far, but they are no result.
CUT_SHORT = frozenset({Status.TIMEOUT, Status.INFRA_ERROR, Status.NOT_RUN})


def _replayed(job: Job, trace: Trace | None, manifest: Manifest | None) -> Outcome:
    """The conversation a saved trace recorded; what had no conversation keeps its old status."""
    if trace is None:
        return Outcome(infra=Status.NOT_RUN, error="the original run has no trace for this scenario")
    status = trace.result.status
    if trace.transcript is None:
        return Outcome(infra=status if not status.is_judged else Status.ERRORED, error=trace.result.error)
    if status in CUT_SHORT:
        # The turns done before a timeout or a failure: kept to read, never judged as a whole.
        return Outcome(transcript=trace.transcript, infra=status, error=trace.result.error)
    return _classify(job.scenario, trace.transcript, manifest)


def _classify(scenario: Scenario, transcript: Transcript, manifest: Manifest | None) -> Outcome:
    """A finished conversation, with the infrastructure status its transcript shows (if any)."""
    problem = transcript_problem(scenario, transcript, manifest)
    if problem is None:
        return Outcome(transcript=transcript)
    status, error = problem
    return Outcome(transcript=transcript, infra=status, error=error)

