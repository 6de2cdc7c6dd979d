"""The OpenAI-compatible judge against a real local server (trialbox_llm on llama.cpp).

The bundled 135M model is far too small to judge well, so each test asks a question whose
outcome does not depend on how well it judges: a one-claim question the JSON-Schema grammar
forces into a valid shape (accepted), a reply cut short by max_tokens (rejected with JudgeError,
never trusted), and the calibration gate (which turns it away). Needs the model files from
`scripts/fetch-models` in .cache/models.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.conversation import LLMSimulator
from runner.judge import (
    CalibrationSet,
    JudgeCache,
    JudgeError,
    ModelJudge,
    OpenAIBackend,
    calibrate,
    load_calibration,
)
from runner.records.judgments import ClaimLabel
from runner.records.transcript import TurnPerformance, TurnRecord, UserMessage
from runner.scenarios import Scenario

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


# One claim: the request's schema (runner/judge/_replies.py `claims_schema`) then allows exactly
# one entry named `pump`, and llama.cpp turns it into a grammar, so whatever the small model
# thinks, its reply has the shape validation wants. These tests therefore expect one outcome.
ONE_CLAIM = [{"name": "pump", "claim": "The pump is running."}]


async def test_a_grammar_shaped_claim_label_from_the_small_model_is_accepted(judge_url: str, tmp_path: Path) -> None:
    judge = ModelJudge(OpenAIBackend(judge_url), JudgeCache(tmp_path))
    labels = await judge.judge_claims(ONE_CLAIM, "The pump is stopped; the valve is open.")
    [label] = labels
    assert label.name == "pump" and label.claim == "The pump is running."
    assert isinstance(label.label, ClaimLabel) and label.rationale.strip()
    assert judge.judge_model == "openai:SmolLM2-135M-Instruct-GGUF"


async def test_a_reply_cut_short_by_max_tokens_is_rejected_and_never_trusted(judge_url: str) -> None:
    """Eight tokens cannot hold the claims object, so both the reply and the corrected one are
    cut-off JSON: the judge says so with JudgeError instead of guessing a label."""
    judge = ModelJudge(OpenAIBackend(judge_url, max_tokens=8))
    with pytest.raises(JudgeError, match=r"(?s)claim_labels.*failed validation twice.*Last reply"):
        await judge.judge_claims(ONE_CLAIM, "The pump is stopped.")


async def test_turn_grades_cut_short_are_rejected_and_never_trusted(judge_url: str) -> None:
    example = load_calibration().rubric[0]
    judge = ModelJudge(OpenAIBackend(judge_url, max_tokens=8))
    with pytest.raises(JudgeError, match="failed validation twice"):
        await judge.judge(example.scenario, example.transcript)


async def test_a_second_identical_question_is_served_from_the_cache_of_the_same_server_only(
    judge_url: str, tmp_path: Path
) -> None:
    first = ModelJudge(OpenAIBackend(judge_url), JudgeCache(tmp_path))
    labels = await first.judge_claims(ONE_CLAIM, "The pump is running.")
    again = ModelJudge(OpenAIBackend(judge_url), JudgeCache(tmp_path))
    assert await again.judge_claims(ONE_CLAIM, "The pump is running.") == labels
    assert again.cache is not None and again.cache.hits == 1
    # The same model name at another address is another judge: it is asked, never the cache.
    from conftest import free_port

    elsewhere = ModelJudge(OpenAIBackend(f"http://127.0.0.1:{free_port()}", "SmolLM2-135M-Instruct-GGUF"),
                           JudgeCache(tmp_path))
    with pytest.raises(JudgeError, match="cannot connect"):
        await elsewhere.judge_claims(ONE_CLAIM, "The pump is running.")
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
    scenario = Scenario.model_validate({
        "id": "s", "category": "personality", "persona": "casual_user", "description": "Budget questions.",
        "turns": [{"turn": 1, "objective": "Ask for the travel total.", "user_message": "What is the travel total?"},
                  {"turn": 2, "objective": "Ask which department spends the most on travel."},
                  {"turn": 3, "objective": "x", "user_message": "Exactly these words."}],
    })
    unscripted, scripted = scenario.turns[1], scenario.turns[2]
    history = [TurnRecord(turn=1, user_message="What is the travel total?", answer="It is $412,000.",
                          performance=TurnPerformance(wall_s=1.0))]
    written = await simulator.user_message(scenario, unscripted, history)
    assert written.source == "simulated" and written.model == "SmolLM2-135M-Instruct-GGUF"
    assert written.text.strip() and not written.text.lower().startswith("user:")

    assert await simulator.user_message(scenario, scripted, history) == UserMessage(
        text="Exactly these words.", source="verbatim")
