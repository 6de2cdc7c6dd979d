"""The OpenAI-compatible judge backend (Lemonade, vLLM, llama.cpp) over plain httpx.

`response_format` carries a JSON Schema; llama.cpp turns it into a grammar, so even a tiny model
produces well-formed JSON. Well-formed is not correct: every reply is still validated, and the
model has to pass calibration before it judges anything.

The backend's identity (part of every cache key) is the server's URL plus what its `/models`
reports about the model (llama.cpp's `meta`, Lemonade's `checkpoint`, ...): the same model name on
another server, or on the same address after a different model file was loaded, is a different
judge. A server without `/models` is identified by the `model` its first reply names; until then
nothing is read from the cache.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any
from urllib.parse import urlsplit

import httpx

from runner.judge._ask import BackendReply, StructuredRequest
from runner.judge._errors import (
    REFUSED,
    RETRIED,
    JudgeError,
    JudgeServerError,
    JudgeUnavailable,
    JudgeUnreachable,
)
from runner.records.judgments import JudgeUsage
from runner.system.urls import shown_url

# The /models fields that say which weights answer. Others change between calls (llama.cpp's
# `created` is the time of the request) or with unrelated state (`downloaded`, `context_length`).
IDENTITY_FIELDS = ("id", "owned_by", "checkpoint", "served_model", "recipe", "size", "meta", "type")
# Routes a server may simply not have: the model must then be named, and identity comes from replies.
NO_ROUTE = (404, 405, 501)
# A judge reply (or a /models listing) is a few KB; past this the body is not read further.
REPLY_BYTES = 8 * 2**20
RETRIES = 3
BACKOFF_S = 0.5  # 0.5 + 1 + 2 s: a short outage passes, a long one is said within seconds


def _stable(entry: dict[str, Any]) -> dict[str, Any]:
    return {key: entry[key] for key in IDENTITY_FIELDS if key in entry}


def api_base(url: str) -> str:
    """The `/v1`-style base from what a user typed: an origin gets `/v1` (Lemonade serves both
    `/v1` and `/api/v1`), a full `.../chat/completions` URL loses that suffix."""
    trimmed = url.rstrip("/")
    trimmed = trimmed.removesuffix("/chat/completions")
    if urlsplit(trimmed).path in ("", "/"):
        trimmed += "/v1"
    return trimmed


class _NoRoute(Exception):
    """The server does not have this GET route (it is optional for OpenAI-compatible servers)."""


class OpenAIBackend:
    provider = "openai"
    temperature: float | None = 0.0
    narrow_claim_schema = True  # llama.cpp's grammar then only allows the request's claim names

    def __init__(
        self,
        url: str,
        model: str | None = None,
        *,
        http_client: httpx.AsyncClient | None = None,
        max_tokens: int = 1024,
        timeout_s: float = 300.0,
    ) -> None:
        self.base = api_base(url)
        self._model = model
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        headers = {}
        key = os.environ.get("TRIALBOX_JUDGE_API_KEY")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = http_client or httpx.AsyncClient(timeout=timeout_s)
        self._headers = headers
        self._listing: list[dict[str, Any]] | None = None  # what GET /models said (None: no route)
        self._asked = False  # whether GET /models was asked yet (once per backend)
        self._identity: dict[str, Any] | None = None

    @property
    def model(self) -> str:
        """The model name; before ready() has asked the server, a placeholder for messages."""
        return self._model or "(the server's model)"

    @property
    def identity(self) -> dict[str, Any] | None:
        """The server as the cache knows it: URL, model, and the stable fields /models reports for
        that model (its whole listing when it does not list that name). None until known."""
        return self._identity

    async def ready(self) -> None:
        await self.resolve_model()

    async def resolve_model(self) -> str:
        """The configured model, or the first one the server lists (a one-model llama.cpp or
        Lemonade server needs no name). Also fixes the server's identity for the cache."""
        if not self._asked:
            self._listing = await self._models()
            self._asked = True
        if self._model is None:
            models = [str(entry["id"]) for entry in self._listing or [] if entry.get("id")]
            if not models:
                raise JudgeError(
                    f"openai judge at {shown_url(self.base)}: GET /models lists no model; name one with --judge-model"
                )
            self._model = models[0]
        if self._identity is None and self._listing is not None:
            mine = [_stable(entry) for entry in self._listing if entry.get("id") == self._model]
            reported = mine or sorted((_stable(e) for e in self._listing), key=lambda e: str(e.get("id")))
            self._identity = {"url": self.base, "model": self._model, "models": reported}
        return self._model

    async def _models(self) -> list[dict[str, Any]] | None:
        """GET /models as a list of entries, or None when the server has no such route."""
        try:
            listing = await self._send("GET", "/models")
        except _NoRoute:
            return None
        data = listing.get("data") if isinstance(listing, dict) else None
        return [entry for entry in data if isinstance(entry, dict)] if isinstance(data, list) else []

    def request_body(self, request: StructuredRequest) -> dict[str, Any]:
        return {
            "model": self._model,
            "messages": [{"role": "system", "content": request.system}, *request.messages],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "stream": False,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.schema, "strict": True},
            },
        }

    async def complete(self, request: StructuredRequest) -> BackendReply:
        await self.ready()
        body = await self._send("POST", "/chat/completions", self.request_body(request))
        try:
            text = body["choices"][0]["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            raise JudgeServerError(
                f"openai judge at {shown_url(self.base)}: the reply has no choices[0].message"
            ) from None
        if not isinstance(text, str):
            raise JudgeServerError(f"openai judge at {shown_url(self.base)}: choices[0].message.content is not text")
        used = body.get("usage") or {}
        if not isinstance(used, dict):
            raise JudgeServerError(f"openai judge at {shown_url(self.base)}: the reply's usage is not an object")
        usage = JudgeUsage(
            input_tokens=self._tokens(used, "prompt_tokens"),
            output_tokens=self._tokens(used, "completion_tokens"),
            requests=1,
        )
        served = body.get("model") if isinstance(body.get("model"), str) else None
        if self._identity is None:
            # No /models route: the reply's own word on which model answered identifies it.
            self._identity = {"url": self.base, "model": self.model, "served_model": served}
        return BackendReply(text=text, usage=usage, served_model=served)

    def _tokens(self, used: dict[str, Any], key: str) -> int:
        """A token count from the reply's usage: a whole number ≥ 0 (absent: 0). Garbage, NaN or
        a negative count is a malformed reply, not a figure to add to the run's cost."""
        value = used.get(key)
        if value is None:
            return 0
        if type(value) is not int or value < 0:  # noqa: E721 — True is an int to isinstance
            raise JudgeServerError(f"openai judge at {shown_url(self.base)}: the reply's usage.{key} is not a "
                             "token count")
        return value

    async def _send(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The reply's JSON. 402/429/5xx are retried RETRIES times with backoff (a judge outage
        of a few seconds costs nothing), then JudgeUnavailable, as 401/403 are at once; every
        other failure is one JudgeError line naming the URL and what went wrong — never the
        reply's content, which may be anything a proxy sends."""
        url = self.base + path
        shown = shown_url(url)  # every message below: never the URL's user name and password
        for attempt in range(RETRIES + 1):
            status, raw = await self._exchange(method, url, body)
            if status not in RETRIED or attempt == RETRIES:
                break
            await asyncio.sleep(BACKOFF_S * 2**attempt)
        if status in NO_ROUTE and method == "GET":
            raise _NoRoute(url)
        if status in REFUSED:
            raise JudgeUnavailable(f"openai judge: HTTP {status} from {shown}: the server refuses "
                                   "our key — check TRIALBOX_JUDGE_API_KEY")
        if status in RETRIED:
            raise JudgeUnavailable(f"openai judge: HTTP {status} from {shown}, still after "
                                   f"{RETRIES} retries — the judge is unavailable; try again later")
        if status >= 400:
            raise JudgeServerError(f"openai judge: HTTP {status} from {shown}; check --judge-url and "
                             "--judge-model")
        try:
            return json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            raise JudgeServerError(f"openai judge: {shown} returned {len(raw)} bytes that are not JSON; "
                             "check --judge-url") from None

    async def _exchange(self, method: str, url: str, body: dict[str, Any] | None
                        ) -> tuple[int, bytes]:
        """One request: its status and at most REPLY_BYTES of its (decoded) body, within
        `timeout_s` from start to end. httpx's timeout bounds each read only, so a server that
        trickles a byte a second would otherwise hold the judge for ever."""
        shown = shown_url(url)
        try:
            async with asyncio.timeout(self.timeout_s):
                return await self._stream(method, url, body)
        except TimeoutError:
            raise JudgeServerError(f"openai judge: {shown} did not answer in time (no whole reply "
                                   f"within {self.timeout_s:g}s); check --judge-url") from None

    async def _stream(self, method: str, url: str, body: dict[str, Any] | None
                      ) -> tuple[int, bytes]:
        """The request itself, its failures named by kind (see _exchange for its deadline)."""
        shown = shown_url(url)
        try:
            # Streamed and cut at REPLY_BYTES: a server that never ends its body (or sends
            # gigabytes) is an error after 8 MiB, not a judge buffering it all in memory.
            async with self._client.stream(method, url, json=body, headers=self._headers) as response:
                raw = bytearray()
                async for chunk in response.aiter_bytes():
                    raw += chunk
                    if len(raw) > REPLY_BYTES:
                        raise JudgeServerError(f"openai judge: {shown} sent more than {REPLY_BYTES // 2**20} MiB; "
                                               "a judge reply is a few KB — check --judge-url")
                return response.status_code, bytes(raw)
        except httpx.ConnectError as error:
            raise JudgeUnreachable(
                f"openai judge: cannot connect to {shown} ({type(error).__name__}). Start the LLM "
                "server or fix --judge-url / TRIALBOX_JUDGE_URL."
            ) from None
        except httpx.TimeoutException as error:
            raise JudgeServerError(f"openai judge: {shown} did not answer in time "
                                   f"({type(error).__name__})") from None
        except httpx.HTTPError as error:
            # A dropped connection, a bad gzip body, headers past h11's limit, ...: the server's
            # fault, said by its kind (its text may quote what the server sent).
            raise JudgeServerError(f"openai judge: {shown} sent a malformed reply "
                                   f"({type(error).__name__}); check --judge-url") from None

    async def aclose(self) -> None:
        await self._client.aclose()
