"""What the engine schedules and what a job comes to: Job, Outcome, Left, ConversationSource.

The vocabulary shared by the engine (runner/run/engine.py), where conversations come from
(runner/run/conversations.py) and the leaving of used sandboxes (runner/run/aftercare.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from runner.records.judgments import Judgments
from runner.records.status import Status
from runner.records.transcript import Transcript
from runner.report import NodeIdentity
from runner.scenarios import Scenario


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
    judge_unavailable: bool = False  # the judge's server refused or was down: kept unjudged
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

    def interrupted(self, key: str) -> Transcript | None:
        """The turns a job cancelled mid-conversation (Ctrl-C) had finished; None: none, or a
        source that cannot say. Its NOT_RUN row keeps them, as a TIMEOUT's row does."""

    async def close(self) -> None:
        """Called once when the run ends, however it ends: what was prepared and not used goes."""


def describe_failure(exc: BaseException) -> str:
    """One line naming the failure; ExceptionGroups (from task groups) are unwrapped."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
