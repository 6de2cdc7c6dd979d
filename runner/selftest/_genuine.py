"""The genuine attempt at a turn: an answer that is the turn's ground truth and nothing else,
and a trajectory that makes the calls its tool checks ask for.

The answer is never built from a check: a check that asks for something the ground truth does
not say is the check's fault, and the self-test must say so (not passable) rather than append
what it asks for and call the scenario sound.
"""

from __future__ import annotations

import re
from typing import Any

from runner.records.transcript import ToolCall
from runner.scenarios import (
    AnswerContains,
    AnswerNotContains,
    AnswerNumber,
    ArgumentMatcher,
    Check,
    Fact,
    Manifest,
    Scenario,
    ToolCalled,
    ToolsExact,
    ToolsInOrder,
    ToolStep,
    Turn,
)
from runner.verdict import Planned, has_expected_answer

__all__ = ["ANSWER_CHECKS", "UNKNOWN", "expected_text", "fact_text", "genuine_calls",
           "ground_truth_answer", "named_fact", "render_number", "wanted"]

UNKNOWN = "I don't know: the documents do not say."
"""What a right answer says when the ground truth is `expected_answer: null`."""

ANSWER_CHECKS = (AnswerContains, AnswerNotContains, AnswerNumber)
"""The checks decided on the answer's text: only a ground truth can show them passable."""


def render_number(value: float) -> str:
    """A check's value the way a person writes it: 2450000 -> "2,450,000", 0.125 -> "0.125"."""
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.6g}"


def _as_text(value: str | int | float | list[str]) -> str:
    if isinstance(value, list):
        return "; ".join(str(item) for item in value)
    if isinstance(value, float | int) and not isinstance(value, bool):
        return render_number(float(value))
    return str(value)


def expected_text(turn: Turn) -> str | None:
    """The turn's expected answer as text (a list joined with "; "), None when none is given
    (no key, or null)."""
    truth = turn.ground_truth
    if truth is None or not has_expected_answer(truth) or truth.expected_answer is None:
        return None
    return _as_text(truth.expected_answer)


def fact_text(fact: Fact) -> str | None:
    """A manifest fact's answer as text; None when the document does not say."""
    return None if fact.answer is None else _as_text(fact.answer)


def named_fact(turn: Turn, manifest: Manifest | None) -> Fact | None:
    """The manifest fact the turn's ground truth names (doc_id + fact_id), if it exists."""
    truth = turn.ground_truth
    if manifest is None or truth is None or not truth.doc_id or not truth.fact_id:
        return None
    for doc in manifest.documents + manifest.adversarial_documents:
        if doc.id == truth.doc_id:
            return next((fact for fact in doc.facts if fact.id == truth.fact_id), None)
    return None


def ground_truth_answer(turn: Turn, manifest: Manifest | None) -> str | None:
    """The right answer as the ground truth alone gives it: `expected_answer`; "I don't know"
    for `expected_answer: null`; with no `expected_answer` key, the answer of the fact the
    ground truth names in the manifest (null there: "I don't know"). None when the turn has
    no ground truth to answer from — its answer checks are then the judge's to decide."""
    truth = turn.ground_truth
    if truth is None:
        return None
    if truth.has_expected_answer:
        return UNKNOWN if truth.must_say_unknown else expected_text(turn)
    fact = named_fact(turn, manifest)
    if fact is None:
        return None
    text = fact_text(fact)
    return UNKNOWN if text is None else text


def wanted(check: Check) -> str:
    """What an answer check asks for, as the not-passable line quotes it."""
    if isinstance(check, AnswerNumber):
        return f"{render_number(check.value)} (±{check.tolerance:.2%})"
    if isinstance(check, AnswerNotContains):
        return f"no {check.text!r}"
    if isinstance(check, AnswerContains):
        return repr(check.text)
    return check.type


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
