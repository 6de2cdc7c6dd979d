"""What the agent did, as evidence: its tool calls in causal order and its final answers.

Evidence is read from a Transcript (runner/records/transcript.py) and never from the agent's own
account of what it did. It is JSON-serialisable because it goes into the trace next to the
judge's verdicts, so a reader can see what every check and claim was decided on.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from runner.records.transcript import IndexedDocument, ToolCall, Transcript, TurnRecord

# The Agent UI reports its own session indexing (before the model runs) as a step named
# "index_documents" (gaia/ui/_chat_helpers.py, 0.25.1; no agent tool has that name). It is the
# harness's doing, not the agent's choice, so checks on the agent's trajectory leave it out;
# the transcript keeps it.
UI_INDEXING_STEP = "index_documents"

E = TypeVar("E")
A = TypeVar("A")


class CallEvidence(BaseModel):
    """One tool call, placed in the whole scenario's trajectory."""

    position: int  # 1-based position in the whole-scenario trajectory
    turn: int
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result_summary: str = ""
    failed: bool = False
    error: str | None = None

    def describe(self, width: int = 80) -> str:
        """`name(key=value, …)`, shortened for diagnostics."""
        arguments = ", ".join(f"{key}={json.dumps(value, default=str)}"
                              for key, value in self.arguments.items())
        text = f"{self.name}({arguments})"
        return text if len(text) <= width else text[: width - 2] + "…)"


class TurnEvidence(BaseModel):
    """One turn: what the user said, every tool call in order, and the final answer."""

    turn: int
    user_message: str = ""
    answer: str = ""
    calls: list[CallEvidence] = Field(default_factory=list)
    error: str | None = None  # an infrastructure failure while the turn ran

    @classmethod
    def from_record(cls, record: TurnRecord, first_position: int = 1) -> TurnEvidence:
        chosen = [call for call in record.tool_calls if call.name != UI_INDEXING_STEP]
        calls = [_call(call, record.turn, first_position + offset)
                 for offset, call in enumerate(chosen)]
        return cls(turn=record.turn, user_message=record.user_message, answer=record.answer,
                   calls=calls, error=record.error)

    @property
    def tool_names(self) -> list[str]:
        return [call.name for call in self.calls]


class Evidence(BaseModel):
    """The whole scenario: every turn's evidence and the setup's indexing results."""

    scenario_id: str
    turns: list[TurnEvidence] = Field(default_factory=list)
    indexed: list[IndexedDocument] = Field(default_factory=list)

    @classmethod
    def from_transcript(cls, transcript: Transcript) -> Evidence:
        turns, position = [], 1
        for record in transcript.turns:
            evidence = TurnEvidence.from_record(record, first_position=position)
            position += len(evidence.calls)
            turns.append(evidence)
        return cls(scenario_id=transcript.scenario_id, turns=turns,
                   indexed=list(transcript.indexed))

    @property
    def trajectory(self) -> list[CallEvidence]:
        """Every tool call of the scenario, in causal order across turns."""
        return [call for turn in self.turns for call in turn.calls]

    def turn(self, number: int) -> TurnEvidence | None:
        return next((turn for turn in self.turns if turn.turn == number), None)

    @property
    def final_answers(self) -> dict[int, str]:
        return {turn.turn: turn.answer for turn in self.turns}


def _call(call: ToolCall, turn: int, position: int) -> CallEvidence:
    return CallEvidence(position=position, turn=turn, name=call.name,
                        arguments=dict(call.arguments), result_summary=call.result_summary,
                        failed=call.error is not None, error=call.error)


# --- trajectory helpers ------------------------------------------------------------------
# `matches(expected_item, actual_item)` defaults to equality, so plain lists of tool names
# work; checks pass a matcher that also looks at a call's arguments.

def in_order_matches(expected: Sequence[E], actual: Sequence[A],
                     matches: Callable[[E, A], bool] = operator.eq) -> list[int]:
    """Indices into `actual` matched by the leading steps of `expected`, earliest first.

    Greedy earliest matching is optimal for subsequences: taking the first possible call for
    each step leaves the most calls for the steps after it. The result is shorter than
    `expected` when the subsequence is incomplete; its length says how far it got.
    """
    found: list[int] = []
    start = 0
    for step in expected:
        index = next((i for i in range(start, len(actual)) if matches(step, actual[i])), None)
        if index is None:
            break
        found.append(index)
        start = index + 1
    return found


def is_in_order_subsequence(expected: Sequence[E], actual: Sequence[A],
                            matches: Callable[[E, A], bool] = operator.eq) -> bool:
    """The expected steps occur in `actual` in this order; other items may be interleaved."""
    return len(in_order_matches(expected, actual, matches)) == len(expected)


def first_difference(expected: Sequence[E], actual: Sequence[A],
                     matches: Callable[[E, A], bool] = operator.eq) -> int | None:
    """The first index where the two trajectories differ (incl. one ending early), or None."""
    for index in range(max(len(expected), len(actual))):
        if index >= len(expected) or index >= len(actual):
            return index
        if not matches(expected[index], actual[index]):
            return index
    return None


def is_exact(expected: Sequence[E], actual: Sequence[A],
             matches: Callable[[E, A], bool] = operator.eq) -> bool:
    """`actual` is exactly the expected trajectory, item for item, nothing else."""
    return first_difference(expected, actual, matches) is None
