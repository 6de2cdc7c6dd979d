"""Optional switch `TRIALBOX_LLM_FORCE_TOOL=<tool>`: force the first model call of a turn to a tool.

Why it exists: a 135M chat model never chooses a tool by itself, so GAIA's real tool path (tool
call -> tool run -> tool result -> answer) would never run on the CPU server. With the switch on,
the first model call of each user turn that offers the named tool becomes a call of that tool.
It is off by default, and `/health` reports it (`force_tool`) so a run can record it was on.

How: the model still writes the call. llama.cpp is asked for the tool's arguments under a JSON
schema grammar (`response_format` json_schema, which llama.cpp enforces and SmolLM2 follows),
and the JSON it writes is returned as an OpenAI `tool_calls` message, streamed or not.
(llama.cpp's own `tool_choice: "required"` did not constrain this build with SmolLM2's or a
ChatML template in our trials, and `"auto"` under a tool template fails, hence this route.)
All other requests pass through unchanged.
"""

from __future__ import annotations

import copy
import json
import uuid
from dataclasses import dataclass
from typing import Any

ENV_VAR = "TRIALBOX_LLM_FORCE_TOOL"

_ANY_OBJECT = {"type": "object"}


def offered_tool(body: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The `function` entry of tool `name` if the request offers it."""
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name") == name:
            return function
    return None


def starts_turn(messages: list[Any]) -> bool:
    """True for the first model call of a turn: the last message is the user's."""
    return bool(messages) and isinstance(messages[-1], dict) and messages[-1].get("role") == "user"


@dataclass(frozen=True)
class ForceTool:
    """The switch, when on: `tool` is the name to force."""

    tool: str

    def applies_to(self, body: dict[str, Any]) -> bool:
        return offered_tool(body, self.tool) is not None and starts_turn(body.get("messages") or [])

    def arguments_request(self, body: dict[str, Any]) -> dict[str, Any]:
        """The upstream request: same conversation, no tools, output held to the tool's schema."""
        function = offered_tool(body, self.tool) or {}
        upstream = copy.deepcopy(body)
        for key in ("tools", "tool_choice", "parallel_tool_calls", "stream", "stream_options"):
            upstream.pop(key, None)
        instruction = (
            f"Call the tool `{self.tool}` now. {function.get('description', '')} "
            "Reply with its arguments as one JSON object only."
        )
        upstream["messages"] = [
            *upstream.get("messages", []),
            {"role": "system", "content": instruction.strip()},
        ]
        upstream["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": self.tool, "schema": function.get("parameters") or _ANY_OBJECT},
        }
        return upstream

    def tool_call(self, arguments: str) -> dict[str, Any]:
        return {
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": self.tool, "arguments": arguments},
        }

    def completion(self, upstream: dict[str, Any]) -> dict[str, Any]:
        """llama.cpp's JSON answer rewritten as an assistant message that calls the tool."""
        arguments = upstream["choices"][0]["message"].get("content") or "{}"
        response = copy.deepcopy(upstream)
        response["choices"] = [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [self.tool_call(arguments)],
                },
            }
        ]
        return response

    def stream_events(self, upstream: dict[str, Any]) -> list[str]:
        """The same answer as OpenAI stream chunks (`data:` lines), for `stream: true` callers."""
        message = self.completion(upstream)["choices"][0]["message"]
        call = {"index": 0, **message["tool_calls"][0]}
        base = {
            "id": upstream.get("id"),
            "object": "chat.completion.chunk",
            "created": upstream.get("created"),
            "model": upstream.get("model"),
        }
        first = {
            **base,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": None,
                    "delta": {"role": "assistant", "content": None, "tool_calls": [call]},
                }
            ],
        }
        last = {
            **base,
            "choices": [{"index": 0, "finish_reason": "tool_calls", "delta": {}}],
            "usage": upstream.get("usage"),
            "timings": upstream.get("timings"),
        }
        return [
            f"data: {json.dumps(first)}\n\n",
            f"data: {json.dumps(last)}\n\n",
            "data: [DONE]\n\n",
        ]


def from_environment(environ: dict[str, str]) -> ForceTool | None:
    name = environ.get(ENV_VAR, "").strip()
    return ForceTool(name) if name else None
