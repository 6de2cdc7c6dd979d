"""What a user simulator is: its config, the protocol it keeps, and its two ways to fail."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from runner.records.transcript import TurnRecord, UserMessage


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
