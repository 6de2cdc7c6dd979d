"""The OpenAI-compatible judge backend (Lemonade, vLLM, llama.cpp) over plain httpx.

`response_format` carries a JSON Schema; llama.cpp turns it into a grammar, so even a tiny model
produces well-formed JSON. Well-formed is not correct: every reply is still validated, and the
model has to pass calibration before it judges anything.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

import httpx

from runner.judge._ask import BackendReply, StructuredRequest
from runner.judge._errors import JudgeError
from runner.judgments import JudgeUsage


def api_base(url: str) -> str:
    """The `/v1`-style base from what a user typed: an origin gets `/v1` (Lemonade serves both
    `/v1` and `/api/v1`), a full `.../chat/completions` URL loses that suffix."""
    trimmed = url.rstrip("/")
    trimmed = trimmed.removesuffix("/chat/completions")
    if urlsplit(trimmed).path in ("", "/"):
        trimmed += "/v1"
    return trimmed


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
        headers = {}
        key = os.environ.get("TRIALBOX_JUDGE_API_KEY")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = http_client or httpx.AsyncClient(timeout=timeout_s)
        self._headers = headers

    @property
    def model(self) -> str:
        """The model name; before ready() has asked the server, a placeholder for messages."""
        return self._model or "(the server's model)"

    async def ready(self) -> None:
        await self.resolve_model()

    async def resolve_model(self) -> str:
        """The configured model, or the first one the server lists (a one-model llama.cpp or
        Lemonade server needs no name)."""
        if self._model is None:
            listing = await self._send("GET", "/models")
            models = [entry.get("id") for entry in listing.get("data", []) if entry.get("id")]
            if not models:
                raise JudgeError(f"openai judge at {self.base}: GET /models lists no model")
            self._model = str(models[0])
        return self._model

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
            raise JudgeError(
                f"openai judge at {self.base}: the reply has no choices[0].message: {str(body)[:300]}"
            ) from None
        used = body.get("usage") or {}
        usage = JudgeUsage(
            input_tokens=int(used.get("prompt_tokens") or 0),
            output_tokens=int(used.get("completion_tokens") or 0),
            requests=1,
        )
        return BackendReply(text=text, usage=usage)

    async def _send(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        url = self.base + path
        try:
            response = await self._client.request(method, url, json=body, headers=self._headers)
        except httpx.ConnectError as error:
            raise JudgeError(
                f"openai judge: cannot connect to {url} ({error}). Start the LLM server or fix "
                "--judge-url / TRIALBOX_JUDGE_URL."
            ) from error
        except httpx.TimeoutException as error:
            raise JudgeError(f"openai judge: {url} did not answer in time ({error!r})") from error
        if response.status_code >= 400:
            raise JudgeError(
                f"openai judge: HTTP {response.status_code} from {url}: {response.text[:300]}"
            )
        try:
            return response.json()
        except ValueError:
            raise JudgeError(f"openai judge: {url} returned non-JSON: {response.text[:300]}") from None

    async def aclose(self) -> None:
        await self._client.aclose()
