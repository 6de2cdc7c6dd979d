"""The Anthropic judge backend: a forced tool gives structured replies, the rubric is cached.

The key comes only from the environment (ANTHROPIC_API_KEY); it is never logged, stored in a
cache entry or written into a scorecard. The anthropic SDK 2.x speaks `httpx2` (not `httpx`): an
injected client (tests use `httpx2.MockTransport`) must be an `httpx2.AsyncClient`.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import anthropic
import httpx2

from runner.judge._ask import BackendReply, StructuredRequest
from runner.judge._errors import (
    REFUSED,
    RETRIED,
    JudgeError,
    JudgeServerError,
    JudgeUnavailable,
)
from runner.records.judgments import JudgeUsage
from runner.verdict.prices import judge_cost_usd

DEFAULT_MODEL = "claude-sonnet-4-6"

# The judge wants temperature 0: at the default temperature, verdicts on borderline items flip
# between runs (DESIGN 2.7). API version 2026-10-21, which the SDK 2.x sends by default, rejects
# temperature for every model (and the SDK dropped the argument); version 2023-06-01 still takes
# it for the models below. For those we pin 2023-06-01 and send temperature 0 ourselves; any other
# model runs at the API's own sampling and says so through `temperature = None`.
SAMPLING_API_VERSION = "2023-06-01"
MODELS_ACCEPTING_TEMPERATURE = (
    "claude-sonnet-4-6",
    "claude-sonnet-4-5",
    "claude-opus-4-6",
    "claude-opus-4-5",
    "claude-opus-4-1",
    "claude-haiku-4-5",
    "claude-3",
)


def accepts_temperature(model: str) -> bool:
    return model.startswith(MODELS_ACCEPTING_TEMPERATURE)


# A judge reply is a few KB; past this the body is not read further.
REPLY_BYTES = 8 * 2**20


class AnthropicBackend:
    provider = "anthropic"
    # The tool schema is part of the cached prefix (tools come before the system prompt), so it
    # must not vary with each request's claim names; check_claim_names enforces them instead.
    narrow_claim_schema = False

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        http_client: httpx2.AsyncClient | None = None,
        base_url: str | None = None,
        max_tokens: int = 2048,
        timeout_s: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        key = os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise JudgeError(
                "the anthropic judge needs ANTHROPIC_API_KEY in the environment; set it, or "
                "choose another judge with --judge openai --judge-url URL"
            )
        self.model = model
        self.temperature: float | None = 0.0 if accepts_temperature(model) else None
        self.max_tokens = max_tokens
        # The SDK's timeout bounds each read, and it retries on its own: the whole call, all
        # attempts, is held to this, so an endpoint that trickles its body cannot hold us for ever.
        self.deadline_s = timeout_s * (max_retries + 1)
        self._client = anthropic.AsyncAnthropic(
            api_key=key,
            base_url=base_url,
            http_client=http_client,
            timeout=timeout_s,
            max_retries=max_retries,
        )

    @property
    def identity(self) -> dict[str, Any]:
        """The API endpoint (ANTHROPIC_BASE_URL may point at a proxy or gateway) and the model."""
        return {"url": str(self._client.base_url), "model": self.model}

    async def ready(self) -> None:
        """Nothing to discover: the model is always named."""

    def request_body(self, request: StructuredRequest) -> dict[str, Any]:
        """The SDK arguments for one structured question."""
        arguments: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": [
                {
                    "type": "text",
                    "text": request.system,
                    "cache_control": {"type": "ephemeral"},
                }
            ],
            "messages": [dict(message) for message in request.messages],
            "tools": [
                {
                    "name": request.schema_name,
                    "description": f"Record the {request.schema_name.replace('_', ' ')}.",
                    "input_schema": request.schema,
                }
            ],
            "tool_choice": {"type": "tool", "name": request.schema_name},
        }
        if self.temperature is not None:
            arguments["extra_headers"] = {"anthropic-version": SAMPLING_API_VERSION}
            arguments["extra_body"] = {"temperature": self.temperature}
        return arguments

    async def complete(self, request: StructuredRequest) -> BackendReply:
        try:
            # Streamed and cut at REPLY_BYTES: an endpoint (ANTHROPIC_BASE_URL may be any
            # proxy) that never ends its body is an error, not gigabytes held in memory.
            async with asyncio.timeout(self.deadline_s):
                raw = await self._reply_bytes(request)
            message = anthropic.types.Message.model_validate_json(raw)
        except TimeoutError:
            raise JudgeServerError(f"anthropic judge: did not answer in time (no whole reply within "
                                   f"{self.deadline_s:g}s); check ANTHROPIC_BASE_URL") from None
        except anthropic.APIConnectionError as error:
            raise JudgeServerError(f"anthropic judge: cannot reach the API ({error})") from error
        except anthropic.APIStatusError as error:
            status = error.status_code
            if status in REFUSED or status in RETRIED:  # the SDK has retried 429/5xx already
                raise JudgeUnavailable(f"anthropic judge: HTTP {status} from the Messages API — "
                                       + ("check ANTHROPIC_API_KEY" if status in REFUSED
                                          else "the API is unavailable; try again later")) from None
            raise JudgeServerError(
                f"anthropic judge: HTTP {status} from the Messages API: {error.message}"
            ) from error
        except ValueError:  # pydantic's ValidationError: not a Messages API reply
            raise JudgeServerError("anthropic judge: the reply is not a Messages API message; "
                                   "check ANTHROPIC_BASE_URL") from None
        return BackendReply(text=_reply_text(message, request.schema_name), usage=self._usage(message),
                            served_model=message.model or None)

    async def _reply_bytes(self, request: StructuredRequest) -> bytes:
        """The reply's body, cut at REPLY_BYTES."""
        async with self._client.messages.with_streaming_response.create(
                **self.request_body(request)) as response:
            raw = bytearray()
            async for chunk in response.iter_bytes():
                raw += chunk
                if len(raw) > REPLY_BYTES:
                    raise JudgeServerError(f"anthropic judge: the reply passed {REPLY_BYTES // 2**20} "
                                           "MiB; a judge reply is a few KB — check ANTHROPIC_BASE_URL")
        return bytes(raw)

    def _usage(self, message: anthropic.types.Message) -> JudgeUsage:
        used = message.usage
        usage = JudgeUsage(
            input_tokens=used.input_tokens,
            output_tokens=used.output_tokens,
            cache_read_tokens=used.cache_read_input_tokens or 0,
            cache_write_tokens=used.cache_creation_input_tokens or 0,
            requests=1,
        )
        # Priced from the one table (runner/verdict/prices.py), as the budget and the scorecard are.
        usage.cost_usd = judge_cost_usd(usage, self.model)
        return usage


def _reply_text(message: anthropic.types.Message, tool_name: str) -> str:
    """The forced tool's input as JSON text; without that tool call, whatever text came back
    (which then fails validation and earns the one correction)."""
    for block in message.content:
        if block.type == "tool_use" and block.name == tool_name:
            return json.dumps(block.input, ensure_ascii=False)
    return "".join(block.text for block in message.content if block.type == "text")
