"""A turn's tool calls, read from GAIA's turn view: names, arguments, results and errors."""

from __future__ import annotations

import re
from typing import Any

from runner.records.transcript import ToolCall

RESULT_SUMMARY_CHARS = 300


def tool_calls_from_steps(
    steps: list[dict[str, Any]], denials: list[dict[str, Any]]
) -> list[ToolCall]:
    """The turn's tool calls, in order, from GAIA's folded activity list (``turn_view``)."""
    denied = {str(d.get("tool")): str(d.get("message") or d.get("reason") or "") for d in denials}
    calls = []
    for step in steps:
        if step.get("type") != "tool" or not step.get("tool"):
            continue
        name = str(step["tool"])
        result = str(step.get("result") or "")
        error = None
        if step.get("success") is False:
            error = result[:RESULT_SUMMARY_CHARS] or "tool reported failure"
        if name in denied:
            error = f"permission denied: {denied[name]}".strip()
        calls.append(
            ToolCall(
                name=name,
                arguments=parse_tool_detail(str(step.get("detail") or "")),
                result_summary=result[:RESULT_SUMMARY_CHARS],
                error=error,
            )
        )
    return calls


_ARG_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*): (.*)$", re.DOTALL)
_ARG_FLAG = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_tool_detail(detail: str) -> dict[str, Any]:
    """Recover a tool call's arguments from the text GAIA shows for them.

    GAIA's SSE stream formats arguments as ``key: value`` parts — joined with ", " when there
    are at most two and none contains ", ", else one per line — and a bare ``key`` for True
    (``gaia.ui.sse_handler._format_tool_args``). Values come back as strings (long ones are cut
    at 150 chars by GAIA). Text in no such shape (a tool label) is kept under ``_detail``.
    """
    detail = detail.strip()
    if not detail:
        return {}
    parts = detail.split("\n") if "\n" in detail else detail.split(", ")
    arguments: dict[str, Any] = {}
    for part in parts:
        if match := _ARG_LINE.match(part.strip()):
            arguments[match.group(1)] = match.group(2)
        elif _ARG_FLAG.match(part.strip()):
            arguments[part.strip()] = True
        else:
            return {"_detail": detail}
    return arguments
