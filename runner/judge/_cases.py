"""What the judge is shown: the case texts for a turn, a whole scenario, and a set of claims.

The rubrics (eval/prompts/*.md) are the stable system prompts; these functions render the
variable part. Scenarios are read duck-typed (id, description, persona, expected_outcome,
turns[].turn/objective/ground_truth/success_criteria, and GAIA's expected_behavior, fact_ids,
expected_phrases, expected_tools, persona, note, captured_from, plus `extra_keys` for keys nobody
declared) so that any object with those fields works. GAIA gives its judge the whole scenario
file; everything in it reaches ours too, each typed key with a label, unknown keys verbatim.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from runner.records.transcript import ToolCall, TurnRecord


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


def _text(value: Any) -> str:
    """A YAML value as the scenario author wrote it: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _extra_lines(obj: Any, title: str) -> list[str]:
    """Keys nobody declared (the loader keeps them in `extra_keys`), shown verbatim: GAIA hands
    its judge the whole scenario file, so a key we do not know may still matter to the grade."""
    extra = _field(obj, "extra_keys") or {}
    if not isinstance(extra, dict) or not extra:
        return []
    return [title] + [f"- {key}: {_text(extra[key])}" for key in sorted(extra)]


def _phrases_line(label: str, obj: Any) -> str:
    phrases = _field(obj, "expected_phrases")
    shown = [phrases] if isinstance(phrases, str) else list(phrases)
    return f"{label}: " + "; ".join(f'"{p}"' for p in shown)


def _setup_documents(scenario: Any) -> list[str]:
    setup = _field(scenario, "setup")
    documents = _field(setup, "index_documents") or []
    paths = []
    for document in documents:
        path = document if isinstance(document, str) else _field(document, "path")
        doc_id = None if isinstance(document, str) else _field(document, "corpus_doc")
        if path:
            paths.append(f"{path} ({doc_id})" if doc_id else str(path))
    lines = [f"Documents indexed before the first turn: {', '.join(paths)}"] if paths else []
    if _field(setup, "notes"):
        lines.append(f"Setup notes (what the harness prepared): {_text(_field(setup, 'notes'))}")
    if _field(setup, "memory_clear") is not None:
        lines.append(f"Setup memory_clear: {_text(_field(setup, 'memory_clear'))}")
    return lines + _extra_lines(setup, "Other setup keys (verbatim from the scenario file):")


def _scenario_header(scenario: Any) -> list[str]:
    lines = [
        f"SCENARIO: {_field(scenario, 'id')} — {_field(scenario, 'name') or ''}".rstrip(" —"),
        f"Description: {_field(scenario, 'description') or '(none)'}",
        f"Persona: {_field(scenario, 'persona') or '(unspecified)'}",
        f"Expected outcome: {_field(scenario, 'expected_outcome') or '(none given)'}",
    ]
    if _field(scenario, "expected_behavior"):
        lines.append(f"Expected behavior: {_text(_field(scenario, 'expected_behavior'))}")
    if _field(scenario, "captured_from"):
        lines.append(f"Captured from: {_text(_field(scenario, 'captured_from'))}")
    lines.extend(_setup_documents(scenario))
    lines.extend(_extra_lines(scenario, "Other scenario notes (verbatim from the scenario file):"))
    return lines


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


ExpectedAnswer = Literal["given", "must_say_unknown", "absent"]


def expected_answer_state(truth: Any) -> ExpectedAnswer:
    """Whether a ground truth states an answer, states explicitly that there is none (`null`: the
    documents do not contain it), or leaves the key out (no expected answer: the judge grades by
    success criteria and expected behavior). GAIA's tree has all three; only `null` means
    "must say it does not know"."""
    if isinstance(truth, dict):
        present = "expected_answer" in truth
    else:
        declared = getattr(truth, "has_expected_answer", None)
        if callable(declared):
            declared = declared()
        if isinstance(declared, bool):
            present = declared
        elif isinstance(getattr(truth, "model_fields_set", None), set):
            present = "expected_answer" in truth.model_fields_set
        else:
            present = hasattr(truth, "expected_answer")
    if not present:
        return "absent"
    return "must_say_unknown" if _field(truth, "expected_answer") is None else "given"


def _ground_truth_lines(truth: Any) -> list[str]:
    lines = []
    state = expected_answer_state(truth)
    if state == "given":
        lines.append(f"Ground truth expected answer: {_text(_field(truth, 'expected_answer'))}")
    elif state == "must_say_unknown":
        lines.append(
            "Ground truth expected answer: null (the documents do not contain it; the agent must "
            "say it cannot find it)"
        )
    source = [f"document {_field(truth, 'doc_id')}"] if _field(truth, "doc_id") else []
    source += [f"fact {_field(truth, 'fact_id')}"] if _field(truth, "fact_id") else []
    if source:
        lines.append(f"Ground truth source: {', '.join(source)}")
    if _field(truth, "fact_ids"):
        lines.append(f"Ground truth facts: {', '.join(map(str, _field(truth, 'fact_ids')))}")
    if _field(truth, "expected_phrases"):
        lines.append(_phrases_line("Ground truth phrases in a good answer", truth))
    if _field(truth, "expected_behavior"):
        lines.append(f"Ground truth expected behavior: {_text(_field(truth, 'expected_behavior'))}")
    if _field(truth, "note"):
        lines.append(f"Ground truth note: {_text(_field(truth, 'note'))}")
    lines.extend(_extra_lines(truth, "Other ground truth notes (verbatim):"))
    return lines


def _ground_truth(spec: Any) -> list[str]:
    """Everything the scenario says about a correct answer to this turn, each with its label."""
    lines = []
    truth = _field(spec, "ground_truth")
    if truth is not None:
        lines.extend(_ground_truth_lines(truth))
    if _field(spec, "fact_ids"):
        lines.append(f"Facts this turn covers: {', '.join(map(str, _field(spec, 'fact_ids')))}")
    if _field(spec, "expected_behavior"):
        lines.append(f"Expected behavior: {_text(_field(spec, 'expected_behavior'))}")
    if _field(spec, "expected_phrases"):
        lines.append(_phrases_line("Expected phrases in the answer", spec))
    if _field(spec, "expected_tools"):
        lines.append(f"Expected tools (from the captured session): {', '.join(map(str, _field(spec, 'expected_tools')))}")
    criteria = _field(spec, "success_criteria")
    if criteria:
        lines.append(f"Success criteria: {_text(criteria)}")
    if _field(spec, "note"):
        lines.append(f"Turn note: {_text(_field(spec, 'note'))}")
    lines.extend(_extra_lines(spec, "Other notes for this turn (verbatim from the scenario file):"))
    if not lines:
        lines.append("No ground truth or success criteria were given for this turn.")
    elif truth is not None and expected_answer_state(truth) == "absent":
        lines.insert(0, "No expected answer is given for this turn: grade correctness against the "
                        "success criteria and expected behavior below.")
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
    if _field(spec, "persona") and _field(spec, "persona") != _field(scenario, "persona"):
        lines.append(f"Persona for this turn: {_field(spec, 'persona')}")
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
