"""Lemonade's `GET /stats` numbers, taken from what llama.cpp itself measured.

llama.cpp puts `timings` (prompt and decode milliseconds and token counts) on every completion
response, and on the last chunk of a stream; OpenAI `usage` may come too. Lemonade's `/stats`
reports the last completion's time to first token (seconds), decode speed and token counts;
we derive all four from llama.cpp's own figures rather than timing anything ourselves.
"""

from __future__ import annotations

import json
from typing import Any

from trialbox_llm.schemas import Stats


def stats_from_response(body: dict[str, Any]) -> Stats | None:
    """Stats of one completion (a whole response or the final stream chunk); None when the body
    carries neither `timings` nor `usage` (e.g. a middle chunk)."""
    timings = body.get("timings") if isinstance(body.get("timings"), dict) else None
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else None
    if timings is None and usage is None:
        return None
    timings = timings or {}
    usage = usage or {}
    prompt_ms = _number(timings.get("prompt_ms"))
    input_tokens = _integer(usage.get("prompt_tokens"))
    if input_tokens is None and "prompt_n" in timings:
        input_tokens = (_integer(timings.get("prompt_n")) or 0) + (
            _integer(timings.get("cache_n")) or 0
        )
    output_tokens = _integer(usage.get("completion_tokens"))
    if output_tokens is None:
        output_tokens = _integer(timings.get("predicted_n"))
    return Stats(
        time_to_first_token=None if prompt_ms is None else prompt_ms / 1000.0,
        tokens_per_second=_number(timings.get("predicted_per_second")),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        prompt_tokens=input_tokens,
    )


def stats_from_sse_line(line: str) -> Stats | None:
    """Stats from one `data: {...}` line of a stream, if that chunk carries them."""
    if not line.startswith("data:"):
        return None
    payload = line[len("data:") :].strip()
    if not payload or payload == "[DONE]":
        return None
    try:
        body = json.loads(payload)
    except json.JSONDecodeError:
        return None
    return stats_from_response(body) if isinstance(body, dict) else None


def merge(earlier: Stats | None, later: Stats | None) -> Stats | None:
    """Combine chunks: llama.cpp may send `timings` and `usage` on different final chunks."""
    if earlier is None or later is None:
        return later or earlier
    fields = {k: v for k, v in later.model_dump().items() if v is not None}
    return earlier.model_copy(update=fields)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _integer(value: Any) -> int | None:
    number = _number(value)
    return None if number is None else int(number)
