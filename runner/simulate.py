"""The user simulator: what the "user" says at each turn of a scenario.

Two kinds. ScriptedSimulator sends each turn's `user_message` verbatim — reproducible, no model.
LLMSimulator writes the message from the turn's objective, the persona and the conversation so
far; it is never shown the ground truth (a user who knows the answer leaks it into the question).
In both, a turn that has a `user_message` is sent verbatim: the scenario author's words win.

This module sits left of the judge in the data flow, so it talks to models on its own (plain
text chat) instead of borrowing the judge's structured client.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import anthropic
import httpx
import httpx2
from pydantic import BaseModel, ConfigDict

from runner.transcript import TurnRecord

PROMPT_FILE = "user_simulator.md"


class SimulatorError(RuntimeError):
    """The simulator cannot produce this turn's message (missing script, unreachable model)."""


class SimulatorConfig(BaseModel):
    """How user messages are produced. Chosen apart from the judge (DESIGN 1.5)."""

    model_config = ConfigDict(extra="forbid")

    provider: Literal["scripted", "anthropic", "openai"]
    model: str | None = None  # anthropic/openai; None = the provider's default (or the only model)
    url: str | None = None  # openai: base URL of an OpenAI-compatible server


class Simulator(Protocol):
    async def user_message(self, scenario: Any, turn: Any, history: Sequence[TurnRecord]) -> str: ...


def _scenario_origin(scenario: Any) -> str:
    """Where the scenario came from, for error messages: its file when known, else its id."""
    for name in ("source_file", "source_path", "path"):
        value = getattr(scenario, name, None)
        if value:
            return str(value)
    return f"scenario {getattr(scenario, 'id', '?')}"


class ScriptedSimulator:
    """Sends each turn's `user_message` exactly as written."""

    async def user_message(self, scenario: Any, turn: Any, history: Sequence[TurnRecord]) -> str:
        text = getattr(turn, "user_message", None)
        if not text:
            raise SimulatorError(
                f"{_scenario_origin(scenario)}: turn {getattr(turn, 'turn', '?')} has no "
                "user_message, and the scripted simulator cannot invent one. Add "
                "`user_message:` to that turn, or run with an LLM simulator (--simulator anthropic "
                "or --simulator openai --simulator-url URL)."
            )
        return str(text)


def _prompt_text() -> str:
    root = os.environ.get("TRIALBOX_EVAL_ROOT") or str(Path(__file__).resolve().parents[1] / "eval")
    path = Path(root) / "prompts" / PROMPT_FILE
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SimulatorError(f"{path}: simulator prompt missing; set TRIALBOX_EVAL_ROOT") from None


def situation(scenario: Any, turn: Any, history: Sequence[TurnRecord]) -> str:
    """What the simulated user knows: persona, scenario, this turn's objective, the conversation.

    Deliberately absent: ground_truth, success_criteria, claims, checks and the reference.
    """
    lines = [
        f"Persona: {getattr(scenario, 'persona', None) or 'casual_user'}",
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


def clean_message(text: str) -> str:
    """Strip the wrappers small models add ("User:", surrounding quotes)."""
    message = text.strip()
    for prefix in ("User:", "user:", "USER:"):
        if message.startswith(prefix):
            message = message[len(prefix):].strip()
    if len(message) >= 2 and message[0] == message[-1] and message[0] in "\"'":
        message = message[1:-1].strip()
    return message


class LLMSimulator:
    """Writes user messages with a model; scripted turns are still sent verbatim."""

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
        self.model = model or ("claude-sonnet-4-6" if provider == "anthropic" else None)
        self.url = url
        self.max_tokens = max_tokens
        self._http = http_client or httpx.AsyncClient(timeout=120.0)
        self._anthropic = (
            anthropic.AsyncAnthropic(http_client=anthropic_http_client) if provider == "anthropic" else None
        )

    async def user_message(self, scenario: Any, turn: Any, history: Sequence[TurnRecord]) -> str:
        scripted = getattr(turn, "user_message", None)
        if scripted:
            return str(scripted)
        text = clean_message(await self._generate(_prompt_text(), situation(scenario, turn, history)))
        if not text:
            raise SimulatorError(
                f"{_scenario_origin(scenario)}: turn {getattr(turn, 'turn', '?')}: the "
                f"{self.provider} simulator returned an empty message"
            )
        return text

    async def _generate(self, system: str, user: str) -> str:
        if self._anthropic is not None:
            return await self._generate_anthropic(system, user)
        return await self._generate_openai(system, user)

    async def _generate_anthropic(self, system: str, user: str) -> str:
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
        except anthropic.APIError as error:
            raise SimulatorError(f"anthropic simulator: {error}") from error
        return "".join(block.text for block in reply.content if block.type == "text")

    async def _generate_openai(self, system: str, user: str) -> str:
        base = _api_base(str(self.url))
        body: dict[str, Any] = {
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": 0,
            "max_tokens": self.max_tokens,
            "stream": False,
        }
        body["model"] = self.model or await self._server_model(base)
        reply = await self._send("POST", base + "/chat/completions", body)
        try:
            return str(reply["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError):
            raise SimulatorError(f"openai simulator: unexpected reply {str(reply)[:300]}") from None

    async def _server_model(self, base: str) -> str:
        """A one-model server needs no name: use the first model it lists (remembered)."""
        listing = await self._send("GET", base + "/models", None)
        models = [entry.get("id") for entry in listing.get("data", []) if isinstance(entry, dict)]
        if not models or not models[0]:
            raise SimulatorError(f"openai simulator: {base}/models lists no model; pass --simulator-model")
        self.model = str(models[0])
        return self.model

    async def _send(self, method: str, url: str, body: dict[str, Any] | None) -> Any:
        try:
            response = await self._http.request(method, url, json=body)
        except httpx.ConnectError as error:
            raise SimulatorError(
                f"openai simulator: cannot connect to {url} ({error}); start the server or fix "
                "--simulator-url"
            ) from error
        if response.status_code >= 400:
            raise SimulatorError(f"openai simulator: HTTP {response.status_code} from {url}: {response.text[:300]}")
        try:
            return response.json()
        except ValueError:
            raise SimulatorError(f"openai simulator: {url} returned non-JSON: {response.text[:300]}") from None


def _api_base(url: str) -> str:
    """Same rule as the judge's: an origin gets /v1, a .../chat/completions URL loses it."""
    trimmed = url.rstrip("/")
    trimmed = trimmed.removesuffix("/chat/completions")
    if trimmed.count("/") <= 2:
        trimmed += "/v1"
    return trimmed


def make_simulator(config: SimulatorConfig) -> Simulator:
    if config.provider == "scripted":
        return ScriptedSimulator()
    return LLMSimulator(config.provider, config.model, config.url)
