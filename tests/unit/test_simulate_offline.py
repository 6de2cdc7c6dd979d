"""The offline user (LocalSimulator): verbatim, else the question quoted in the objective, else a
local model — and a distinct SimulatorUnavailable when a turn needs a model and none answers.

The model path against the real llm-cpu server is in tests/integration/test_simulator_local.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.conversation import (
    LocalSimulator,
    ScriptedSimulator,
    SimulatorConfig,
    SimulatorError,
    SimulatorUnavailable,
    make_simulator,
    preflight,
)
from runner.conversation.simulate import turns_needing_model
from runner.conversation.user_words import quoted_question
from runner.records.transcript import UserMessage
from runner.scenarios import Scenario

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize(("objective", "question"), [
    ("Ask 'What is the total approved budget for 2025?'", "What is the total approved budget for 2025?"),
    ('Ask "How many sensors reported at noon?"', "How many sensors reported at noon?"),
    ("Ask “Which supplier delivers the rye flour?” and wait.", "Which supplier delivers the rye flour?"),
    ("Ask ‘What’s the flour stock on Monday?’", "What’s the flour stock on Monday?"),
    ("Follow up on the club's ride: ask 'Who leads the Saturday ride?'", "Who leads the Saturday ride?"),
    ("Ask 'What is the company's headcount?' without naming the file", "What is the company's headcount?"),
    ("Say 'Summarize the newsletter in two sentences'", "Summarize the newsletter in two sentences"),
    ("Ask 'What is the noon reading?' — the user calls it the 'midday value'", "What is the noon reading?"),
    ('Ask "What is the total?" (repeat: "What is the total?")', "What is the total?"),
])
def test_the_one_quoted_question_is_extracted(objective: str, question: str) -> None:
    assert quoted_question(objective) == question


@pytest.mark.parametrize("objective", [
    "Ask whether the allocation grew compared with last year.",
    "Ask about the 'Q3 totals' line of the report.",
    "Ask 'What is the 2025 total?' and then 'Which department spent the most?'",
    "Ask 'Why?'",
    "Ask about the bakery's opening hours",
    "",
    None,
])
def test_no_quoted_question_or_an_ambiguous_pair_gives_none(objective: str | None) -> None:
    assert quoted_question(objective) is None


SCENARIO = Scenario.model_validate({
    "id": "greenhouse_noon",
    "category": "rag_quality",
    "persona": "power_user",
    "description": "A grower checks the greenhouse sensor log.",
    "turns": [
        {"turn": 1, "objective": "Ask 'What was the humidity at noon?'",
         "user_message": "humidity @ noon?", "ground_truth": {"expected_answer": "61%"}},
        {"turn": 2, "objective": "Ask 'Which sensor reported the highest temperature?'",
         "ground_truth": {"expected_answer": "S-4"}},
        {"turn": 3, "objective": "Ask whether any sensor stopped reporting.",
         "success_criteria": "Names the sensor with the gap."},
    ],
})


async def test_the_authors_user_message_wins_even_over_a_quoted_question() -> None:
    sent = await LocalSimulator(None).user_message(SCENARIO, SCENARIO.turns[0], [])
    assert sent == UserMessage(text="humidity @ noon?", source="verbatim")


async def test_the_quoted_question_is_sent_without_any_model() -> None:
    # No server URL at all: extraction needs none, so nothing is skipped.
    sent = await LocalSimulator(None).user_message(SCENARIO, SCENARIO.turns[1], [])
    assert sent == UserMessage(text="Which sensor reported the highest temperature?", source="extracted")


async def test_a_turn_that_needs_a_model_without_a_server_url_is_unavailable() -> None:
    with pytest.raises(SimulatorUnavailable, match=r"scenario greenhouse_noon: turn 3 .*no LLM server URL"):
        await LocalSimulator(None).user_message(SCENARIO, SCENARIO.turns[2], [])


async def test_a_server_that_refuses_connections_is_unavailable_not_a_crash() -> None:
    from socket import socket

    with socket() as probe:  # bound and released: nothing listens there now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    simulator = LocalSimulator(f"http://127.0.0.1:{port}/api/v1")
    with pytest.raises(SimulatorUnavailable, match=rf"cannot connect to http://127.0.0.1:{port}/api/v1/models"):
        await simulator.user_message(SCENARIO, SCENARIO.turns[2], [])
    named = LocalSimulator(f"http://127.0.0.1:{port}", model="SmolLM2-135M-Instruct-GGUF")
    with pytest.raises(SimulatorUnavailable, match=rf"cannot connect to http://127.0.0.1:{port}/v1/models"):
        await named.user_message(SCENARIO, SCENARIO.turns[2], [])


async def test_scripted_still_refuses_an_unscripted_turn_with_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SimulatorError, match="turn 2 has no user_message") as raised:
        await ScriptedSimulator().user_message(SCENARIO, SCENARIO.turns[1], [])
    assert type(raised.value) is SimulatorError
    assert "--simulator local" in str(raised.value)


@pytest.mark.parametrize(("config", "kind"), [
    (SimulatorConfig(provider="local", url="http://127.0.0.1:13305/api/v1"), LocalSimulator),
    (SimulatorConfig(provider="local"), LocalSimulator),
    (SimulatorConfig(provider="scripted"), ScriptedSimulator),
])
def test_make_simulator_builds_the_configured_kind(config: SimulatorConfig, kind: Any) -> None:
    simulator = make_simulator(config)
    assert isinstance(simulator, kind)


def test_a_local_simulator_talks_to_the_api_base_of_the_url_it_is_given() -> None:
    simulator = make_simulator(SimulatorConfig(provider="local", url="http://127.0.0.1:13305/api/v1", model="m"))
    assert isinstance(simulator, LocalSimulator) and simulator.model == "m"
    assert simulator._chat is not None and simulator._chat.base == "http://127.0.0.1:13305/api/v1"
    origin = LocalSimulator("http://127.0.0.1:13305")
    assert origin._chat is not None and origin._chat.base == "http://127.0.0.1:13305/v1"


def test_turns_needing_a_model_are_those_neither_written_nor_quoted() -> None:
    assert turns_needing_model(SCENARIO) == [3]


async def test_preflight_stops_a_scripted_run_before_any_sandbox_starts() -> None:
    with pytest.raises(SimulatorError, match="turn 2 has no user_message"):
        await preflight(ScriptedSimulator(), SCENARIO)
    scripted_only = Scenario.model_validate({**SCENARIO.model_dump(mode="json"), "turns": [
        SCENARIO.turns[0].model_dump(mode="json", exclude_none=True)]})
    await preflight(ScriptedSimulator(), scripted_only)  # nothing to complain about


async def test_preflight_reports_a_missing_model_as_unavailable_naming_the_turns() -> None:
    with pytest.raises(SimulatorUnavailable, match=r"scenario greenhouse_noon: turn\(s\) 3 have no user_message"):
        await preflight(LocalSimulator(None), SCENARIO)
    two_turns = Scenario.model_validate({**SCENARIO.model_dump(mode="json"), "turns": [
        t.model_dump(mode="json", exclude_none=True) for t in SCENARIO.turns[:2]]})
    await preflight(LocalSimulator(None), two_turns)  # verbatim + quoted: no model needed
