"""The offline user against the real llm-cpu server (SmolLM2-135M on llama.cpp): a turn with no
user_message and no quoted question is written by the model the agent uses, and the message says
which model wrote it. A server with no chat model is SimulatorUnavailable, never a crash.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from runner.conversation import LocalSimulator, SimulatorUnavailable, make_simulator
from runner.judge import from_env_and_flags
from runner.records.transcript import TurnPerformance, TurnRecord, UserMessage
from runner.scenarios import Scenario

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def api_url(llm_url: str) -> str:
    """The shared llm-cpu server (tests/integration/conftest.py) as the run passes it."""
    return f"{llm_url}/api/v1"


SCENARIO = Scenario.model_validate({
    "id": "cycling_club_followup",
    "category": "context_retention",
    "persona": "casual_user",
    "description": "A club member asks about the Ridgeline cycling newsletter.",
    "turns": [
        {"turn": 1, "objective": "Ask 'When does the spring century ride start?'",
         "ground_truth": {"expected_answer": "7:30 am"}},
        {"turn": 2, "objective": "Ask who is leading that ride, referring back to it.",
         "ground_truth": {"expected_answer": "SECRET-LEADER-9"}, "success_criteria": "MUST-NOT-LEAK"},
    ],
})
HISTORY = [TurnRecord(turn=1, user_message="When does the spring century ride start?",
                      answer="It starts at 7:30 am from the town square.",
                      performance=TurnPerformance(wall_s=1.2), user_message_source="extracted")]


def served_chat_models(api_url: str) -> set[str]:
    listing = httpx.get(f"{api_url}/models", timeout=10).json()["data"]
    return {entry["id"] for entry in listing if entry.get("type") != "embedding"}


async def test_the_local_model_writes_an_unscripted_turn_and_is_named(api_url: str) -> None:
    simulator = LocalSimulator(api_url)
    message = await simulator.user_message(SCENARIO, SCENARIO.turns[1], HISTORY)
    print(f"simulated user ({message.model}): {message.text!r}")
    assert message.source == "simulated" and message.text.strip()
    assert not message.text.lower().startswith("user:")
    assert "SECRET-LEADER-9" not in message.text and "MUST-NOT-LEAK" not in message.text
    # The model is what the server says served the reply, and the server lists it.
    assert message.model in served_chat_models(api_url)
    assert message.model == "SmolLM2-135M-Instruct-GGUF"


async def test_the_automatic_choice_on_a_fresh_machine_runs_a_gaia_tree_offline(api_url: str) -> None:
    choices = from_env_and_flags({}, llm_url=api_url)
    assert choices.judge.provider == "none" and choices.simulator.provider == "local"
    simulator = make_simulator(choices.simulator)
    first = await simulator.user_message(SCENARIO, SCENARIO.turns[0], [])
    assert first == UserMessage(text="When does the spring century ride start?", source="extracted")
    second = await simulator.user_message(SCENARIO, SCENARIO.turns[1], HISTORY)
    assert second.source == "simulated" and second.model == "SmolLM2-135M-Instruct-GGUF"


async def test_an_alias_is_reported_as_the_model_that_really_served(api_url: str) -> None:
    """llm-cpu serves GAIA's default model name as an alias of SmolLM2 and says so in /models."""
    simulator = LocalSimulator(api_url, model="Gemma-4-E4B-it-GGUF")
    message = await simulator.user_message(SCENARIO, SCENARIO.turns[1], HISTORY)
    assert message.source == "simulated" and message.model == "SmolLM2-135M-Instruct-GGUF"


async def test_a_model_the_server_does_not_have_is_unavailable(api_url: str) -> None:
    simulator = LocalSimulator(api_url, model="no-such-model-GGUF")
    with pytest.raises(SimulatorUnavailable, match="has no model 'no-such-model-GGUF'"):
        await simulator.user_message(SCENARIO, SCENARIO.turns[1], HISTORY)


class _EmbeddingsOnly(BaseHTTPRequestHandler):
    """An OpenAI-compatible server that serves only an embedding model (no /health route)."""

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass

    def do_GET(self) -> None:
        body: dict[str, Any]
        if self.path == "/v1/models":
            status, body = 200, {"object": "list", "data": [
                {"id": "all-MiniLM-L6-v2-GGUF", "object": "model", "type": "embedding",
                 "labels": ["embeddings"], "owned_by": "llamacpp"}]}
        else:
            status, body = 404, {"error": {"code": 404, "message": "File Not Found"}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def embeddings_only() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EmbeddingsOnly)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


async def test_a_server_with_no_chat_model_is_unavailable_but_quoted_questions_still_go(
    embeddings_only: str,
) -> None:
    simulator = LocalSimulator(embeddings_only)
    with pytest.raises(SimulatorUnavailable, match=r"lists no chat model \(\['all-MiniLM-L6-v2-GGUF'\]\)"):
        await simulator.user_message(SCENARIO, SCENARIO.turns[1], HISTORY)
    extracted = await simulator.user_message(SCENARIO, SCENARIO.turns[0], [])
    assert extracted.source == "extracted"
