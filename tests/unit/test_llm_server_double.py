"""`python -m trialbox_llm --double`: the real routes over instant stand-in models, named as a
double everywhere a report could read a model's name."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from trialbox_llm.__main__ import parse_args
from trialbox_llm.catalog import MINILM, SMOLLM2
from trialbox_llm.double import DOUBLE_NAME, EMBEDDING_DIMENSIONS, FIXED_ANSWER, DoubleBackend
from trialbox_llm.routes import build_app
from trialbox_llm.server import ServeOptions, build_state


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    # An empty models folder: the double must neither need nor read model files.
    state = build_state(ServeOptions("127.0.0.1", 0, tmp_path, threads=1, double=True))
    assert isinstance(state.backend, DoubleBackend)
    with TestClient(build_app(state, on_shutdown=state.backend.close)) as test_client:
        yield test_client


def test_the_flag_selects_the_double() -> None:
    assert parse_args(["--double"]).double is True
    assert parse_args([]).double is False


def test_health_names_the_double_and_never_a_model(client: TestClient) -> None:
    body = client.get("/api/v1/health").json()
    assert f"+{DOUBLE_NAME}." in body["version"]
    assert body["version"].startswith("2026.")  # GAIA still parses the API level
    served = [entry["served_model"] for entry in body["all_models_loaded"]]
    assert len(served) == 2 and all(name.startswith(DOUBLE_NAME) for name in served)
    models = client.get("/api/v1/models").json()["data"]
    assert models and all(m["served_model"].startswith(DOUBLE_NAME) and m["downloaded"]
                          for m in models)
    info = client.get("/api/v1/system-info").json()
    assert "NOT A MODEL" in json.dumps(info)


def test_chat_answers_the_fixed_text_at_once(client: TestClient) -> None:
    request = {"model": SMOLLM2.aliases[0], "messages": [{"role": "user", "content": "hi there"}]}
    body = client.post("/api/v1/chat/completions", json=request).json()
    assert body["choices"][0]["message"]["content"] == FIXED_ANSWER
    assert body["usage"]["prompt_tokens"] == 2
    stats = client.get("/api/v1/stats").json()
    assert stats["output_tokens"] == body["usage"]["completion_tokens"]


def test_streamed_chat_carries_the_fixed_text_and_ends(client: TestClient) -> None:
    request = {"model": SMOLLM2.aliases[0], "stream": True,
               "messages": [{"role": "user", "content": "hi"}]}
    with client.stream("POST", "/api/v1/chat/completions", json=request) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    text = "".join(json.loads(line[6:])["choices"][0]["delta"].get("content", "")
                   for line in lines[:-1])
    assert text == FIXED_ANSWER


def test_embeddings_are_fixed_vectors_of_the_embedders_width(client: TestClient) -> None:
    request = {"model": MINILM.aliases[0], "input": ["one text", "another text here"]}
    data = client.post("/api/v1/embeddings", json=request).json()["data"]
    assert [len(item["embedding"]) for item in data] == [EMBEDDING_DIMENSIONS] * 2
