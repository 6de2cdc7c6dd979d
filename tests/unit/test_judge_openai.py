"""The OpenAI-compatible backend's request and URL handling (the real server is exercised in
tests/integration/test_judge_openai_local.py)."""

from __future__ import annotations

import pytest

from runner.judge import OpenAIBackend, StructuredRequest
from runner.judge._openai import api_base
from runner.judge._replies import claims_schema


@pytest.mark.parametrize(("typed", "base"), [
    ("http://127.0.0.1:13305", "http://127.0.0.1:13305/v1"),
    ("http://127.0.0.1:13305/", "http://127.0.0.1:13305/v1"),
    ("http://llm:13305/api/v1", "http://llm:13305/api/v1"),
    ("http://llm:8000/v1/chat/completions", "http://llm:8000/v1"),
])
def test_api_base_from_what_a_user_types(typed: str, base: str) -> None:
    assert api_base(typed) == base


def test_request_carries_the_schema_as_response_format_at_temperature_zero() -> None:
    backend = OpenAIBackend("http://llm:13305/api/v1", "SmolLM2-135M-Instruct-GGUF")
    schema = claims_schema(["total"])
    request = StructuredRequest("RUBRIC", [{"role": "user", "content": "CASE"}], "claim_labels", schema)
    body = backend.request_body(request)
    assert body["model"] == "SmolLM2-135M-Instruct-GGUF"
    assert body["temperature"] == 0 and body["stream"] is False
    assert body["messages"] == [{"role": "system", "content": "RUBRIC"}, {"role": "user", "content": "CASE"}]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "claim_labels", "schema": schema, "strict": True},
    }
    # The grammar only lets the model name the request's claims, once each.
    claims = schema["properties"]["claims"]
    assert claims["items"]["properties"]["name"]["enum"] == ["total"]
    assert claims["minItems"] == claims["maxItems"] == 1
