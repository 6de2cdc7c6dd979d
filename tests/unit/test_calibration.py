"""The calibration gate, with judge doubles whose behaviour we control exactly."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from runner.judge import (
    CalibratedJudge,
    CalibrationFailed,
    JudgeError,
    calibrate,
    calibrated,
    load_calibration,
)
from runner.records.judgments import (
    ClaimJudgment,
    ClaimLabel,
    DimensionScores,
    Judgments,
    ScenarioVerdict,
    TurnJudgment,
)
from runner.records.transcript import Transcript

pytestmark = pytest.mark.anyio
EXAMPLES = load_calibration()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class ExampleJudge:
    """Knows the right answer to every calibration example; `label_for` may distort it."""

    judge_model = "double:example-judge"

    def __init__(self, label_for: Any = None, scores_for: Any = None) -> None:
        self.truth = {(e.answer, e.claim): e.label for e in EXAMPLES.claims}
        self.label_for = label_for or (lambda right: right)
        self.scores_for = scores_for or _centre_of_bands

    async def judge_claims(self, claims: Sequence[Any], answer: str, reference: str | None = None) -> list[ClaimJudgment]:
        return [
            ClaimJudgment(name=c["name"], claim=c["claim"], label=self.label_for(self.truth[(answer, c["claim"])]),
                          rationale="double")
            for c in claims
        ]

    async def judge(self, scenario: Any, transcript: Transcript, repeat: int = 0) -> Judgments:
        example = next(e for e in EXAMPLES.rubric if e.scenario.id == scenario.id)
        scores = self.scores_for(example)
        return Judgments(
            judge_model=self.judge_model,
            turns=[TurnJudgment(turn=1, scores=DimensionScores(**scores), reasoning="double")],
            verdict=ScenarioVerdict(verdict="PASS"),
        )


def _centre_of_bands(example: Any) -> dict[str, float]:
    scores = dict.fromkeys(DimensionScores.model_fields, 5.0)
    for name, band in example.bands.items():
        scores[name] = (band.min + band.max) / 2
    return scores


def test_calibration_set_has_at_least_two_examples_per_label_and_goa_ai_facts() -> None:
    for label in ClaimLabel:
        assert sum(e.label == label for e in EXAMPLES.claims) >= 2, label
    goa = {(e.answer, e.label) for e in EXAMPLES.claims if e.source == "goa-ai"}
    assert ("The pump is running.", ClaimLabel.ENTAILED) in goa
    assert ("The pump is stopped.", ClaimLabel.CONTRADICTED) in goa
    assert ("The valve is open.", ClaimLabel.NOT_ADDRESSED) in goa
    assert len(goa) == 4
    assert {e.id for e in EXAMPLES.rubric} == {
        "excellent_grounded_answer", "hallucinated_number", "wrong_tool_web_instead_of_document"}


async def test_a_correct_judge_passes() -> None:
    report = await calibrate(ExampleJudge(), deadline_s=10)
    assert report.passed, str(report)
    assert report.failure is None and len(report.results) == len(EXAMPLES.claims) + len(EXAMPLES.rubric)
    gated = await calibrated(ExampleJudge(), deadline_s=10)
    assert isinstance(gated, CalibratedJudge) and gated.report.passed


async def test_a_judge_that_says_entailed_to_everything_fails_and_the_report_lists_its_misses() -> None:
    report = await calibrate(ExampleJudge(label_for=lambda right: ClaimLabel.ENTAILED), deadline_s=10)
    assert not report.passed
    missed = {r.id for r in report.misses}
    assert missed == {e.id for e in EXAMPLES.claims if e.label != ClaimLabel.ENTAILED}
    assert "pump_stopped_contradicted: expected contradicted, got entailed" in str(report)
    with pytest.raises(CalibrationFailed, match="examples wrong"):
        await calibrated(ExampleJudge(label_for=lambda right: ClaimLabel.ENTAILED), deadline_s=10)


async def test_a_judge_that_swaps_two_labels_fails() -> None:
    swap = {ClaimLabel.NOT_ADDRESSED: ClaimLabel.INDETERMINATE, ClaimLabel.INDETERMINATE: ClaimLabel.NOT_ADDRESSED}
    report = await calibrate(ExampleJudge(label_for=lambda right: swap.get(right, right)), deadline_s=10)
    assert not report.passed
    assert {r.expected for r in report.misses} == {"not_addressed", "indeterminate"}
    assert report.failure == f"{len(report.misses)} of {len(report.results)} examples wrong"


async def test_a_judge_that_rewards_a_hallucinated_number_fails() -> None:
    def lenient(example: Any) -> dict[str, float]:
        return dict.fromkeys(DimensionScores.model_fields, 9.0)

    report = await calibrate(ExampleJudge(scores_for=lenient), deadline_s=10)
    assert {r.id for r in report.misses} == {"hallucinated_number", "wrong_tool_web_instead_of_document"}
    assert "correctness=9" in str(report)


async def test_a_stalling_judge_hits_the_deadline() -> None:
    class Stalling(ExampleJudge):
        async def judge_claims(self, claims: Sequence[Any], answer: str, reference: str | None = None) -> list[ClaimJudgment]:
            await asyncio.sleep(3600)
            raise AssertionError("unreachable")

    report = await calibrate(Stalling(), deadline_s=0.2)
    assert not report.passed and report.failure is not None and report.failure.startswith("deadline")
    assert any(r.error and r.error.startswith("deadline") for r in report.results)
    with pytest.raises(CalibrationFailed, match="deadline"):
        await calibrated(Stalling(), deadline_s=0.2)


async def test_a_judge_error_on_one_example_is_a_miss_named_in_the_report() -> None:
    class Flaky(ExampleJudge):
        async def judge_claims(self, claims: Sequence[Any], answer: str, reference: str | None = None) -> list[ClaimJudgment]:
            if answer == "The valve is open.":
                raise JudgeError("reply failed validation twice")
            return await super().judge_claims(claims, answer, reference)

    report = await calibrate(Flaky(), deadline_s=10)
    assert [r.id for r in report.misses] == ["valve_open_not_addressed"]
    assert "reply failed validation twice" in str(report)


def test_a_failing_report_cannot_be_wrapped_into_a_calibrated_judge() -> None:
    report = asyncio.run(calibrate(ExampleJudge(label_for=lambda right: ClaimLabel.CONTRADICTED), deadline_s=10))
    with pytest.raises(CalibrationFailed):
        CalibratedJudge(ExampleJudge(), report)


def test_a_bad_calibration_file_names_the_file_and_field(tmp_path: Path) -> None:
    (tmp_path / "claims.yaml").write_text(
        "examples:\n  - {id: x, source: trialbox, answer: a, claim: b, label: maybe}\n")
    (tmp_path / "rubric.yaml").write_text("examples: []\n")
    with pytest.raises(JudgeError, match=r"(?s)claims.yaml: invalid calibration file.*label"):
        load_calibration(tmp_path)
