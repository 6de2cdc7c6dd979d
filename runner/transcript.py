"""What happened in one conversation with the agent under test.

The target (runner/target.py) produces a Transcript; evidence, judge, scoring and report only
read it. Durations are seconds in fields named *_s.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

UserMessageSource = Literal["verbatim", "extracted", "simulated"]
"""Where a user turn's words came from: the turn's `user_message` as written, the one question
quoted in its `objective`, or a simulator model writing from the objective and persona."""


class UserMessage(BaseModel):
    """What the user simulator says at one turn, and where the words came from."""

    text: str = Field(description="the message sent to the agent")
    source: UserMessageSource = Field(description="verbatim, extracted from the objective, or simulated")
    model: str | None = Field(default=None, description="the model that wrote it (simulated only)")


class ToolCall(BaseModel):
    """One tool call the agent made during a turn, in causal order."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result_summary: str = ""  # at most a few hundred characters of the tool's result
    error: str | None = None  # set when the tool call failed


class TurnPerformance(BaseModel):
    """Speed of one turn. None means not measured (never a guess)."""

    wall_s: float
    time_to_first_token_s: float | None = None
    tokens_per_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


class TurnRecord(BaseModel):
    """One user message and the agent's full reply to it."""

    turn: int  # 1-based, as in the scenario
    user_message: str
    answer: str  # the agent's final answer text ("" when it gave none)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    performance: TurnPerformance
    error: str | None = None  # infrastructure failure while running this turn
    user_message_source: UserMessageSource = Field(
        default="verbatim", description="where the user message came from (see UserMessage)")
    simulator_model: str | None = Field(
        default=None, description="the model that wrote a simulated user message")


class IndexedDocument(BaseModel):
    """The result of indexing one setup document into the agent's RAG store."""

    corpus_doc: str | None = None
    path: str
    chunks: int = 0
    error: str | None = None
    duration_s: float = 0.0


class Transcript(BaseModel):
    """A whole conversation: setup, then every turn in order."""

    scenario_id: str
    session_id: str | None = None
    device: str | None = None  # the device the GAIA session was switched to (cpu|gpu|npu)
    agent_model: str | None = None
    agent_id: str | None = Field(default=None, description="the GAIA agent id the session ran")
    gaia_version: str | None = Field(default=None, description="amd-gaia version of the Agent UI")
    indexed: list[IndexedDocument] = Field(default_factory=list)
    turns: list[TurnRecord] = Field(default_factory=list)
