"""What the judge is shown: the case texts for a turn, a whole scenario, and a set of claims.

The rubrics (eval/prompts/*.md) are the stable system prompts; these functions render the
variable part. Scenarios are read duck-typed (id, description, persona, expected_outcome,
turns[].turn/objective/ground_truth/success_criteria) so that any object with those fields works.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from runner.transcript import ToolCall, TurnRecord


def _field(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def scenario_turn(scenario: Any, number: int) -> Any:
    """The scenario's spec for turn `number`, or None when the scenario has no such turn."""
    for spec in _field(scenario, "turns") or []:
        if _field(spec, "turn") == number:
            return spec
    return None


def _block(text: str) -> str:
    return f"<<<\n{text}\n>>>"


def _scenario_header(scenario: Any) -> list[str]:
    return [
        f"SCENARIO: {_field(scenario, 'id')} — {_field(scenario, 'name') or ''}".rstrip(" —"),
        f"Description: {_field(scenario, 'description') or '(none)'}",
        f"Persona: {_field(scenario, 'persona') or '(unspecified)'}",
        f"Expected outcome: {_field(scenario, 'expected_outcome') or '(none given)'}",
    ]


def _tool_call(call: ToolCall) -> str:
    arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
    line = f"- {call.name}({arguments})"
    if call.error:
        line += f"\n  ERROR: {call.error}"
    elif call.result_summary:
        line += f"\n  result: {call.result_summary}"
    return line


def _turn_body(record: TurnRecord) -> list[str]:
    lines = [f"User message:\n{_block(record.user_message)}"]
    if record.tool_calls:
        lines.append("Tool calls, in order:\n" + "\n".join(_tool_call(c) for c in record.tool_calls))
    else:
        lines.append("Tool calls: none")
    if record.error:
        lines.append(f"Harness error during this turn: {record.error}")
    lines.append(f"Assistant's final answer:\n{_block(record.answer or '(empty)')}")
    return lines


def _ground_truth(spec: Any) -> list[str]:
    lines = []
    truth = _field(spec, "ground_truth")
    if truth is not None:
        expected = _field(truth, "expected_answer")
        shown = "null (the documents do not contain it)" if expected is None else str(expected)
        lines.append(f"Ground truth expected answer: {shown}")
        if _field(truth, "note"):
            lines.append(f"Ground truth note: {_field(truth, 'note')}")
    criteria = _field(spec, "success_criteria")
    if criteria:
        lines.append(f"Success criteria: {criteria}")
    if not lines:
        lines.append("No ground truth or success criteria were given for this turn.")
    return lines


def turn_case(scenario: Any, record: TurnRecord, history: Sequence[TurnRecord]) -> str:
    """The text the turn judge grades: the scenario, the conversation so far, this turn."""
    spec = scenario_turn(scenario, record.turn)
    lines = _scenario_header(scenario)
    lines.append("")
    if history:
        lines.append("CONVERSATION BEFORE THIS TURN:")
        for earlier in history:
            lines.append(f"[turn {earlier.turn}] user: {earlier.user_message}")
            lines.append(f"[turn {earlier.turn}] assistant: {earlier.answer or '(empty)'}")
    else:
        lines.append("CONVERSATION BEFORE THIS TURN: none (this is the first turn)")
    lines.append("")
    lines.append(f"TURN {record.turn} TO GRADE")
    if _field(spec, "objective"):
        lines.append(f"The user's objective: {_field(spec, 'objective')}")
    lines.extend(_turn_body(record))
    lines.append("")
    lines.extend(_ground_truth(spec))
    return "\n".join(lines)


def verdict_case(scenario: Any, records: Sequence[TurnRecord], grades: Sequence[Any]) -> str:
    """The text the scenario judge decides on: every turn with its grades."""
    lines = _scenario_header(scenario)
    by_turn = {grade.turn: grade for grade in grades}
    for record in records:
        lines.append("")
        lines.append(f"TURN {record.turn}")
        lines.extend(_turn_body(record))
        lines.extend(_ground_truth(scenario_turn(scenario, record.turn)))
        grade = by_turn.get(record.turn)
        if grade is not None:
            scores = grade.scores.model_dump()
            lines.append(f"Grades: {json.dumps(scores)}; failure category: {grade.failure_category}")
            lines.append(f"Grader's reasoning: {grade.reasoning}")
    return "\n".join(lines)


def claims_case(claims: Sequence[tuple[str, str]], answer: str, reference: str | None) -> str:
    """The text the claim judge labels. The reference appears at most once, marked as an aid."""
    lines = []
    if reference:
        lines.append("REFERENCE (an aid for reading the answer; never evidence for a claim):")
        lines.append(_block(reference))
        lines.append("")
    lines.append("ANSWER:")
    lines.append(_block(answer))
    lines.append("")
    lines.append("CLAIMS (name: claim):")
    lines.extend(f"- {name}: {claim}" for name, claim in claims)
    return "\n".join(lines)
