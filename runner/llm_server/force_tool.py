"""Optional switch `TRIALBOX_LLM_FORCE_TOOL=<tool>`: force the first model call of a turn to a tool.

Why it exists: a 135M chat model never chooses a tool by itself, so GAIA's real tool path (tool
call -> tool run -> tool result -> answer) would never run on the CPU server. With the switch on,
the first model call of each user turn that offers the named tool is sent to llama.cpp with only
that tool and `tool_choice: "required"`, which llama.cpp enforces with a grammar. The switch is off
by default and `/health` reports it (`force_tool`) so a run can record that it was on.

llama.cpp needs a chat template that renders tools for this (SmolLM2's own ignores them), and
under that template `tool_choice: "auto"` fails (HTTP 500). So while the switch is on, requests
that are not forced go out without tools: the small model would not have called one anyway.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

ENV_VAR = "TRIALBOX_LLM_FORCE_TOOL"

#: ChatML (SmolLM2's own turn markers) plus tools in the system turn and tool calls/results
#: rendered as text, so every message GAIA sends, tool history included, has a rendering.
TOOL_CHAT_TEMPLATE = """\
{%- if tools -%}
{{- '<|im_start|>system\\n' -}}
{%- if messages[0].role == 'system' and messages[0].content is string -%}
{{- messages[0].content + '\\n\\n' -}}
{%- endif -%}
{{- 'You can call these tools:\\n' -}}
{%- for tool in tools -%}{{- (tool | tojson) + '\\n' -}}{%- endfor -%}
{{- '<|im_end|>\\n' -}}
{%- endif -%}
{%- for message in messages -%}
{%- if not (tools and loop.first and message.role == 'system') -%}
{{- '<|im_start|>' + message.role + '\\n' -}}
{%- if message.content is string -%}{{- message.content -}}
{%- elif message.content -%}{%- for part in message.content -%}{%- if part.type == 'text' -%}{{- part.text -}}{%- endif -%}{%- endfor -%}
{%- endif -%}
{%- if message.tool_calls -%}
{%- for call in message.tool_calls -%}
{{- '<tool_call>' + (call.function | tojson) + '</tool_call>' -}}
{%- endfor -%}
{%- endif -%}
{{- '<|im_end|>\\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}
"""


def offered_tool_names(body: dict[str, Any]) -> list[str]:
    """Names of the function tools a chat request offers."""
    names = []
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


def starts_turn(messages: list[Any]) -> bool:
    """True for the first model call of a turn: the last message is the user's."""
    return bool(messages) and isinstance(messages[-1], dict) and messages[-1].get("role") == "user"


@dataclass(frozen=True)
class ForceTool:
    """The switch, when on: `tool` is the name to force."""

    tool: str

    def apply(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request to send upstream (a copy; the caller's body is not changed)."""
        if not body.get("tools"):
            return body
        rewritten = copy.deepcopy(body)
        if self.tool in offered_tool_names(body) and starts_turn(body.get("messages") or []):
            rewritten["tools"] = [
                t for t in body["tools"] if (t.get("function") or {}).get("name") == self.tool
            ]
            rewritten["tool_choice"] = "required"
            rewritten.pop("parallel_tool_calls", None)
            return rewritten
        rewritten.pop("tools", None)
        rewritten.pop("tool_choice", None)
        rewritten.pop("parallel_tool_calls", None)
        return rewritten


def from_environment(environ: dict[str, str]) -> ForceTool | None:
    name = environ.get(ENV_VAR, "").strip()
    return ForceTool(name) if name else None
