"""One structured question to a judge model: cache, call, validate, at most one correction.

Providers only move text (runner/judge/_anthropic.py, _openai.py); everything that decides whether
a reply is acceptable lives here so that both providers behave the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from pydantic import ValidationError

from runner.judge._cache import JudgeCache, cache_key
from runner.judge._errors import JudgeError
from runner.records.judgments import JudgeUsage

T = TypeVar("T")


@dataclass(frozen=True)
class StructuredRequest:
    """A question in provider-neutral form. `system` is the long, stable rubric."""

    system: str
    messages: list[dict[str, str]]  # {"role": "user"|"assistant", "content": text}
    schema_name: str
    schema: dict[str, Any]

    def corrected(self, bad_reply: str, problem: str) -> StructuredRequest:
        """The same question plus the bad reply and the validation error quoted back."""
        correction = (
            "Your reply did not pass validation:\n"
            f"{problem}\n"
            f"Reply again with the complete, corrected `{self.schema_name}` structure only."
        )
        messages = [
            *self.messages,
            {"role": "assistant", "content": bad_reply or "(empty reply)"},
            {"role": "user", "content": correction},
        ]
        return StructuredRequest(self.system, messages, self.schema_name, self.schema)


@dataclass
class BackendReply:
    text: str  # the structured reply as JSON text (or whatever the model produced instead)
    usage: JudgeUsage = field(default_factory=JudgeUsage)
    served_model: str | None = None  # the model the reply says answered (OpenAI `model` field)


class StructuredBackend(Protocol):
    """A provider that returns a reply shaped by a JSON Schema, at temperature 0."""

    @property
    def provider(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def temperature(self) -> float | None:
        """None: the provider's default sampling (see _anthropic.py)."""

    @property
    def narrow_claim_schema(self) -> bool:
        """Whether to put the claim names into the schema (see claims_schema)."""

    @property
    def identity(self) -> dict[str, Any] | None:
        """Who answers: the server's URL and what it reports about the model (after ready()).
        Part of every cache key. None while unknown: the cache is then not read."""

    async def ready(self) -> None:
        """Resolve anything the cache key needs (which model the server serves, its identity)."""

    async def complete(self, request: StructuredRequest) -> BackendReply: ...


def add_usage(total: JudgeUsage, part: JudgeUsage) -> None:
    total.input_tokens += part.input_tokens
    total.output_tokens += part.output_tokens
    total.cache_read_tokens += part.cache_read_tokens
    total.cache_write_tokens += part.cache_write_tokens
    total.requests += part.requests
    total.cached_replies += part.cached_replies
    total.cost_usd += part.cost_usd


def describe_problem(error: Exception) -> str:
    """A validation error as short lines a model can act on (no documentation URLs)."""
    if isinstance(error, ValidationError):
        lines = []
        for item in error.errors(include_url=False):
            location = ".".join(str(part) for part in item["loc"]) or "(whole reply)"
            lines.append(f"- {location}: {item['msg']}")
        return "\n".join(lines)
    return f"- {error}"


async def ask(
    backend: StructuredBackend,
    cache: JudgeCache | None,
    request: StructuredRequest,
    parse: Callable[[str], T],
    usage: JudgeUsage,
    repeat: int = 0,
) -> T:
    """The validated answer to `request`; one correction on a bad reply, then JudgeError.

    `parse` turns reply text into a value or raises ValidationError/ValueError. `usage` is
    increased by what the calls cost (cache hits cost nothing). `repeat` is which of the
    `--rejudge K` judgings asks (0-based): the cache serves it only that same repeat's reply.
    """
    reply = await _reply(backend, cache, request, usage, repeat)
    try:
        return _accept(backend, cache, request, reply, parse, repeat)
    except (ValidationError, ValueError) as error:
        problem = describe_problem(error)
    retry = request.corrected(reply.text, problem)
    second = await _reply(backend, cache, retry, usage, repeat)
    try:
        return _accept(backend, cache, retry, second, parse, repeat)
    except (ValidationError, ValueError) as error:
        raise JudgeError(
            f"{backend.provider} judge {backend.model}: the reply to `{request.schema_name}` "
            f"failed validation twice (after one correction). Last problem:\n"
            f"{describe_problem(error)}\nLast reply: {second.text[:500]!r}"
        ) from error


@dataclass
class _Reply:
    text: str
    from_cache: bool
    served_model: str | None = None


def _key(backend: StructuredBackend, request: StructuredRequest, repeat: int) -> str:
    return cache_key(
        backend.provider,
        backend.model,
        request.system,
        request.messages,
        request.schema,
        backend.temperature,
        backend.identity,
        repeat,
    )


async def _reply(
    backend: StructuredBackend,
    cache: JudgeCache | None,
    request: StructuredRequest,
    usage: JudgeUsage,
    repeat: int,
) -> _Reply:
    await backend.ready()
    # A server whose identity is not known yet (no /models route, no reply so far) is never
    # served from the cache: its answers could be another server's.
    if cache is not None and backend.identity is not None:
        cached = cache.get(_key(backend, request, repeat))
        if cached is not None:
            usage.cached_replies += 1
            return _Reply(cached, from_cache=True)
    fresh = await backend.complete(request)
    add_usage(usage, fresh.usage)
    return _Reply(fresh.text, from_cache=False, served_model=fresh.served_model)


def _accept(
    backend: StructuredBackend,
    cache: JudgeCache | None,
    request: StructuredRequest,
    reply: _Reply,
    parse: Callable[[str], T],
    repeat: int,
) -> T:
    value = parse(reply.text)
    if cache is not None and not reply.from_cache and backend.identity is not None:
        cache.put(_key(backend, request, repeat), backend.provider, backend.model, reply.text,
                  server=backend.identity, served_model=reply.served_model)
    return value
