"""The calibration gate: a judge must label known examples correctly before it judges anything.

A judge that cannot tell "the pump is stopped" from "the pump is running", or that gives an
invented figure a good correctness score, would turn every scenario verdict into noise. So the
gate runs the fixed examples in eval/calibration/ under a deadline, and any miss — or running out
of time — fails it. CalibratedJudge is the only judge type the engine accepts; the only way to
get one is to pass the gate.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.judge._errors import (
    CalibrationFailed,
    JudgeError,
    JudgeServerError,
    JudgeUnavailable,
    JudgeUnreachable,
)
from runner.judge._judge import Judge, ModelJudge
from runner.records.judgments import DIMENSIONS, ClaimJudgment, ClaimLabel, Judgments
from runner.records.transcript import Transcript
from runner.system.paths import eval_root
from runner.system.urls import shown_url

DEFAULT_DEADLINE_S = 120.0

#: What stops the gate at once and escapes it: the server refused us, stayed down, or sent no
#: model answer at all. None of it says how well the model judges, so none is a miss.
INFRASTRUCTURE = (JudgeUnavailable, JudgeServerError, JudgeUnreachable)

Kind = Literal["claim", "rubric"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClaimExample(_Strict):
    """One answer → claim → label example."""

    id: str
    source: Literal["goa-ai", "trialbox"]  # goa-ai: Goa-AI's calibration facts; trialbox: ours
    answer: str = Field(min_length=1)  # an empty answer never reaches the model, so it cannot calibrate
    claim: str
    label: ClaimLabel
    reference: str | None = None


class Band(_Strict):
    """An inclusive score range on one dimension."""

    min: float = 0.0
    max: float = 10.0

    def holds(self, score: float) -> bool:
        return self.min <= score <= self.max

    def __str__(self) -> str:
        return f"[{self.min:g}, {self.max:g}]"


class CalibrationGroundTruth(_Strict):
    expected_answer: str | None
    note: str | None = None


class CalibrationTurn(_Strict):
    turn: int
    objective: str
    ground_truth: CalibrationGroundTruth | None = None
    success_criteria: str | None = None


class CalibrationScenario(_Strict):
    """The few scenario fields the rubric judge reads (a Scenario stand-in for examples)."""

    id: str
    name: str
    description: str
    persona: str
    expected_outcome: str
    turns: list[CalibrationTurn]


class RubricExample(_Strict):
    """A one-turn transcript and the bands its first turn's scores must fall in."""

    id: str
    why: str
    scenario: CalibrationScenario
    transcript: Transcript
    bands: dict[str, Band]

    def model_post_init(self, context: Any) -> None:
        unknown = sorted(set(self.bands) - set(DIMENSIONS))
        if unknown:
            raise ValueError(f"rubric example {self.id}: unknown dimensions {unknown}; use {DIMENSIONS}")


class ClaimExamples(_Strict):
    examples: list[ClaimExample]


class RubricExamples(_Strict):
    examples: list[RubricExample]


class CalibrationSet(BaseModel):
    claims: list[ClaimExample]
    rubric: list[RubricExample]


class ExampleResult(BaseModel):
    """What the judge did with one example."""

    id: str
    kind: Kind
    expected: str
    got: str | None = None  # None when the judge raised or ran out of time
    passed: bool
    error: str | None = None


class CalibrationReport(BaseModel):
    judge_model: str
    judge_server: str | None = Field(
        default=None, description="the URL of the server that answered (the same model name on "
        "another server is another judge, calibrated on its own)")
    passed: bool
    deadline_s: float
    elapsed_s: float
    failure: str | None = None  # "deadline" or "N of M examples wrong"
    results: list[ExampleResult]
    requests: int | None = Field(
        default=None, description="questions sent to the judge's server during this calibration "
        "(all live: the gate never reads the judge cache); None for a judge that does not count")

    @property
    def misses(self) -> list[ExampleResult]:
        return [result for result in self.results if not result.passed]

    def __str__(self) -> str:
        total = len(self.results)
        who = self.judge_model + (f" at {shown_url(self.judge_server)}" if self.judge_server else "")
        if self.passed:
            return f"judge {who} passed calibration ({total} examples, {self.elapsed_s:.1f}s)"
        lines = [f"judge {who} failed calibration: {self.failure}"]
        for miss in self.misses:
            said = miss.error if miss.got is None else f"got {miss.got}"
            lines.append(f"  - {miss.kind} {miss.id}: expected {miss.expected}, {said}")
        return "\n".join(lines)


def _load(path: Path, model: type[_Strict]) -> Any:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return model.model_validate(data)
    except FileNotFoundError:
        raise JudgeError(f"{path}: calibration file missing") from None
    except (yaml.YAMLError, ValidationError, ValueError) as error:
        raise JudgeError(f"{path}: invalid calibration file: {error}") from None


def load_calibration(directory: Path | None = None) -> CalibrationSet:
    folder = directory or eval_root() / "calibration"
    claims = _load(folder / "claims.yaml", ClaimExamples).examples
    rubric = _load(folder / "rubric.yaml", RubricExamples).examples
    return CalibrationSet(claims=claims, rubric=rubric)


async def _run_claim(judge: Judge, example: ClaimExample) -> ExampleResult:
    spec = {"name": "claim", "claim": example.claim}
    labels = await judge.judge_claims([spec], example.answer, example.reference)
    got = labels[0].label if len(labels) == 1 else None
    return ExampleResult(
        id=example.id,
        kind="claim",
        expected=example.label.value,
        got=got.value if got is not None else f"{len(labels)} labels for 1 claim",
        passed=got == example.label,
    )


def _band_misses(example: RubricExample, judgments: Judgments) -> tuple[str, list[str]]:
    scores = judgments.turns[0].scores.model_dump()
    got = ", ".join(f"{name}={scores[name]:g}" for name in example.bands)
    misses = [f"{name} {band}" for name, band in example.bands.items() if not band.holds(scores[name])]
    return got, misses


async def _run_rubric(judge: Judge, example: RubricExample) -> ExampleResult:
    expected = ", ".join(f"{name} in {band}" for name, band in example.bands.items())
    judgments = await judge.judge(example.scenario, example.transcript)
    if not judgments.turns:
        return ExampleResult(id=example.id, kind="rubric", expected=expected, got="no turn grades", passed=False)
    got, misses = _band_misses(example, judgments)
    return ExampleResult(id=example.id, kind="rubric", expected=expected, got=got, passed=not misses)


async def _guarded(judge: Judge, kind: Kind, example: Any, limit: asyncio.Semaphore) -> ExampleResult:
    """Run one example; a JudgeError fails that example (and is reported) instead of the gate."""
    async with limit:
        try:
            if kind == "claim":
                return await _run_claim(judge, example)
            return await _run_rubric(judge, example)
        except INFRASTRUCTURE:
            raise  # the server, not the model: calibrate stops the gate at once
        except JudgeError as error:
            return ExampleResult(
                id=example.id, kind=kind, expected=_expected(kind, example), passed=False, error=str(error)
            )


def _expected(kind: Kind, example: Any) -> str:
    if kind == "claim":
        return str(example.label.value)
    return ", ".join(f"{name} in {band}" for name, band in example.bands.items())


async def calibrate(
    judge: Judge,
    deadline_s: float = DEFAULT_DEADLINE_S,
    examples: CalibrationSet | None = None,
    concurrency: int = 2,
) -> CalibrationReport:
    """Run every calibration example against `judge` within `deadline_s` seconds.

    Examples run `concurrency` at a time (a local two-core server gains nothing from more).
    Examples still unanswered at the deadline count as misses and the failure reads "deadline".
    Every example is asked live, never from the judge cache: the gate vouches for the model
    that answers now, within this deadline (a dozen short calls), not for stored replies.
    """
    live = judge.uncached() if isinstance(judge, ModelJudge) else None
    judge = live or judge
    chosen = examples or load_calibration()
    limit = asyncio.Semaphore(concurrency)
    plan: list[tuple[Kind, Any]] = [("claim", e) for e in chosen.claims] + [("rubric", e) for e in chosen.rubric]
    tasks = [asyncio.ensure_future(_guarded(judge, kind, example, limit)) for kind, example in plan]
    started = time.monotonic()
    pending: set[asyncio.Future[ExampleResult]] = set(tasks)
    # Woken by each raised example (only INFRASTRUCTURE escapes _guarded): a refused key, a
    # judge that stays down or sends garbage ends the gate at once, not after every example
    # failed on it.
    while pending and not _unavailable(tasks):
        left = started + deadline_s - time.monotonic()
        if left <= 0:
            break
        _, pending = await asyncio.wait(pending, timeout=left, return_when=asyncio.FIRST_EXCEPTION)
    for task in pending:
        task.cancel()
    # Every outcome retrieved: none is left to asyncio's "Task exception was never retrieved".
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    refused = next((o for o in outcomes if isinstance(o, INFRASTRUCTURE)), None)
    if refused is not None:
        raise refused
    elapsed = time.monotonic() - started
    results = [_result(task, kind, example, deadline_s) for task, (kind, example) in zip(tasks, plan)]
    failure = None
    if pending:
        failure = f"deadline: {len(pending)} of {len(plan)} examples unanswered after {deadline_s:g}s"
    elif any(not result.passed for result in results):
        wrong = sum(not result.passed for result in results)
        failure = f"{wrong} of {len(plan)} examples wrong"
    return CalibrationReport(
        judge_model=judge.judge_model,
        judge_server=getattr(judge, "judge_server", None),
        passed=failure is None,
        deadline_s=deadline_s,
        elapsed_s=round(elapsed, 3),
        failure=failure,
        results=results,
        requests=live.spent.requests if live is not None else None,
    )


def _unavailable(tasks: Sequence[asyncio.Future[ExampleResult]]) -> bool:
    return any(t.done() and not t.cancelled() and isinstance(t.exception(), INFRASTRUCTURE)
               for t in tasks)


def _result(task: asyncio.Future[ExampleResult], kind: Kind, example: Any, deadline_s: float) -> ExampleResult:
    if task.cancelled():
        return ExampleResult(
            id=example.id, kind=kind, expected=_expected(kind, example), passed=False,
            error=f"deadline: not answered within {deadline_s:g}s",
        )
    return task.result()


class CalibratedJudge:
    """A judge that passed the calibration gate; it judges exactly like the judge it wraps."""

    def __init__(self, judge: Judge, report: CalibrationReport) -> None:
        if not report.passed:
            raise CalibrationFailed(report)
        self._judge = judge
        self.report = report

    @property
    def judge_model(self) -> str:
        return self._judge.judge_model

    @property
    def judge_server(self) -> str | None:
        return getattr(self._judge, "judge_server", None)

    @property
    def judge_temperature(self) -> float | None:
        """The temperature the wrapped judge samples at (None: provider default or unknown)."""
        value = getattr(self._judge, "judge_temperature", None)
        return float(value) if isinstance(value, (int, float)) else None

    async def judge(self, scenario: Any, transcript: Transcript, repeat: int = 0) -> Judgments:
        return await self._judge.judge(scenario, transcript, repeat)

    async def judge_claims(
        self, claims: Sequence[Any], answer: str, reference: str | None = None
    ) -> list[ClaimJudgment]:
        return await self._judge.judge_claims(claims, answer, reference)


async def calibrated(judge: Judge, deadline_s: float = DEFAULT_DEADLINE_S) -> CalibratedJudge:
    """Calibrate `judge` and return it gated, or raise CalibrationFailed with the report."""
    report = await calibrate(judge, deadline_s)
    return CalibratedJudge(judge, report)
