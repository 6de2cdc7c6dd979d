"""Run control: every job of the plan through its conversation, the judge and the scorecard.

The engine owns *when* things happen (concurrency, timeouts, budgets, stopping, resuming); the
modules it calls own *what* happens. Each scenario's trace is written the moment the scenario
ends, so a crash or a Ctrl-C never loses a finished result, and the scorecard is always readable.
A finished conversation's sandbox is left after its row is recorded (runner/run/aftercare.py);
the row is written again with what leaving it collected.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TextIO

from runner.judge import Judge, JudgeError, JudgeUnavailable
from runner.records.evidence import Evidence
from runner.records.judgments import Judgments
from runner.records.status import Status
from runner.records.transcript import Transcript
from runner.report import RunWriter, Scorecard, Trace, scenario_result, scenario_stats, trace_of
from runner.run.aftercare import Aftercare
from runner.run.eta import EtaModel, Prior, Work, document_seconds
from runner.run.jobs import ConversationSource, Job, Left, Outcome
from runner.run.progress import Progress
from runner.run.settings import RunSettings
from runner.scenarios import Scenario, missing_documents
from runner.verdict import (
    RejudgeSample,
    judge_agreement,
    judgings_cost_usd,
    run_all_checks,
    scenario_status,
)

# Statuses that mean "the harness failed", counted towards the stop-after-N-identical rule.
# TIMEOUT is not one: a slow agent is not a broken harness, and its scenarios still count
# against --min-pass-rate as unmeasured (runner/verdict/gate.py:gate_pass_rate).
STREAK_STATUSES = frozenset({Status.INFRA_ERROR, Status.SETUP_ERROR})
# What `--resume --retry-errors` runs again besides NOT_RUN: the harness's failures, not the
# agent's (a FAIL is an answer; re-running it until it passes would be cheating).
RETRYABLE = frozenset({Status.INFRA_ERROR, Status.TIMEOUT, Status.SETUP_ERROR, Status.ERRORED})


@dataclass
class Engine:
    """Runs a plan of jobs: starts each when a place is free, judges and records it, and
    stops the run on a stop rule (identical infrastructure errors, a dead LLM server)."""

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
    _eta: EtaModel | None = None  # the progress line's ETA: a model of the work left
    # What each job's set-up is doing now (a document indexing), newest last: `show_activity`.
    _activities: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    # Asked before each sandbox opens: None when the shared LLM server answers, else why not.
    # A dead server ends the run (exit 3) instead of failing every remaining scenario one by one.
    llm_health: Callable[[], Awaitable[str | None]] | None = None
    _streak: list[str] = field(default_factory=list)
    _stopping: str | None = None
    _finished: set[str] = field(default_factory=set)  # job keys recorded by this process
    stopped_by_infrastructure: bool = False
    _samples: dict[str, list[RejudgeSample]] = field(default_factory=dict)
    _aftercare: Aftercare = field(default_factory=Aftercare)
    #: Run only these result keys (one block of `trialbox ab`); None: the whole plan.
    only: frozenset[str] | None = None
    #: Run these keys again although recorded: in `trialbox ab --resume --retry-errors`, the
    #: other side's units of a re-run pair, so the pair stays side by side in time.
    again: frozenset[str] = frozenset()

    @property
    def stopping(self) -> str | None:
        """Why the run starts no further job (a stop rule fired), or None while it goes on."""
        return self._stopping

    def plan(self) -> list[Job]:
        """Every job, minus those a resumed run already finished: in declared order one at a
        time, the longest expected first when several run at once (`longest_first`)."""
        trials = self.settings.trials
        done = self.already_done()
        jobs = []
        for scenario in self.scenarios:
            for trial in range(1, trials + 1) if trials > 1 else [None]:
                job = Job(scenario, trial)
                if job.key not in done and (self.only is None or job.key in self.only):
                    jobs.append(job)
        if self.settings.concurrency > 1:
            return longest_first(jobs, self.settings.corpus_root)
        return jobs

    def already_done(self) -> set[str]:
        """Keys a resumed run keeps: everything recorded except NOT_RUN (the run stopped before
        it), with --retry-errors the infrastructure failures, and the keys asked `again`."""
        redo = {Status.NOT_RUN} | (RETRYABLE if self.settings.retry_errors else set())
        return {r.key for r in self.writer.results
                if r.status not in redo and r.key not in self.again}

    def show_activity(self, key: str, text: str) -> None:
        """A job's set-up says what it is doing (`LiveConversations.activity`): the run line
        shows the latest job's, or none once every job's is over ("")."""
        self._activities.pop(key, None)  # re-added last: it is the newest now
        if text:
            self._activities[key] = text
        if self._progress is not None:
            latest = next(reversed(self._activities.items()), None)
            self._progress.show(f"{latest[0]}: {latest[1]}" if latest else "")

    async def run(self) -> Scorecard:
        """Run the plan. On cancellation (Ctrl-C) the unfinished jobs are recorded NOT_RUN."""
        jobs = self.plan()
        if self.progress_stream is not None:
            # log_every_s: in a log, a scenario that runs for minutes still gets a status line
            # every 10 s (what is in flight, elapsed, ETA), so a reader never waits 15 s blind.
            eta = self._eta = EtaModel([work_of(job, self.settings.corpus_root) for job in jobs],
                                       concurrency=self.settings.concurrency)
            self._progress = Progress("run", total=len(jobs), stream=self.progress_stream,
                                      log_every_s=10.0,
                                      remaining=lambda: eta.remaining_s(time.monotonic()))
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
            self._record_not_run(jobs, "the run was interrupted (Ctrl-C) before this scenario finished",
                                 kept=self.conversations.interrupted)
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

    def _record_not_run(self, jobs: Sequence[Job], reason: str,
                        kept: Callable[[str], Transcript | None] = lambda key: None) -> None:
        """Every job without a row gets NOT_RUN; one cut off mid-conversation keeps the turns
        it had finished (`kept`), to read — resume runs it again whole."""
        for job in jobs:
            if job.key not in self._finished:
                self._record(job, Outcome(infra=Status.NOT_RUN, error=reason,
                                          transcript=kept(job.key)), wall_s=None)

    async def run_job(self, job: Job) -> None:
        began = datetime.now(UTC)  # the row's clock time: the driver report orders runs by it
        started = time.perf_counter()
        if self._eta is not None:
            self._eta.started(job.key, time.monotonic())
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
            trace = self._record(job, outcome, wall_s, span=(began, datetime.now(UTC)))
        finally:
            if leaving is not None:
                self._aftercare.then(leaving, partial(self._left, job, trace))
        status = trace.result.status  # recorded, or raised above
        if self._eta is not None:
            if outcome.transcript is None:  # skipped or refused before any work: not a pace
                self._eta.dropped(job.key)
            else:
                self._eta.finished(job.key, wall_s, document_seconds(scenario_stats(trace.result)))
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
        cut_short = trace.result.status in (Status.TIMEOUT, Status.INFRA_ERROR)
        when = "after the conversation was cut short" if cut_short else "after the conversation finished"
        for problem in left.problems:
            trace.result.notes.append(f"{when}: {problem}")
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
        except JudgeUnavailable as exc:
            # The judge's server, not the agent: the conversation is kept unjudged (rescore
            # judges it later) and no further scenario starts — each would meet the same refusal.
            outcome.rejudged.clear()
            outcome.judge_unavailable, outcome.judge_error = True, f"judge unavailable: {exc}"
            self._stop(f"the judge is unavailable ({exc}); the conversations so far are kept — "
                       f"once it answers, `trialbox rescore {self.settings.run_dir}` judges them "
                       f"and `trialbox run --resume {self.settings.run_dir}` runs the rest",
                       infrastructure=True)
            return
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

    def _record(
        self, job: Job, outcome: Outcome, wall_s: float | None,
        span: tuple[datetime, datetime] | None = None,
    ) -> Trace:
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
        if outcome.judge_error and outcome.infra is None:  # kept unjudged: said, not ERRORED
            result.notes.append(outcome.judge_error)
        result.judge_unavailable = outcome.judge_unavailable
        result.node = outcome.node
        if span is not None:
            result.started_at, result.ended_at = span
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


def _sample(job: Job, transcript: Transcript, judgments: Judgments) -> RejudgeSample:
    outcome = scenario_status(judgments, [], conversation_turns=[t.turn for t in transcript.turns])
    return RejudgeSample(
        passed=outcome.status is Status.PASS,
        turn_scores={t.turn: t.scores for t in judgments.turns},
        replies=judgments.usage.requests + judgments.usage.cached_replies,
        cached_replies=judgments.usage.cached_replies,
    )


def longest_first(jobs: Sequence[Job], corpus_root: Path) -> list[Job]:
    """The jobs by the work the ETA's prior expects of them, most first, ties in their given
    order. With several places, a long job started last runs on alone after the others have
    finished: GAIA-91's 6.2-million-character PDF (~570 s of its run's ~2,400) was 76th of 91.
    Started first, the short ones fill the other places beside it. One place at a time the
    order changes nothing of the wall time, so the declared order is kept there."""
    prior = Prior()
    return sorted(jobs, key=lambda job: -prior.seconds(work_of(job, corpus_root)))


def work_of(job: Job, corpus_root: Path) -> Work:
    """What the ETA model expects of a job: its user turns and its documents' bytes."""
    if missing_documents(job.scenario, corpus_root):  # skipped before a sandbox: no cost
        return Work(job.key, turns=len(job.scenario.turns), documents_missing=True)
    sizes = []
    for document in job.scenario.setup_documents:
        try:
            sizes.append((corpus_root / document.relative_path).stat().st_size)
        except OSError:
            sizes.append(0)  # gone since: the scenario is skipped, and dropped from the model then
    return Work(job.key, turns=len(job.scenario.turns), document_bytes=sum(sizes))


def _why(outcome: Outcome) -> str:
    return f" — {outcome.error}" if outcome.error else ""
