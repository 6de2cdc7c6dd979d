"""Run control: every selected scenario through sandbox → conversation → checks → judge → score.

The engine owns *when* things happen (concurrency, timeouts, budgets, stopping, resuming); the
modules it calls own *what* happens. Each scenario's trace is written the moment the scenario
ends, so a crash or a Ctrl-C never loses a finished result, and the scorecard is always readable.

Nothing after the answer is on the scenario's clock: a finished conversation's sandbox is kept
past it, and its artifacts are collected and it is removed after the row is recorded, in the
background while the next scenario runs (``Aftercare``: in order, at most ``AFTERCARE_PLACES``
at once, the next job waiting for a place). The row is then written again with its artifacts
(and what could not be collected, in its notes); the run's final write waits for all of them.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TextIO

from runner.conversation.agents import AgentRegistry, needs_memory
from runner.conversation.simulate import Simulator, SimulatorError, SimulatorUnavailable, preflight
from runner.conversation.target import OpenedSession, open_session, run_conversation
from runner.judge import Judge, JudgeError
from runner.records.evidence import Evidence
from runner.records.judgments import Judgments
from runner.records.status import Status
from runner.records.transcript import SetupTimings, Transcript
from runner.report import NodeIdentity, RunWriter, Scorecard, Trace, scenario_result, trace_of
from runner.run.progress import Progress
from runner.run.settings import RunSettings
from runner.sandbox import Sandbox, SandboxBackend
from runner.sandbox.pool import Lease, WarmPool, cold, pool_for
from runner.scenarios import Manifest, Scenario, default_timeout_s, missing_documents
from runner.verdict.checks import run_all_checks
from runner.verdict.scoring import judgings_cost_usd, scenario_status, transcript_problem
from runner.verdict.trials import RejudgeSample, judge_agreement

# Statuses that mean "the harness failed", counted towards the stop-after-N-identical rule.
# TIMEOUT is not one: a slow agent is not a broken harness, and its scenarios still count
# against --min-pass-rate as unmeasured (runner/verdict/scoring.py:gate_pass_rate).
STREAK_STATUSES = frozenset({Status.INFRA_ERROR, Status.SETUP_ERROR})
# What `--resume --retry-errors` runs again besides NOT_RUN: the harness's failures, not the
# agent's (a FAIL is an answer; re-running it until it passes would be cheating).
RETRYABLE = frozenset({Status.INFRA_ERROR, Status.TIMEOUT, Status.SETUP_ERROR, Status.ERRORED})


@dataclass(frozen=True)
class Job:
    """One scenario run: the scenario and, when --trials K > 1, which trial (1-based)."""

    scenario: Scenario
    trial: int | None

    @property
    def key(self) -> str:
        return self.scenario.id if self.trial is None else f"{self.scenario.id}__trial{self.trial}"


@dataclass
class Outcome:
    """What one job produced before it is laid out as a scorecard row."""

    transcript: Transcript | None = None
    infra: Status | None = None
    error: str | None = None
    judgments: Judgments | None = None
    rejudged: list[Judgments] = field(default_factory=list)
    judge_error: str | None = None
    warning: str | None = None  # something went wrong that did not spoil the result
    # What went wrong after the conversation finished (a container died, the deadline passed
    # while leaving the sandbox): said in the result's notes; the result itself is kept.
    after: str | None = None
    # The sandbox a finished conversation left, still to collect from and remove: the engine
    # runs it after the row is recorded (``Aftercare``). None: nothing is left to do.
    leave: Callable[[], Awaitable[Left]] | None = field(default=None, repr=False)
    node: NodeIdentity | None = None  # a cluster run: the node it ran on (the row records it)


@dataclass(frozen=True)
class Left:
    """What leaving a used sandbox came to: what could not be collected (or removed), and how
    long collecting and removing took."""

    problems: list[str]
    seconds: float


class ConversationSource(Protocol):
    """Where a job's conversation comes from: a live sandbox, or a saved trace (rescore)."""

    live: bool  # whether conversations touch the agent (and so the LLM server)

    async def prepare(self, jobs: Sequence[Job]) -> None:
        """Called once with the run's plan, in order, before any job runs (a warm pool starts
        preparing sandboxes for the first ones)."""

    async def converse(self, job: Job) -> Outcome: ...

    async def close(self) -> None:
        """Called once when the run ends, however it ends: what was prepared and not used goes."""


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
    pool: WarmPool[Any] | None = field(default=None, init=False, repr=False)
    _planned: dict[str, Job] = field(default_factory=dict, init=False, repr=False)

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
                        transcript = await run_conversation(box, scenario, self.simulator,
                                                            self.settings.device,
                                                            agent_id=self._agent_id(scenario),
                                                            keep=begun.append, session=lease.prepared)
                    except asyncio.CancelledError:
                        # Our deadline or the sandbox's watchdog (a dead container), not Ctrl-C:
                        # what the sandbox still has explains the failure, so it is collected.
                        if limit.expired() or getattr(box, "died", None) is not None:
                            collect_error = await _collect(box, artifacts)
                        raise
                    except Exception:
                        collect_error = await _collect(box, artifacts)
                        raise
                    transcript.setup = _setup_timings(lease, transcript.setup)
                    finished = transcript
                    # Collecting and removing come after the row is recorded (off the clock);
                    # a backend that cannot keep its sandbox past the block is read here.
                    removal = lease.keep()
                    if removal is None:
                        # The conversation is the result; missing logs must not discard it.
                        collect_error = await _collect(box, artifacts)
        except asyncio.CancelledError:
            if removal is not None:
                await removal()  # Ctrl-C: the row is not recorded, so nothing is left to collect
            raise
        except Exception as exc:  # noqa: BLE001 — any failure to converse is an infrastructure error
            if finished is not None:
                # The conversation finished; what failed afterwards (a container died, the
                # deadline passed while leaving the sandbox) is said, and the result is kept.
                after = (f"no result within {timeout_s:.0f} s" if isinstance(exc, TimeoutError)
                         else _describe(exc))
                outcome = _classify(scenario, finished, self.manifest)
                outcome.after = after
                outcome.warning = collect_error
                if removal is not None and box is not None:
                    outcome.leave = partial(_leave, box, artifacts, removal)
                return outcome
            if isinstance(exc, TimeoutError):
                failed = Outcome(infra=Status.TIMEOUT, error=f"no result within {timeout_s:.0f} s")
            elif isinstance(exc, SimulatorUnavailable):
                failed = Outcome(infra=Status.SKIPPED_NO_MODEL, error=str(exc))
            else:
                failed = Outcome(infra=Status.INFRA_ERROR, error=_describe(exc))
            # The status stays what it is; the turns done before the failure are kept with it.
            failed.transcript = begun[0] if begun else None
            failed.warning = collect_error
            return failed
        outcome = _classify(scenario, transcript, self.manifest)
        outcome.warning = collect_error
        if removal is not None and box is not None:
            outcome.leave = partial(_leave, box, artifacts, removal)
        return outcome

    def _skipped_before_sandbox(self, scenario: Scenario) -> Outcome | None:
        """What a scenario gets without a sandbox when the corpus or the model rules it out."""
        missing = missing_documents(scenario, self.settings.corpus_root)
        if missing:
            names = ", ".join(str(doc.path) for doc in missing)
            return Outcome(infra=Status.SKIPPED_NO_DOCUMENT, error=f"document(s) not in the corpus: {names}")
        lacking = self._lacking_capabilities(scenario)
        if lacking:
            return Outcome(infra=Status.SKIPPED_NO_MODEL,
                           error=f"the served model has no {' or '.join(sorted(lacking))} input")
        return None

    def _lacking_capabilities(self, scenario: Scenario) -> set[str]:
        needed = set(getattr(scenario, "required_capabilities", set()) or set())
        if self.capabilities is None:
            return set()
        return needed - self.capabilities


#: Longest the artifacts of a failed conversation are collected for (its deadline has passed),
#: and those of a finished one, in the background.
COLLECT_AFTER_FAILURE_S = 60.0


async def _collect(box: Sandbox, dest: Path) -> str | None:
    """Collect what a sandbox has (logs, chat DB) into `dest`; what could not be collected, as
    one line (None: everything was). A failed collect never raises: after a failed
    conversation the failure being handled is the scenario's cause, after a finished one the
    conversation is the result."""
    try:
        async with asyncio.timeout(COLLECT_AFTER_FAILURE_S):
            problems = await box.collect(dest)
    except (OSError, RuntimeError, ValueError, TimeoutError) as exc:
        problems = [_describe(exc)]
    return "artifacts not collected: " + "; ".join(problems) if problems else None


async def _leave(box: Sandbox, dest: Path, removal: Callable[[], Awaitable[None]]) -> Left:
    """Collect a used sandbox's artifacts, then remove it; never raises: the row is recorded
    already, and whatever fails here is written into it (``Engine._left``)."""
    began = time.perf_counter()
    try:
        missing = await _collect(box, dest)
        problems = [missing] if missing else []
    except Exception as exc:  # noqa: BLE001 — a crash mid-collect is recorded, never lost
        problems = [f"collecting the artifacts crashed: {_describe(exc)}"]
    try:
        await removal()
    except Exception as exc:  # noqa: BLE001 — the sweep by label at the run's end removes it
        problems.append(f"removing the sandbox failed: {_describe(exc)}")
    return Left(problems, round(time.perf_counter() - began, 3))


#: Used sandboxes being left (collected from and removed) at once, in the background. One is
#: the usual; a second lets a scenario that ends while the last one is still being left go on.
#: A job that would leave a third waits for a place after recording its row (back-pressure).
AFTERCARE_PLACES = 2


class Aftercare:
    """Leaves used sandboxes after their rows are recorded, in the order they were handed in,
    at most ``places`` at once; ``drain`` waits for all of them (the run's final write does)."""

    def __init__(self, places: int = AFTERCARE_PLACES) -> None:
        self.places = places
        self._turns = asyncio.Semaphore(places)
        self._leaving: set[asyncio.Task[Left]] = set()
        self._following: set[asyncio.Task[None]] = set()

    def begin(self, leave: Callable[[], Awaitable[Left]], name: str = "") -> asyncio.Task[Left]:
        """Start leaving a sandbox now (it waits for a place, behind those handed in before)."""
        task = asyncio.create_task(self._in_turn(leave), name=f"leave sandbox {name}")
        self._leaving.add(task)
        task.add_done_callback(self._leaving.discard)
        return task

    def then(self, leaving: asyncio.Task[Left], record: Callable[[Left], None]) -> None:
        """Once ``leaving`` is done, ``record`` what it came to (the row written again)."""
        async def follow() -> None:
            record(await leaving)

        task = asyncio.create_task(follow(), name=f"record {leaving.get_name()}")
        self._following.add(task)
        task.add_done_callback(self._following.discard)

    async def room(self) -> None:
        """Back-pressure: return once at most ``places`` sandboxes are being left."""
        while len(self._leaving) > self.places:
            await asyncio.wait(set(self._leaving), return_when=asyncio.FIRST_COMPLETED)

    async def drain(self) -> None:
        """Return once every sandbox handed in is left and its row written again; a failure
        to write one is raised (after all of them are done)."""
        failures: list[BaseException] = []
        while self._leaving or self._following:
            done, _ = await asyncio.wait(self._leaving | self._following)
            for task in done:
                error = None if task.cancelled() else task.exception()
                if error is not None:
                    failures.append(error)
            self._leaving -= done
            self._following -= done
        if failures:
            raise failures[0]

    async def _in_turn(self, leave: Callable[[], Awaitable[Left]]) -> Left:
        async with self._turns:
            return await leave()


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

    async def close(self) -> None:
        """Nothing to release."""


@dataclass
class Engine:
    settings: RunSettings
    scenarios: Sequence[Scenario]
    conversations: ConversationSource
    judge: Judge | None
    writer: RunWriter
    say: Callable[[str], None] = print
    # Where the run's progress goes (a live line with an ETA on a terminal, one line per
    # scenario in a log); None: plain `say` lines.
    progress_stream: TextIO | None = None
    _progress: Progress | None = None
    # Asked before each sandbox opens: None when the shared LLM server answers, else why not.
    # A dead server ends the run (exit 3) instead of failing every remaining scenario one by one.
    llm_health: Callable[[], Awaitable[str | None]] | None = None
    _streak: list[str] = field(default_factory=list)
    _stopping: str | None = None
    _finished: set[str] = field(default_factory=set)  # job keys recorded by this process
    stopped_by_infrastructure: bool = False
    _samples: dict[str, list[RejudgeSample]] = field(default_factory=dict)
    _aftercare: Aftercare = field(default_factory=Aftercare)

    @property
    def stopping(self) -> str | None:
        """Why the run starts no further job (a stop rule fired), or None while it goes on."""
        return self._stopping

    def plan(self) -> list[Job]:
        """Every job in declared order, minus those a resumed run already finished."""
        trials = self.settings.trials
        done = self.already_done()
        jobs = []
        for scenario in self.scenarios:
            for trial in range(1, trials + 1) if trials > 1 else [None]:
                job = Job(scenario, trial)
                if job.key not in done:
                    jobs.append(job)
        return jobs

    def already_done(self) -> set[str]:
        """Keys a resumed run keeps: everything recorded except NOT_RUN (the run stopped before
        it) and, with --retry-errors, the infrastructure failures."""
        redo = {Status.NOT_RUN} | (RETRYABLE if self.settings.retry_errors else set())
        return {r.key for r in self.writer.results if r.status not in redo}

    async def run(self) -> Scorecard:
        """Run the plan. On cancellation (Ctrl-C) the unfinished jobs are recorded NOT_RUN."""
        jobs = self.plan()
        if self.progress_stream is not None:
            # log_every_s: in a log, a scenario that runs for minutes still gets a status line
            # every 10 s (what is in flight, elapsed, ETA), so a reader never waits 15 s blind.
            self._progress = Progress("run", total=len(jobs), stream=self.progress_stream,
                                      log_every_s=10.0)
            self.say = self._progress.say  # stop reasons print above the live line
        try:
            return await self._run(jobs)
        finally:
            if self._progress is not None:
                self._progress.close()

    async def _run(self, jobs: list[Job]) -> Scorecard:
        self.writer.write()
        gate = asyncio.Semaphore(self.settings.concurrency)
        await self.conversations.prepare(jobs)
        tasks = [asyncio.create_task(self._guarded(job, gate), name=job.key) for job in jobs]
        try:
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            try:
                await self._aftercare.drain()  # the recorded rows' artifacts are still collected
            finally:
                await self.conversations.close()
            self._record_not_run(jobs, "the run was interrupted (Ctrl-C) before this scenario finished")
            self.writer.close()
            raise
        try:
            await self._aftercare.drain()
        finally:
            await self.conversations.close()
        self._record_not_run(jobs, self._stopping or "not run")
        if self._samples:
            self.writer.set_judge_agreement(judge_agreement(
                self._samples, temperature=getattr(self.judge, "judge_temperature", None)))
        return self.writer.close()

    async def _guarded(self, job: Job, gate: asyncio.Semaphore) -> None:
        async with gate:
            if self._stopping:
                return
            if self.llm_health is not None and self.conversations.live:
                problem = await self.llm_health()
                if problem is not None:
                    self._stop(f"the LLM server stopped answering ({problem}); restart it with "
                               "`trialbox up`, then `trialbox run --resume "
                               f"{self.settings.run_dir}`", infrastructure=True)
                    return
            await self.run_job(job)

    def _stop(self, reason: str, infrastructure: bool = False) -> None:
        """Run no further job; the ones not started are recorded NOT_RUN with this reason."""
        if self._stopping:
            return
        self._stopping = reason
        self.stopped_by_infrastructure = self.stopped_by_infrastructure or infrastructure
        self.say(reason)
        self.writer.warn(reason)

    def _record_not_run(self, jobs: Sequence[Job], reason: str) -> None:
        for job in jobs:
            if job.key not in self._finished:
                self._record(job, Outcome(infra=Status.NOT_RUN, error=reason), wall_s=None)

    async def run_job(self, job: Job) -> None:
        started = time.perf_counter()
        outcome = await self.conversations.converse(job)
        # Collecting and removing its sandbox start now, beside the judging: off the clock.
        leaving = self._aftercare.begin(outcome.leave, job.key) if outcome.leave is not None else None
        trace: Trace | None = None
        try:
            if outcome.warning:
                self.writer.warn(f"{job.key}: {outcome.warning}")
            if outcome.after:
                self.writer.warn(f"{job.key}: kept the finished conversation; afterwards {outcome.after}")
            if outcome.infra is None and outcome.transcript is not None:
                await self._judge(job, outcome)
            wall_s = round(time.perf_counter() - started, 3)
            trace = self._record(job, outcome, wall_s)
        finally:
            if leaving is not None:
                self._aftercare.then(leaving, partial(self._left, job, trace))
        status = trace.result.status  # recorded, or raised above
        line = f"{status.value:<24} {job.key}  ({wall_s:.1f} s){_why(outcome)}"
        (self._progress.advance if self._progress is not None else self.say)(line)
        self._watch_streak(status, outcome.error)
        await self._aftercare.room()  # a job leaving a third sandbox waits, its row recorded

    def _left(self, job: Job, trace: Trace | None, left: Left) -> None:
        """A recorded row's sandbox is left: its trace gets the artifacts collected, its notes
        what could not be, its set-up the time leaving took; the row is written again."""
        if trace is None:
            return  # the job was cancelled before its row was recorded: NOT_RUN says it
        trace.artifacts = artifacts_of(self.settings.run_dir, job.key)
        for problem in left.problems:
            trace.result.notes.append(f"after the conversation finished: {problem}")
            self.writer.warn(f"{job.key}: {problem}")
        if trace.transcript is not None and trace.transcript.setup is not None:
            setup = trace.transcript.setup.model_copy(update={"teardown_s": left.seconds})
            trace.transcript.setup = trace.result.setup = setup
        self.writer.add(trace)

    # -- judging ------------------------------------------------------------------------------

    async def _judge(self, job: Job, outcome: Outcome) -> None:
        if self.judge is None or outcome.transcript is None:
            return
        try:
            # Each repeat is its own judging: the cache keys it by its index, so repeat i is
            # never served repeat j's reply and agreement is measured on real replies.
            for repeat in range(self.settings.rejudge):
                outcome.rejudged.append(await self.judge.judge(job.scenario, outcome.transcript, repeat))
        except JudgeError as exc:
            outcome.infra, outcome.judge_error = Status.ERRORED, str(exc)
            outcome.error = f"judge reply rejected: {exc}"
            return
        outcome.judgments = outcome.rejudged[0]
        spent = judgings_cost_usd(outcome.rejudged)
        budget = self.settings.budget_usd
        if budget is not None and spent > budget:
            outcome.infra = Status.BUDGET_EXCEEDED
            outcome.error = f"judge spend ${spent:.4f} exceeded the ${budget:.4f} budget"
        if len(outcome.rejudged) > 1:
            self._samples[job.key] = [_sample(job, outcome.transcript, j) for j in outcome.rejudged]

    # -- recording ------------------------------------------------------------------------------

    def _record(self, job: Job, outcome: Outcome, wall_s: float | None) -> Trace:
        scenario = job.scenario
        checks = (run_all_checks(scenario, outcome.transcript, derived=self.settings.derived_checks)
                  if outcome.transcript else [])
        result = scenario_result(
            scenario_id=scenario.id,
            name=scenario.name or "",
            category=scenario.category or "uncategorized",
            severity=str(getattr(scenario.severity, "value", scenario.severity) or "standard"),
            transcript=outcome.transcript,
            checks=checks,
            judgments=outcome.judgments,
            infra=outcome.infra,
            error=outcome.error,
            wall_s=wall_s,
            trial=job.trial,
            judgings=outcome.rejudged,
        )
        if outcome.after:
            result.notes.append(f"after the conversation finished: {outcome.after}")
        result.node = outcome.node
        self._finished.add(job.key)
        evidence = Evidence.from_transcript(outcome.transcript).model_dump(mode="json") if outcome.transcript else {}
        artifacts = artifacts_of(self.settings.run_dir, job.key)
        trace = trace_of(
            self.settings.run_id,
            result,
            transcript=outcome.transcript,
            checks=checks,
            judgments=outcome.judgments,
            judge_error=outcome.judge_error,
            evidence=evidence,
            artifacts=artifacts,
        )
        self.writer.add(trace)
        return trace

    def _watch_streak(self, status: Status, error: str | None) -> None:
        """Stop after N consecutive identical infrastructure errors: the rest would fail alike."""
        if status is Status.TIMEOUT:
            return  # a slow agent says nothing about the harness: neither counts nor resets
        if status not in STREAK_STATUSES:
            self._streak.clear()
            return
        signature = f"{status.value}: {cause_of(error)}"
        self._streak = [s for s in self._streak if s == signature] + [signature]
        if len(self._streak) >= self.settings.max_identical_infra_errors:
            self._stop(f"stopped after {len(self._streak)} identical infrastructure errors in a "
                       f"row: {status.value}: {error}", infrastructure=True)


def artifacts_of(run_dir: Path, key: str) -> list[str]:
    """The files collected from a scenario's sandbox, relative to the run folder."""
    folder = run_dir / "artifacts" / key
    return sorted(str(p.relative_to(run_dir)) for p in folder.glob("*") if p.is_file()) if folder.is_dir() else []


def cause_of(error: str | None) -> str:
    """The failure with what names one scenario taken out (sandbox/network/container names,
    ids, addresses, durations), so the same cause in different scenarios compares equal."""
    text = error or ""
    text = re.sub(r"trialbox-[A-Za-z0-9_.-]+", "<sandbox>", text)
    text = re.sub(r"\b[0-9a-f]{12,64}\b", "<id>", text)
    text = re.sub(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b", "<address>", text)
    text = re.sub(r"\b\d+(?:\.\d+)?\s*s\b", "<seconds>", text)
    return text


# Statuses of a conversation cut short: a trace may hold its turns so far, but they are no result.
CUT_SHORT = frozenset({Status.TIMEOUT, Status.INFRA_ERROR})


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


def _sample(job: Job, transcript: Transcript, judgments: Judgments) -> RejudgeSample:
    outcome = scenario_status(judgments, [], conversation_turns=[t.turn for t in transcript.turns])
    return RejudgeSample(
        passed=outcome.status is Status.PASS,
        turn_scores={t.turn: t.scores for t in judgments.turns},
    )


def _describe(exc: BaseException) -> str:
    """One line naming the failure; ExceptionGroups (from task groups) are unwrapped."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _why(outcome: Outcome) -> str:
    return f" — {outcome.error}" if outcome.error else ""
