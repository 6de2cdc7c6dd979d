"""The OpenAI-compatible judge against a real local server (trialbox_llm on llama.cpp).

The bundled 135M model is far too small to judge well: these tests check that whatever it answers
is validated (or rejected with JudgeError), never trusted, and that the calibration gate turns it
away. Needs the model files from `scripts/fetch-models` in .cache/models.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from runner.judge import (
    CalibrationSet,
    JudgeCache,
    JudgeError,
    ModelJudge,
    OpenAIBackend,
    calibrate,
    load_calibration,
)
from runner.judgments import DIMENSIONS, ClaimLabel
from runner.simulate import LLMSimulator
from runner.transcript import TurnPerformance, TurnRecord, UserMessage

pytestmark = [pytest.mark.integration, pytest.mark.anyio]



@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def judge_url(llm_url: str) -> str:
    """The shared llm-cpu server (tests/integration/conftest.py), as an OpenAI-compatible base."""
    return f"{llm_url}/api/v1"


def _goa_only() -> CalibrationSet:
    examples = load_calibration()
    return CalibrationSet(claims=[e for e in examples.claims if e.source == "goa-ai"], rubric=[])


async def test_claim_labels_from_the_small_model_are_validated_or_rejected(judge_url: str, tmp_path: Path) -> None:
    judge = ModelJudge(OpenAIBackend(judge_url), JudgeCache(tmp_path))
    claims = [{"name": "pump", "claim": "The pump is running."},
              {"name": "valve", "claim": "The valve is open."}]
    try:
        labels = await judge.judge_claims(claims, "The pump is stopped; the valve is open.")
    except JudgeError as error:
        assert "failed validation twice" in str(error)  # rejected: fine, and said plainly
        return
    assert [label.name for label in labels] == ["pump", "valve"]
    assert all(isinstance(label.label, ClaimLabel) and label.rationale for label in labels)
    assert judge.judge_model == "openai:SmolLM2-135M-Instruct-GGUF"


async def test_turn_grades_from_the_small_model_are_validated_or_rejected(judge_url: str) -> None:
    example = load_calibration().rubric[0]
    judge = ModelJudge(OpenAIBackend(judge_url, max_tokens=400))
    try:
        judgments = await judge.judge(example.scenario, example.transcript)
    except JudgeError as error:
        assert "failed validation twice" in str(error)
        return
    scores = judgments.turns[0].scores.model_dump()
    assert set(scores) == set(DIMENSIONS) and all(0 <= value <= 10 for value in scores.values())
    assert judgments.verdict is not None and judgments.verdict.verdict in ("PASS", "FAIL", "BLOCKED_BY_ARCHITECTURE")
    assert judgments.usage.requests >= 2 and judgments.usage.input_tokens > 0


async def test_a_second_identical_question_is_served_from_the_cache_of_the_same_server_only(
    judge_url: str, tmp_path: Path
) -> None:
    claims = [{"name": "claim", "claim": "The pump is running."}]
    first = ModelJudge(OpenAIBackend(judge_url), JudgeCache(tmp_path))
    try:
        labels = await first.judge_claims(claims, "The pump is running.")
    except JudgeError:
        labels = None  # rejected twice: nothing valid was stored, so the next call asks again
    again = ModelJudge(OpenAIBackend(judge_url), JudgeCache(tmp_path))
    if labels is not None:
        assert await again.judge_claims(claims, "The pump is running.") == labels
        assert again.cache is not None and again.cache.hits == 1
    # The same model name at another address is another judge: it is asked, never the cache.
    from conftest import free_port

    elsewhere = ModelJudge(OpenAIBackend(f"http://127.0.0.1:{free_port()}", "SmolLM2-135M-Instruct-GGUF"),
                           JudgeCache(tmp_path))
    with pytest.raises(JudgeError, match="cannot connect"):
        await elsewhere.judge_claims(claims, "The pump is running.")
    assert elsewhere.cache is not None and elsewhere.cache.hits == 0


async def test_the_small_model_fails_calibration(judge_url: str) -> None:
    """Measured: SmolLM2-135M labels (almost) everything `contradicted`; the gate must refuse it."""
    report = await calibrate(ModelJudge(OpenAIBackend(judge_url)), deadline_s=90, examples=_goa_only())
    print(report)
    assert not report.passed
    assert report.misses and all(r.got in {label.value for label in ClaimLabel} or r.error for r in report.misses)


async def test_a_judge_url_that_refuses_connections_is_one_clear_error() -> None:
    from conftest import free_port

    port = free_port()  # bound and released: nothing listens there now
    judge = ModelJudge(OpenAIBackend(f"http://127.0.0.1:{port}", "any-model"))
    with pytest.raises(JudgeError, match=rf"cannot connect to http://127.0.0.1:{port}/v1/models"):
        await judge.judge_claims([{"name": "c", "claim": "x"}], "an answer")


async def test_llm_simulator_writes_a_message_and_keeps_scripted_turns_verbatim(judge_url: str) -> None:
    simulator = LLMSimulator("openai", url=judge_url)
    scenario: Any = type("S", (), {"id": "s", "persona": "casual_user", "description": "Budget questions."})()
    unscripted: Any = type("T", (), {"turn": 2, "objective": "Ask which department spends the most on travel.",
                                     "user_message": None})()
    history = [TurnRecord(turn=1, user_message="What is the travel total?", answer="It is $412,000.",
                          performance=TurnPerformance(wall_s=1.0))]
    written = await simulator.user_message(scenario, unscripted, history)
    assert written.source == "simulated" and written.model == "SmolLM2-135M-Instruct-GGUF"
    assert written.text.strip() and not written.text.lower().startswith("user:")

    scripted: Any = type("T", (), {"turn": 3, "objective": "x", "user_message": "Exactly these words."})()
    assert await simulator.user_message(scenario, scripted, history) == UserMessage(
        text="Exactly these words.", source="verbatim")


if os.environ.get("TRIALBOX_SKIP_LOCAL_LLM"):
    pytestmark.append(pytest.mark.skip(reason="TRIALBOX_SKIP_LOCAL_LLM is set"))
