"""What happened in one conversation with the agent under test.

The target (runner/conversation/target.py) produces a Transcript; evidence, judge, scoring and report only
read it. Durations are seconds in fields named *_s.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from runner.records.quantities import Seconds, WholeNumber

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

    name: str = Field(description="the tool's name, as GAIA's MCP bridge reported it")
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="the arguments the agent passed, as sent")
    result_summary: str = Field(
        default="", description="at most a few hundred characters of the tool's result")
    error: str | None = Field(default=None, description="set when the tool call failed")


#: Where a turn's speed figures came from: ``front_door`` (trialbox measured every request of
#: this sandbox at the LLM's front door), ``self_reported`` (the LLM server's own `timings` of
#: this sandbox's requests: non-streamed answers, whose first token the front door cannot see),
#: ``gaia_turn_metrics`` (GAIA's figures, read from the server's *global* /stats: another
#: sandbox's at concurrency > 1; kept only when nothing better answered), ``not_measured``.
PerformanceSource = Literal["front_door", "self_reported", "gaia_turn_metrics", "not_measured"]


class GaiaReportedPerformance(BaseModel):
    """GAIA's own `turn_metrics` for a turn, kept as GAIA reported them (not compared)."""

    time_to_first_token_s: float | None = Field(default=None, description="GAIA's TTFT, s")
    tokens_per_s: float | None = Field(default=None, description="GAIA's decode speed, tokens/s")
    input_tokens: int | None = Field(default=None, description="GAIA's prompt tokens")
    output_tokens: int | None = Field(default=None, description="GAIA's generated tokens")


class TurnPerformance(BaseModel):
    """Speed of one turn. None means not measured (never a guess)."""

    wall_s: Seconds = Field(description="seconds from sending the user message to the final answer")
    time_to_first_token_s: float | None = Field(
        default=None, description="seconds to the first generated token of the turn's first "
        "LLM call (see `source`)")
    tokens_per_s: float | None = Field(
        default=None, description="decode speed over all the turn's LLM calls, tokens per "
        "second (see `source`)")
    input_tokens: int | None = Field(
        default=None, description="prompt tokens of the turn, summed over its LLM calls")
    output_tokens: int | None = Field(
        default=None, description="generated tokens of the turn, summed over its LLM calls")
    source: PerformanceSource | None = Field(
        default=None, description="where the four figures above came from (None: a trace "
        "written before sources were recorded, whose figures are GAIA's)")
    llm_calls: int | None = Field(
        default=None, description="chat requests this sandbox made during the turn (front door)")
    queue_wait_s: float | None = Field(
        default=None, description="seconds the turn's requests waited at the LLM before being "
        "served, summed (front door)")
    forced_calls: int | None = Field(
        default=None, ge=0, description="chat requests of the turn whose decoding the front "
        "door forced (--repeatable-decoding); fewer than `llm_calls` means one went out with "
        "the agent's own sampling (a lease lapsed), so the turn's speed is not comparable; None: "
        "not recorded")
    served_by: list[str] = Field(
        default_factory=list, description="which servers behind the front door answered the "
        "turn's requests (`trialbox ab`'s side, A or B); empty when the door has one server")
    embedded_inputs: int | None = Field(
        default=None, ge=0, description="texts the turn sent to the embedder (front door). GAIA "
        "0.25.1's agent embeds its session documents again on its first turn (its RAG cache "
        "holds chunks, not vectors), so this is about their chunk count there; None: not measured")
    embedding_s: float | None = Field(
        default=None, ge=0, description="seconds the turn's embeddings requests took, summed "
        "(front door): part of wall_s; None: not measured")
    embedded_cached: int | None = Field(
        default=None, ge=0, description="of embedded_inputs, how many the LLM server's "
        "embeddings cache answered without the model (the same vectors it computed before); "
        "None: the server keeps no cache, or not measured")
    simulator_s: float | None = Field(
        default=None, ge=0, description="seconds the user simulator's model took to write this "
        "turn's message, before wall_s began: neither agent nor harness time; None: the "
        "message was not simulated (verbatim or extracted), or not timed")
    reported_by_gaia: GaiaReportedPerformance | None = Field(
        default=None, description="GAIA's own turn_metrics, as reported by GAIA (not compared)")


class TurnRecord(BaseModel):
    """One user message and the agent's full reply to it."""

    turn: WholeNumber = Field(description="1-based turn number, as in the scenario")
    user_message: str = Field(description="the message sent to the agent")
    answer: str = Field(description='the agent\'s final answer text ("" when it gave none)')
    tool_calls: list[ToolCall] = Field(
        default_factory=list, description="the agent's tool calls, in causal order")
    performance: TurnPerformance = Field(description="speed of the turn")
    error: str | None = Field(
        default=None, description="infrastructure failure while running this turn")
    user_message_source: UserMessageSource = Field(
        default="verbatim", description="where the user message came from (see UserMessage)")
    simulator_model: str | None = Field(
        default=None, description="the model that wrote a simulated user message")


class IndexedDocument(BaseModel):
    """The result of indexing one setup document into the agent's RAG store."""

    corpus_doc: str | None = Field(
        default=None, description="manifest document id; None for a path-only setup entry")
    path: str = Field(description="the document's path as the agent saw it")
    chunks: int = Field(default=0, description="RAG chunks the index reported (0 = nothing)")
    error: str | None = Field(default=None, description="why indexing failed, when it did")
    duration_s: float = Field(default=0.0, description="seconds the indexing took")


class SetupTimings(BaseModel):
    """Where a scenario's set-up time went, before its first turn. None means not measured.

    The sandbox phases are measured by the backend when the sandbox is prepared (possibly ahead
    of time, by the warm pool); `waited_s` is what the scenario itself waited for a sandbox."""

    pool_hit: bool | None = Field(
        default=None, description="the sandbox was already prepared (warm pool) when asked for")
    waited_s: float | None = Field(
        default=None, description="seconds from asking for a sandbox to having a ready one")
    container_create_s: float | None = Field(
        default=None, description="seconds to create the sandbox's network and containers")
    gaia_import_s: float | None = Field(
        default=None, description="seconds from the Agent UI process start to GAIA imported")
    ui_ready_s: float | None = Field(
        default=None, description="seconds from containers created to the Agent UI answering")
    mcp_ready_s: float | None = Field(
        default=None, description="seconds from containers created to the MCP bridge answering")
    session_s: float | None = Field(
        default=None, description="seconds to create the chat session (and switch its device)")
    indexing_s: float | None = Field(
        default=None, description="seconds to index the setup documents")
    indexing_embedded_inputs: int | None = Field(
        default=None, ge=0, description="texts the sandbox sent to the embedder while its setup "
        "documents indexed (front door): about their chunk count; None: not measured")
    indexing_embedded_cached: int | None = Field(
        default=None, ge=0, description="of those, how many the LLM server's embeddings cache "
        "answered without the model; None: the server keeps no cache, or not measured")
    teardown_s: float | None = Field(
        default=None, description="seconds to collect the used sandbox's artifacts and remove it, "
        "after the result was recorded and while the next scenario ran (not in the wall time)")


class Transcript(BaseModel):
    """A whole conversation: setup, then every turn in order."""

    scenario_id: str = Field(description="the scenario's id")
    session_id: str | None = Field(default=None, description="the Agent UI's chat session id")
    device: str | None = Field(
        default=None, description="the device the GAIA session was switched to (cpu|gpu|npu)")
    agent_model: str | None = Field(
        default=None, description="the chat model the Agent UI asked the LLM server for")
    agent_id: str | None = Field(default=None, description="the GAIA agent id the session ran")
    gaia_version: str | None = Field(default=None, description="amd-gaia version of the Agent UI")
    indexed: list[IndexedDocument] = Field(
        default_factory=list, description="setup documents indexed before the first turn")
    turns: list[TurnRecord] = Field(default_factory=list, description="every turn, in order")
    setup: SetupTimings | None = Field(
        default=None, description="where the set-up time before the first turn went")
