"""The user simulator: what the "user" says at each turn of a scenario, and where the words came from.

Three kinds, one protocol (`Simulator.user_message` returns a `UserMessage`):

- ScriptedSimulator sends each turn's `user_message` verbatim — reproducible, no model; a turn
  without one is an error that says how to fix it.
- LocalSimulator is the offline default: the turn's `user_message` verbatim; else the one
  question quoted in its `objective` (GAIA writes `Ask 'What is the total approved budget for
  2025?'` in 46 of its 110 unscripted turns); else a model on the local OpenAI-compatible LLM
  server (the one the agent uses) writes it from objective and persona. Only when that server
  has no model to answer does it raise SimulatorUnavailable, which the engine records as
  SKIPPED_NO_MODEL: a run never crashes, and never invents a turn, because a model is missing.
- LLMSimulator writes unscripted turns with a named provider (anthropic, or openai at a URL).

A model writing a user message is never shown the ground truth, the success criteria, the
expected behaviour or phrases (a user who knows the answer leaks it into the question). This
module sits left of the judge in the data flow, so it talks to models on its own (plain text
chat) instead of borrowing the judge's structured client.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import anthropic
import httpx
import httpx2
from pydantic import BaseModel, ConfigDict, Field

from runner.records.transcript import TurnRecord, UserMessage
from runner.system.paths import eval_root

PROMPT_FILE = "user_simulator.md"
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"


class SimulatorError(RuntimeError):
    """The simulator cannot produce this turn's message (missing script, bad reply)."""


class SimulatorUnavailable(SimulatorError):
    """No model is reachable to write a turn that needs one (no server, no chat model on it).

    Not a failure of the agent nor of the harness's logic: the engine records the scenario as
    SKIPPED_NO_MODEL, with this message as the reason."""


class SimulatorConfig(BaseModel):
    """How user messages are produced. Chosen apart from the judge (DESIGN 1.5)."""

    model_config = ConfigDict(extra="forbid")

    provider: Literal["scripted", "local", "anthropic", "openai"] = Field(
        description="scripted: user_message only; local: verbatim, else the question quoted in the "
        "objective, else the local LLM server; anthropic/openai: a named model writes unscripted turns"
    )
    model: str | None = Field(
        default=None, description="model name; None = the provider's default (or the server's loaded model)"
    )
    url: str | None = Field(
        default=None, description="local/openai: the OpenAI-compatible server (origin or .../v1 base)"
    )


class Simulator(Protocol):
    """The simulated user: the next message for `turn`, given the conversation so far.

    Raises SimulatorUnavailable when the message needs a model and none is reachable, and
    SimulatorError for any other reason the message cannot be produced."""

    async def user_message(self, scenario: Any, turn: Any, history: Sequence[TurnRecord]) -> UserMessage: ...


def _scenario_origin(scenario: Any) -> str:
    """Where the scenario came from, for error messages: its file when known, else its id."""
    for name in ("source_file", "source_path", "path"):
        value = getattr(scenario, name, None)
        if value:
            return str(value)
    return f"scenario {getattr(scenario, 'id', '?')}"


def _where(scenario: Any, turn: Any) -> str:
    return f"{_scenario_origin(scenario)}: turn {getattr(turn, 'turn', '?')}"


def verbatim(turn: Any) -> UserMessage | None:
    """The turn's own `user_message`, when it has one: the scenario author's words always win."""
    text = getattr(turn, "user_message", None)
    if text is None or not str(text).strip():
        return None
    return UserMessage(text=str(text), source="verbatim")


# --- the question quoted in an objective --------------------------------------------------

# One pattern per quoting style. Straight and curly single quotes double as apostrophes
# ("the CEO's name", "What’s"), so a single-quoted span must open after a non-word character and
# close before one; double quotes never appear inside words, so they need no such guard.
_QUOTED = (
    re.compile(r'"([^"\n]+)"'),
    re.compile(r"“([^”\n]+)”"),
    re.compile(r"(?<![\w'])'(.+?)'(?![\w])"),
    re.compile(r"‘(.+?)’(?![\w])"),
)
# A quoted span that is not a question is usually a term, a title or a file name ('Q3', 'budget
# 2025'); a request without a question mark still reads as one when it starts like one.
_REQUEST_START = re.compile(
    r"^(what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|did|can|could|"
    r"would|will|should|tell|show|list|give|summari[sz]e|find|explain|compare|describe|name)\b",
    re.IGNORECASE,
)


def _question_like(span: str) -> bool:
    text = span.strip()
    if len(text.split()) < 2:
        return False
    return text.endswith("?") or (_REQUEST_START.match(text) is not None and len(text.split()) >= 3)


def quoted_question(objective: str | None) -> str | None:
    """The one question quoted in `objective`, or None when there is none or more than one.

    `Ask 'What is the total approved budget for 2025?'` → `What is the total approved budget
    for 2025?`. Two question-like quotes are ambiguous (which one would the user type?), so
    they give None and a model writes the message instead."""
    if not objective:
        return None
    found: list[tuple[int, str]] = []
    for pattern in _QUOTED:
        for match in pattern.finditer(objective):
            span = match.group(1).strip()
            if _question_like(span):
                found.append((match.start(), span))
    distinct = {span for _, span in found}
    if len(distinct) != 1:
        return None
    return distinct.pop()


def extracted(turn: Any) -> UserMessage | None:
    question = quoted_question(getattr(turn, "objective", None))
    return UserMessage(text=question, source="extracted") if question else None


# --- what a model is told -----------------------------------------------------------------


def _prompt_text() -> str:
    path = eval_root() / "prompts" / PROMPT_FILE
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SimulatorError(f"{path}: simulator prompt missing; set TRIALBOX_EVAL_ROOT") from None


def persona_of(scenario: Any, turn: Any) -> str:
    """GAIA lets a turn change the persona (`turns[].persona`); otherwise the scenario's."""
    return str(getattr(turn, "persona", None) or getattr(scenario, "persona", None) or "casual_user")


def situation(scenario: Any, turn: Any, history: Sequence[TurnRecord]) -> str:
    """What the simulated user knows: persona, scenario, this turn's objective, the conversation.

    Deliberately absent: ground_truth, success_criteria, expected_behavior, expected_phrases,
    fact_ids, notes, claims, checks and the reference.
    """
    lines = [
        f"Persona: {persona_of(scenario, turn)}",
        f"Scenario: {getattr(scenario, 'description', None) or getattr(scenario, 'name', '')}",
        "",
    ]
    if history:
        lines.append("Conversation so far:")
        for record in history:
            lines.append(f"User: {record.user_message}")
            lines.append(f"Assistant: {record.answer or '(no answer)'}")
    else:
        lines.append("Conversation so far: none, this is your first message.")
    lines.append("")
    lines.append(f"Objective for this message: {getattr(turn, 'objective', '')}")
    lines.append("Write the user's message now.")
    return "\n".join(lines)


# Lines of the situation text (see `situation`) that a small model sometimes copies after its
# message; everything from the first of them on is the prompt echoed back, not the user speaking.
_ECHOES = ("Objective for this message:", "Write the user's message now", "Conversation so far:", "Persona:")


def clean_message(text: str) -> str:
    """Strip the wrappers small models add ("User:", surrounding quotes, the prompt echoed back)."""
    message = text.strip()
    for echo in _ECHOES:
        position = message.find(echo)
        if position > 0:
            message = message[:position].strip()
    for prefix in ("User:", "user:", "USER:"):
        if message.startswith(prefix):
            message = message[len(prefix):].strip()
    if len(message) >= 2 and message[0] == message[-1] and message[0] in "\"'":
        message = message[1:-1].strip()
    return message


def api_base(url: str) -> str:
    """Same rule as the judge's: an origin gets /v1, a .../chat/completions URL loses it."""
    trimmed = url.rstrip("/")
    trimmed = trimmed.removesuffix("/chat/completions")
    if trimmed.count("/") <= 2:
        trimmed += "/v1"
    return trimmed


# --- simulators ---------------------------------------------------------------------------


class ScriptedSimulator:
    """Sends each turn's `user_message` exactly as written; anything else is an error."""

    async def user_message(self, scenario: Any, turn: Any, history: Sequence[TurnRecord]) -> UserMessage:
        message = verbatim(turn)
        if message is None:
            raise SimulatorError(
                f"{_where(scenario, turn)} has no user_message, and the scripted simulator cannot "
                "invent one. Add `user_message:` to that turn, or run with another simulator "
                "(--simulator local uses the LLM server; --simulator anthropic, or --simulator "
                "openai --simulator-url URL)."
            )
        return message


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
    `/health` `model_loaded`, so the agent's model is not swapped out), else the first chat model
    `/models` lists. UserMessage.model is what the server says served the reply: the reply's
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
                f"{_where(scenario, turn)} has no user_message and no question quoted in its "
                "objective, and no LLM server URL is configured to write one (--llm-url)"
            )
        model = await self.ensure_model()
        text, replied = await self._chat.complete(model, _prompt_text(), situation(scenario, turn, history))
        served = self.served_name(replied)
        written = clean_message(text)
        if not written:
            raise SimulatorError(f"{_where(scenario, turn)}: the local model {served} wrote an empty message")
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
        loaded = health.get("model_loaded") if isinstance(health, dict) else None
        return str(loaded) if isinstance(loaded, str) and loaded else None

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
        self._anthropic = (
            anthropic.AsyncAnthropic(http_client=anthropic_http_client) if provider == "anthropic" else None
        )

    async def user_message(self, scenario: Any, turn: Any, history: Sequence[TurnRecord]) -> UserMessage:
        scripted = verbatim(turn)
        if scripted is not None:
            return scripted
        text, served = await self._generate(_prompt_text(), situation(scenario, turn, history))
        written = clean_message(text)
        if not written:
            raise SimulatorError(f"{_where(scenario, turn)}: the {self.provider} simulator returned an empty message")
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


def turns_needing_model(scenario: Any) -> list[int]:
    """Turn numbers whose message neither is written (`user_message`) nor quoted in the objective:
    only a model can say them. Pure; no server is asked."""
    return [
        getattr(turn, "turn", index)
        for index, turn in enumerate(getattr(scenario, "turns", None) or [], start=1)
        if verbatim(turn) is None and extracted(turn) is None
    ]


async def preflight(simulator: Simulator, scenario: Any) -> None:
    """Fail before a sandbox starts rather than in the middle of a conversation.

    Raises SimulatorError when the scripted simulator meets a turn without `user_message`, and
    SimulatorUnavailable when the local simulator needs a model for some turn and its server has
    none (the engine records SKIPPED_NO_MODEL). Other simulators are checked as they go."""
    if isinstance(simulator, ScriptedSimulator):
        for turn in getattr(scenario, "turns", None) or []:
            if verbatim(turn) is None:
                await simulator.user_message(scenario, turn, [])  # raises the clear error
    elif isinstance(simulator, LocalSimulator):
        needing = turns_needing_model(scenario)
        if needing:
            try:
                await simulator.ensure_model()
            except SimulatorUnavailable as error:
                turns = ", ".join(map(str, needing))
                raise SimulatorUnavailable(
                    f"{_scenario_origin(scenario)}: turn(s) {turns} have no user_message and no quoted "
                    f"question, and no model can write them: {error}"
                ) from error


def make_simulator(config: SimulatorConfig) -> Simulator:
    if config.provider == "scripted":
        return ScriptedSimulator()
    if config.provider == "local":
        return LocalSimulator(config.url, config.model)
    return LLMSimulator(config.provider, config.model, config.url)
