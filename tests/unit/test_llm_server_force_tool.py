"""The optional TRIALBOX_LLM_FORCE_TOOL switch rewrites requests, and only the right ones."""

from runner.llm_server.force_tool import ForceTool, from_environment

TOOLS = [
    {"type": "function", "function": {"name": "query_documents", "parameters": {}}},
    {"type": "function", "function": {"name": "list_files", "parameters": {}}},
]


def request(messages, tools=TOOLS, **extra):
    return {"model": "m", "messages": messages, "tools": tools, "tool_choice": "auto", **extra}


def test_switch_is_off_without_the_variable():
    assert from_environment({}) is None
    assert from_environment({"TRIALBOX_LLM_FORCE_TOOL": "  "}) is None
    assert from_environment({"TRIALBOX_LLM_FORCE_TOOL": "query_documents"}).tool == "query_documents"


def test_first_call_of_a_turn_is_forced_to_the_named_tool_only():
    body = request([{"role": "user", "content": "what is the budget?"}])
    sent = ForceTool("query_documents").apply(body)
    assert sent["tool_choice"] == "required"
    assert [t["function"]["name"] for t in sent["tools"]] == ["query_documents"]
    assert body["tool_choice"] == "auto"  # the caller's request is not modified


def test_call_after_a_tool_result_is_not_forced_and_carries_no_tools():
    history = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "1", "type": "function",
             "function": {"name": "query_documents", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": "result"},
    ]
    sent = ForceTool("query_documents").apply(request(history))
    assert "tools" not in sent and "tool_choice" not in sent
    assert sent["messages"] == history


def test_request_that_does_not_offer_the_tool_is_not_forced():
    sent = ForceTool("search_web").apply(request([{"role": "user", "content": "hi"}]))
    assert "tool_choice" not in sent and "tools" not in sent


def test_request_without_tools_passes_unchanged():
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert ForceTool("query_documents").apply(body) is body
