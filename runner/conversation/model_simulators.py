"""The user simulators that ask a model: LocalSimulator and LLMSimulator.

LocalSimulator asks the local OpenAI-compatible LLM server (the one the agent uses); LLMSimulator
a named provider (anthropic, or openai at a URL).

This module sits left of the judge in the data flow, so it talks to models on its own (plain
text chat) instead of borrowing the judge's structured client.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import httpx
import httpx2

if TYPE_CHECKING:
    import anthropic

from runner.conversation.simulator_config import SimulatorError, SimulatorUnavailable
from runner.conversation.user_words import (
    clean_message,
    extracted,
    prompt_text,
    situation,
    turn_origin,
    verbatim,
)
from runner.records.transcript import TurnRecord, UserMessage
from runner.stack.hardware import loaded_chat_model

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"


def api_base(url: str) -> str:
    """Same rule as the judge's: an origin gets /v1, a .../chat/completions URL loses it."""
    trimmed = url.rstrip("/")
    trimmed = trimmed.removesuffix("/chat/completions")
    if trimmed.count("/") <= 2:
        trimmed += "/v1"
    return trimmed


class _OpenAIChat:
    """Plain-text chat with one OpenAI-compatible server; errors become SimulatorError, and
    "no model there" (no connection, no chat model, model not found) SimulatorUnavailable."""

    def __init__(self, url: str, http: httpx.AsyncClient, max_tokens: int, label: str) -> None:
        self.base = api_base(url)
        self.http = http
        self.max_tokens = max_tokens
        self.label = label

    async def complete(self, model: str, system: str, user: str) -> tuple[str, str]:
        """(text, the model the reply says served it)."""
        body = {
            "model": model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": 0,
            "max_tokens": self.max_tokens,
            "stream": False,
        }
        reply = await self.send("POST", "/chat/completions", body)
        try:
            text = str(reply["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError):
            raise SimulatorError(f"{self.label}: unexpected reply {str(reply)[:300]}") from None
        served = reply.get("model") if isinstance(reply, dict) else None
        return text, str(served) if isinstance(served, str) and served else model

    async def send(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        url = self.base + path
        try:
            response = await self.http.request(method, url, json=body)
        except (httpx.ConnectError, httpx.ConnectTimeout) as error:
            raise SimulatorUnavailable(
                f"{self.label}: cannot connect to {url} ({error}); start the LLM server "
                "(`trialbox up`) or fix --llm-url / --simulator-url"
            ) from error
        except httpx.HTTPError as error:
            raise SimulatorError(f"{self.label}: {url} failed: {error!r}") from error
        if response.status_code == 404 and path == "/chat/completions":
            raise SimulatorUnavailable(
                f"{self.label}: {url} has no model {str((body or {}).get('model'))!r} "
                f"(HTTP 404: {response.text[:200]}); name one it serves with --simulator-model"
            )
        if response.status_code == 503:
            raise SimulatorUnavailable(f"{self.label}: {url} is not ready (HTTP 503): {response.text[:200]}")
        if response.status_code >= 400:
            raise SimulatorError(f"{self.label}: HTTP {response.status_code} from {url}: {response.text[:300]}")
        try:
            return response.json()
        except ValueError:
            raise SimulatorError(f"{self.label}: {url} returned non-JSON: {response.text[:300]}") from None


def _is_chat_entry(entry: Any) -> bool:
    """A /models entry a user message can come from: not an embedder or reranker, not an alias
    (trialbox's llm-cpu lists the names GAIA asks for as aliases of its real models)."""
    if not isinstance(entry, dict) or not entry.get("id") or entry.get("alias") is True:
        return False
    kind = str(entry.get("type") or "").lower()
    labels = {str(label).lower() for label in entry.get("labels") or []}
    if kind in ("embedding", "embeddings", "reranking") or labels & {"embeddings", "embedding", "reranking"}:
        return False
    return "embed" not in str(entry["id"]).lower()


class LocalSimulator:
    """The offline user: verbatim, else the quoted question, else the local LLM server writes it.

    The model is the one `model` names, else the chat model the server has loaded (Lemonade's
    `/health` `all_models_loaded`, so the agent's model is not swapped out), else the first chat
    model `/models` lists. UserMessage.model is what the server says served the reply: the reply's
    `model`, resolved through `/models` `served_model` when the name is an alias.
    """

    def __init__(
        self,
        url: str | None,
        model: str | None = None,
        *,
        http_client: httpx.AsyncClient | None = None,
        max_tokens: int = 120,
    ) -> None:
        self.url = url
        self.model = model
        self._entries: list[dict[str, Any]] | None = None  # GET /models, asked once
        self._chat = (
            _OpenAIChat(url, http_client or httpx.AsyncClient(timeout=120.0), max_tokens, "local simulator")
            if url
            else None
        )

    async def user_message(self, scenario: Any, turn: Any, history: Sequence[TurnRecord]) -> UserMessage:
        message = verbatim(turn) or extracted(turn)
        if message is not None:
            return message
        if self._chat is None:
            raise SimulatorUnavailable(
                f"{turn_origin(scenario, turn)} has no user_message and no question quoted in its "
                "objective, and no LLM server URL is configured to write one (--llm-url)"
            )
        model = await self.ensure_model()
        text, replied = await self._chat.complete(model, prompt_text(), situation(scenario, turn, history))
        served = self.served_name(replied)
        written = clean_message(text)
        if not written:
            raise SimulatorError(f"{turn_origin(scenario, turn)}: the local model {served} wrote an empty message")
        return UserMessage(text=written, source="simulated", model=served)

    async def ensure_model(self) -> str:
        """The model that will write messages (asked of the server once, then remembered).
        Raises SimulatorUnavailable when the server is down or serves no chat model."""
        if self._chat is None:
            raise SimulatorUnavailable("local simulator: no LLM server URL is configured (--llm-url)")
        if self._entries is None:
            self._entries = await self._list_models()
        if not self.model:
            self.model = await self._loaded_model() or self._first_chat_model()
        return self.model

    def served_name(self, name: str) -> str:
        """The real model behind `name`: trialbox's llm-cpu serves GAIA's model names as aliases
        of small bundled models and says so in /models (`served_model`); others name it as is."""
        for entry in self._entries or []:
            if entry.get("id") == name and isinstance(entry.get("served_model"), str):
                return str(entry["served_model"])
        return name

    async def _loaded_model(self) -> str | None:
        assert self._chat is not None  # ensure_model, the only caller, checked it
        try:
            health = await self._chat.send("GET", "/health")
        except SimulatorUnavailable:
            raise
        except SimulatorError:
            return None  # not a Lemonade-style server: fall back to /models
        # Lemonade's `model_loaded` names the model loaded last: on our stack, the embedder.
        entry = loaded_chat_model(health)
        name = entry.get("model_name") if entry else None
        return str(name) if isinstance(name, str) and name else None

    async def _list_models(self) -> list[dict[str, Any]]:
        assert self._chat is not None
        try:
            listing = await self._chat.send("GET", "/models")
        except SimulatorUnavailable:
            raise
        except SimulatorError as error:
            if self.model:
                return []  # a named model needs no listing; the chat call will tell
            raise SimulatorUnavailable(f"local simulator: cannot list models ({error})") from error
        entries = listing.get("data", []) if isinstance(listing, dict) else []
        return [entry for entry in entries if isinstance(entry, dict)]

    def _first_chat_model(self) -> str:
        for entry in self._entries or []:
            if _is_chat_entry(entry):
                return str(entry["id"])
        assert self._chat is not None
        raise SimulatorUnavailable(
            f"local simulator: {self._chat.base}/models lists no chat model "
            f"({[e.get('id') for e in self._entries or []]}); load one or pass --simulator-model"
        )


class LLMSimulator:
    """Writes unscripted user messages with a named provider; scripted turns are sent verbatim."""

    def __init__(
        self,
        provider: Literal["anthropic", "openai"],
        model: str | None = None,
        url: str | None = None,
        *,
        http_client: httpx.AsyncClient | None = None,
        anthropic_http_client: httpx2.AsyncClient | None = None,
        max_tokens: int = 200,
    ) -> None:
        if provider == "openai" and not url:
            raise SimulatorError("the openai simulator needs a URL (--simulator-url)")
        if provider == "anthropic" and not os.environ.get("ANTHROPIC_API_KEY"):
            raise SimulatorError("the anthropic simulator needs ANTHROPIC_API_KEY in the environment")
        self.provider = provider
        self.model = model or (DEFAULT_ANTHROPIC_MODEL if provider == "anthropic" else None)
        self.max_tokens = max_tokens
        self._openai = (
            _OpenAIChat(str(url), http_client or httpx.AsyncClient(timeout=120.0), max_tokens, "openai simulator")
            if provider == "openai"
            else None
        )
        self._anthropic: anthropic.AsyncAnthropic | None = None
        if provider == "anthropic":
            import anthropic  # imported late: the SDK is slow to import and only this provider needs it

            self._anthropic = anthropic.AsyncAnthropic(http_client=anthropic_http_client)

    async def user_message(self, scenario: Any, turn: Any, history: Sequence[TurnRecord]) -> UserMessage:
        scripted = verbatim(turn)
        if scripted is not None:
            return scripted
        text, served = await self._generate(prompt_text(), situation(scenario, turn, history))
        written = clean_message(text)
        if not written:
            raise SimulatorError(f"{turn_origin(scenario, turn)}: the {self.provider} simulator returned an empty message")
        return UserMessage(text=written, source="simulated", model=served)

    async def _generate(self, system: str, user: str) -> tuple[str, str]:
        if self._anthropic is not None:
            return await self._generate_anthropic(system, user)
        assert self._openai is not None
        if self.model is None:
            self.model = await self._server_model()
        return await self._openai.complete(self.model, system, user)

    async def _generate_anthropic(self, system: str, user: str) -> tuple[str, str]:
        assert self._anthropic is not None and self.model is not None
        import anthropic

        try:
            reply = await self._anthropic.messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                # No temperature: SDK 2.x and API version 2026-10-21 dropped it. A simulated user
                # may vary between runs; the transcript records exactly what was sent.
                system=system,
                messages=[{"role": "user", "content": user}],
            )
        except anthropic.APIConnectionError as error:
            raise SimulatorUnavailable(f"anthropic simulator: cannot reach the API ({error})") from error
        except anthropic.APIError as error:
            raise SimulatorError(f"anthropic simulator: {error}") from error
        text = "".join(block.text for block in reply.content if block.type == "text")
        return text, str(reply.model or self.model)

    async def _server_model(self) -> str:
        """A one-model server needs no name: use the first chat model it lists."""
        assert self._openai is not None
        listing = await self._openai.send("GET", "/models")
        entries = listing.get("data", []) if isinstance(listing, dict) else []
        for entry in entries:
            if _is_chat_entry(entry):
                return str(entry["id"])
        raise SimulatorUnavailable(f"openai simulator: {self._openai.base}/models lists no model; pass --simulator-model")
