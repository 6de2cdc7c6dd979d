"""The user simulator chosen for a run, checked before a sandbox starts; the scripted one.

What the "user" says at each turn of a scenario, and where the words came from. Three kinds,
one protocol (`Simulator.user_message` returns a `UserMessage`):

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
expected behaviour or phrases (a user who knows the answer leaks it into the question).

This module holds the scripted simulator, the choice of one from its config, and the check
before a sandbox starts; the model-backed ones are in model_simulators, the words in user_words.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runner.conversation.model_simulators import LLMSimulator, LocalSimulator
from runner.conversation.simulator_config import (
    Simulator,
    SimulatorConfig,
    SimulatorError,
    SimulatorUnavailable,
)
from runner.conversation.user_words import extracted, scenario_origin, turn_origin, verbatim
from runner.records.transcript import TurnRecord, UserMessage


class ScriptedSimulator:
    """Sends each turn's `user_message` exactly as written; anything else is an error."""

    async def user_message(self, scenario: Any, turn: Any, history: Sequence[TurnRecord]) -> UserMessage:
        message = verbatim(turn)
        if message is None:
            raise SimulatorError(
                f"{turn_origin(scenario, turn)} has no user_message, and the scripted simulator cannot "
                "invent one. Add `user_message:` to that turn, or run with another simulator "
                "(--simulator local uses the LLM server; --simulator anthropic, or --simulator "
                "openai --simulator-url URL)."
            )
        return message


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
                    f"{scenario_origin(scenario)}: turn(s) {turns} have no user_message and no quoted "
                    f"question, and no model can write them: {error}"
                ) from error


def make_simulator(config: SimulatorConfig) -> Simulator:
    """The simulator `config` names; no server is asked yet."""
    if config.provider == "scripted":
        return ScriptedSimulator()
    if config.provider == "local":
        return LocalSimulator(config.url, config.model)
    return LLMSimulator(config.provider, config.model, config.url)
