"""The optional TRIALBOX_LLM_FORCE_TOOL switch: which calls it takes over and what it returns."""

import json

from trialbox_llm.force_tool import ForceTool, from_environment

PARAMS = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "query_documents",
            "description": "Search docs.",
            "parameters": PARAMS,
        },
    },
    {"type": "function", "function": {"name": "list_files", "parameters": {}}},
]
FORCE = ForceTool("query_documents")
UPSTREAM = {
    "id": "chatcmpl-1",
    "created": 1,
    "model": "SmolLM2-135M-Instruct-GGUF",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": '{"query": "budget"}'},
        }
    ],
    "usage": {"prompt_tokens": 50, "completion_tokens": 6},
    "timings": {"prompt_ms": 10},
}


def request(messages, tools=TOOLS, **extra):
    return {"model": "m", "messages": messages, "tools": tools, "tool_choice": "auto", **extra}


def test_switch_is_off_without_the_variable():
    assert from_environment({}) is None
    assert from_environment({"TRIALBOX_LLM_FORCE_TOOL": "  "}) is None
    assert from_environment({"TRIALBOX_LLM_FORCE_TOOL": "query_documents"}) == FORCE


def test_applies_only_to_the_first_call_of_a_turn_that_offers_the_tool():
    assert FORCE.applies_to(request([{"role": "user", "content": "budget?"}]))
    after_tool = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "1", "content": "result"},
    ]
    assert not FORCE.applies_to(request(after_tool))
    assert not ForceTool("search_web").applies_to(request([{"role": "user", "content": "hi"}]))
    assert not FORCE.applies_to({"model": "m", "messages": [{"role": "user", "content": "hi"}]})


def test_upstream_request_asks_for_the_tools_arguments_under_its_schema():
    body = request([{"role": "user", "content": "budget?"}], stream=True)
    sent = FORCE.arguments_request(body)
    assert "tools" not in sent and "tool_choice" not in sent and "stream" not in sent
    assert sent["response_format"]["json_schema"]["schema"] == PARAMS
    assert sent["messages"][:-1] == body["messages"]
    assert "query_documents" in sent["messages"][-1]["content"]
    assert body["tool_choice"] == "auto" and "response_format" not in body  # caller's copy intact


def test_completion_is_an_assistant_tool_call_carrying_the_models_json():
    response = FORCE.completion(UPSTREAM)
    choice = response["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    call = choice["message"]["tool_calls"][0]
    assert call["function"] == {"name": "query_documents", "arguments": '{"query": "budget"}'}
    assert call["id"].startswith("call_")
    assert response["usage"] == UPSTREAM["usage"] and response["timings"] == UPSTREAM["timings"]


def test_stream_events_carry_the_call_then_finish_then_done():
    events = FORCE.stream_events(UPSTREAM)
    assert events[-1] == "data: [DONE]\n\n"
    first, last = (json.loads(e[len("data: ") :]) for e in events[:2])
    delta = first["choices"][0]["delta"]
    assert delta["tool_calls"][0]["function"]["name"] == "query_documents"
    assert delta["tool_calls"][0]["index"] == 0
    assert last["choices"][0]["finish_reason"] == "tool_calls"
    assert last["timings"] == UPSTREAM["timings"]
