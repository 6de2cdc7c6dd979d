"""The genuine attempt at a turn: an answer built from its ground truth and the checks' own
expectations, and a trajectory that makes the calls its tool checks ask for."""

from __future__ import annotations

import re
from typing import Any

from runner.records.transcript import ToolCall
from runner.scenarios import (
    AnswerContains,
    AnswerNumber,
    ArgumentMatcher,
    Scenario,
    ToolCalled,
    ToolsExact,
    ToolsInOrder,
    ToolStep,
    Turn,
)
from runner.verdict import (
    Planned,
    find_numbers,
    has_expected_answer,
    literal_in,
    relative_deviation,
)

__all__ = ["UNKNOWN", "expected_text", "genuine_answer", "genuine_calls", "render_number"]

UNKNOWN = "I don't know: the documents do not say."
"""What a right answer says when the ground truth is `expected_answer: null`."""


def render_number(value: float) -> str:
    """A check's value the way a person writes it: 2450000 -> "2,450,000", 0.125 -> "0.125"."""
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.6g}"


def expected_text(turn: Turn) -> str | None:
    """The turn's expected answer as text (a list joined with "; "), None when none is given
    (no key, or null)."""
    truth = turn.ground_truth
    if truth is None or not has_expected_answer(truth):
        return None
    value = truth.expected_answer
    if isinstance(value, list):
        return "; ".join(str(item) for item in value)
    if isinstance(value, float | int) and not isinstance(value, bool):
        return render_number(float(value))
    return str(value)


def genuine_answer(turn: Turn, planned: list[Planned]) -> str:
    """The ground truth, then whatever a positive answer check asks for that it does not yet
    say (a turn may check the consequence — "Finance Director" — of the fact it cites)."""
    truth = turn.ground_truth
    text = expected_text(turn)
    parts = [text] if text else []
    if truth is not None and truth.must_say_unknown:
        parts.append(UNKNOWN)
    for item in planned:
        check = item.check
        answer = " ".join(parts)
        if isinstance(check, AnswerContains):
            found = (literal_in(check.text, answer) if item.derived
                     else (check.text.casefold() in answer.casefold() if check.ignore_case
                           else check.text in answer))
            if not found:
                parts.append(check.text)
        elif isinstance(check, AnswerNumber) and not _states(answer, check):
            parts.append(render_number(check.value))
    return ". ".join(parts) if parts else UNKNOWN


def _states(answer: str, check: AnswerNumber) -> bool:
    return any(relative_deviation(found.value, check.value) <= check.tolerance + 1e-12
               for found in find_numbers(answer))


def genuine_calls(planned: list[Planned], scenario: Scenario) -> list[ToolCall]:
    """The calls the turn's tool checks ask for, in order, with arguments that satisfy them.

    `tools_exact` is the whole trajectory; otherwise `tools_in_order` / `expected_tools` steps,
    then each `tool_called` not already made. (Limits — tool_not_called, max_tool_calls — ask
    for no call; a genuine trajectory that breaks one shows up as not passable.)
    """
    steps: list[ToolStep | ToolCalled] = []
    for item in planned:
        if isinstance(item.check, ToolsExact):
            return [_call(step, scenario) for step in item.check.tools]
        if isinstance(item.check, ToolsInOrder):
            steps += item.check.tools
    calls = [_call(step, scenario) for step in steps]
    for item in planned:
        if isinstance(item.check, ToolCalled):
            calls.append(_call(item.check, scenario))
    return calls


def _call(step: ToolStep | ToolCalled, scenario: Scenario) -> ToolCall:
    return ToolCall(name=step.tool, arguments={
        key: _argument(matcher, scenario) for key, matcher in step.arguments.items()})


def _argument(matcher: ArgumentMatcher, scenario: Scenario) -> Any:
    """A value the matcher accepts: `equals` as given; for `matches`, the first of the setup
    documents' paths and names, or the pattern read as plain text, that the pattern finds."""
    if "equals" in matcher.model_fields_set:
        return matcher.equals
    pattern = matcher.matches or ""
    candidates = [str(doc.path) for doc in scenario.setup_documents]
    candidates += [doc.relative_path.name for doc in scenario.setup_documents]
    plain = re.sub(r"\\(.)", r"\1", pattern)  # budget_fy2027_plan\.json -> …plan.json
    candidates += [pattern, plain, re.sub(r"[\\^$*+?()\[\]{}|]", "", plain)]
    return next((text for text in candidates if re.search(pattern, text)), pattern)
