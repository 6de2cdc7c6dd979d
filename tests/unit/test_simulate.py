"""User simulators: scripted turns verbatim, LLM turns from objective and persona, never the truth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from runner.conversation import (
    LLMSimulator,
    ScriptedSimulator,
    SimulatorError,
    SimulatorUnavailable,
    situation,
)
from runner.conversation.user_words import clean_message
from runner.records.transcript import TurnPerformance, TurnRecord, UserMessage
from runner.scenarios import Scenario

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


SCENARIO = Scenario.model_validate({
    "id": "budget_followup",
    "name": "Budget follow-up",
    "category": "context_retention",
    "description": "The user asks about the travel budget, then follows up.",
    "persona": "data_analyst",
    "turns": [
        {"turn": 1, "objective": "Ask for the 2026 travel total.", "user_message": "What is the 2026 travel total?",
         "ground_truth": {"doc_id": "acme_budget_2026", "fact_id": "travel_total", "expected_answer": "$412,000"}},
        {"turn": 2, "objective": "Ask how that compares to 2025.",
         "ground_truth": {"doc_id": "acme_budget_2026", "fact_id": "travel_2025", "expected_answer": "SECRET-TRUTH-377"},
         "success_criteria": "MUST-NOT-LEAK criteria"},
    ],
    "expected_outcome": "Answers both from the document.",
})
HISTORY = [TurnRecord(turn=1, user_message="What is the 2026 travel total?", answer="It is $412,000.",
                      performance=TurnPerformance(wall_s=1.0))]


async def test_scripted_simulator_sends_the_user_message_verbatim() -> None:
    sent = await ScriptedSimulator().user_message(SCENARIO, SCENARIO.turns[0], [])
    assert sent == UserMessage(text="What is the 2026 travel total?", source="verbatim", model=None)


async def test_scripted_turn_without_message_names_the_file_and_turn(tmp_path: Path) -> None:
    with pytest.raises(SimulatorError, match=r"scenario budget_followup: turn 2 has no user_message.*--simulator") as raised:
        await ScriptedSimulator().user_message(SCENARIO, SCENARIO.turns[1], HISTORY)
    # A scripted run asked for no model: a missing message is the author's to fix, not a skip.
    assert not isinstance(raised.value, SimulatorUnavailable)

    class FromFile:
        source_file = tmp_path / "eval/scenarios/context_retention/budget_followup.yaml"
        id = "budget_followup"

    with pytest.raises(SimulatorError, match=r"budget_followup.yaml: turn 2 has no user_message"):
        await ScriptedSimulator().user_message(FromFile(), SCENARIO.turns[1], HISTORY)


def test_the_llm_user_sees_objective_persona_and_history_but_never_the_ground_truth() -> None:
    text = situation(SCENARIO, SCENARIO.turns[1], HISTORY)
    assert "Ask how that compares to 2025." in text and "data_analyst" in text
    assert "It is $412,000." in text
    assert "SECRET-TRUTH-377" not in text and "MUST-NOT-LEAK" not in text and "travel_2025" not in text


class FakeAnthropic:
    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        return httpx2.Response(200, json={
            "id": "msg_01", "type": "message", "role": "assistant", "model": body["model"],
            "content": [{"type": "text", "text": self.reply}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 300, "output_tokens": 20},
        })


async def test_llm_simulator_writes_unscripted_turns_and_sends_scripted_ones_verbatim(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    api = FakeAnthropic('User: "And how does that compare with 2025?"')
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(api))
    simulator = LLMSimulator("anthropic", anthropic_http_client=client)

    scripted = await simulator.user_message(SCENARIO, SCENARIO.turns[0], [])
    assert scripted == UserMessage(text="What is the 2026 travel total?", source="verbatim")
    assert api.bodies == []  # a scripted turn never reaches the model
    written = await simulator.user_message(SCENARIO, SCENARIO.turns[1], HISTORY)
    assert written == UserMessage(text="And how does that compare with 2025?", source="simulated",
                                  model="claude-sonnet-4-6")
    sent = json.dumps(api.bodies[0])
    assert "Ask how that compares to 2025." in sent and "SECRET-TRUTH-377" not in sent
    assert api.bodies[0]["model"] == "claude-sonnet-4-6"


async def test_llm_simulator_refuses_an_unreachable_server_with_one_clear_error() -> None:
    simulator = LLMSimulator("openai", model="m", url="http://127.0.0.1:9")
    with pytest.raises(SimulatorUnavailable, match="cannot connect to http://127.0.0.1:9/v1/chat/completions"):
        await simulator.user_message(SCENARIO, SCENARIO.turns[1], HISTORY)


def test_llm_simulator_configuration_errors() -> None:
    with pytest.raises(SimulatorError, match="needs a URL"):
        LLMSimulator("openai")


@pytest.mark.parametrize(("raw", "clean"), [
    ("User: hi there", "hi there"), ('"quoted"', "quoted"), ("  plain  ", "plain"), ("'it's'", "it's"),
    ('"Who leads it?"\n\nObjective for this message: Ask who leads.\nWrite the user\'s message now.',
     "Who leads it?"),
])
def test_clean_message(raw: str, clean: str) -> None:
    assert clean_message(raw) == clean
