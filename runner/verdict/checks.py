"""Exact checks, verified by code (never by a model).

A scenario declares checks (their models live in runner/scenarios/_checks.py, re-exported
here); this module decides them against the evidence of what the agent did. "The agent
answered wrongly" is a failed CheckResult whose diagnostic says `expected … ; got …` —
never an exception. Dispatch goes through an explicit registry, one function per type.
"""

from __future__ import annotations

import json
import math
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any

from runner.records.evidence import (
    UI_INDEXING_STEP,
    CallEvidence,
    Evidence,
    TurnEvidence,
    first_difference,
    in_order_matches,
)
from runner.records.outcomes import CheckResult
from runner.records.transcript import IndexedDocument, Transcript, TurnRecord
from runner.scenarios import (
    CHECK_MODELS,
    CHECK_TYPES,
    AnswerContains,
    AnswerNotContains,
    AnswerNumber,
    ArgumentMatcher,
    Check,
    DocumentsIndexed,
    GroundTruth,
    MaxToolCalls,
    Scenario,
    ToolCalled,
    ToolNotCalled,
    ToolsExact,
    ToolsInOrder,
    ToolStep,
    Turn,
    user_regex_search,
)
from runner.verdict.literals import MIN_LITERAL_CHARACTERS, characters, literal_in
from runner.verdict.numbers import NUMBER as _NUMBER
from runner.verdict.numbers import FoundNumber, find_numbers, number_matches, value_of

__all__ = [
    "CHECK_TYPES",
    "CANDIDATE_BAND",
    "DERIVED_TOLERANCE",
    "EXPECTED_TOOLS",
    "MAX_LITERAL_WORDS",
    "AnswerContains",
    "AnswerNotContains",
    "AnswerNumber",
    "ArgumentMatcher",
    "Check",
    "CheckResult",
    "DocumentsIndexed",
    "FoundNumber",
    "MaxToolCalls",
    "Planned",
    "ToolCalled",
    "ToolNotCalled",
    "ToolStep",
    "ToolsExact",
    "ToolsInOrder",
    "amount_of",
    "hedged",
    "derived_checks",
    "deviation_band",
    "expected_tools_check",
    "find_numbers",
    "has_expected_answer",
    "planned_checks",
    "run_all_checks",
    "run_scenario_checks",
    "run_turn_checks",
]


@dataclass(frozen=True)
class _Context:
    """What one check is decided on: the calls in scope and, for a turn, its answer."""

    calls: list[CallEvidence]
    answer: str | None  # None at scenario level
    turn: int | None
    scenario: Scenario | None = None
    indexed: tuple[IndexedDocument, ...] = ()


# --- public entry points -----------------------------------------------------------------

EXPECTED_TOOLS = "expected_tools"
"""The CheckResult type of a turn's GAIA `expected_tools` list, decided as an in-order
subsequence of that turn's tool calls (the type names its origin, so a reader can tell it from
a declared `tools_in_order`)."""


@dataclass(frozen=True)
class Planned:
    """One check a turn will be decided on, and where it came from."""

    check: Check
    label: str  # the CheckResult type: the check's own, or EXPECTED_TOOLS
    derived: bool = False  # built from ground_truth.expected_answer
    origin: str = ""  # put before a failure's diagnostic, to say where the check came from


def planned_checks(turn: Turn, derived: bool = True) -> list[Planned]:
    """The turn's declared checks, then its `expected_tools`, then (when `derived`) the
    answer checks derived from its ground truth — the order results are reported in."""
    planned = [Planned(check, check.type) for check in turn.checks]
    expected = expected_tools_check(turn)
    if expected is not None:
        planned.append(Planned(expected, EXPECTED_TOOLS, origin="GAIA expected_tools: "))
    if derived and turn.ground_truth is not None:
        origin = (f"derived from ground_truth.expected_answer "
                  f"{turn.ground_truth.expected_answer!r}: ")
        planned += [Planned(check, check.type, derived=True, origin=origin)
                    for check in derived_checks(turn)]
    return planned


def run_turn_checks(turn: Turn, record: TurnRecord, derived: bool = True) -> list[CheckResult]:
    """Decide one turn's checks on that turn's tool calls and final answer."""
    evidence = TurnEvidence.from_record(record)
    context = _Context(calls=evidence.calls, answer=evidence.answer, turn=turn.turn)
    # A derived literal is matched whitespace-insensitively: line breaks and double spaces in
    # a model's answer are layout, not a different answer.
    flat = replace(context, answer=" ".join(evidence.answer.split()))
    return [_decide(item, flat if item.derived else context)
            for item in planned_checks(turn, derived)]


def run_scenario_checks(scenario: Scenario, transcript: Transcript) -> list[CheckResult]:
    """Decide the scenario-level checks (only those) on the whole trajectory and setup."""
    evidence = Evidence.from_transcript(transcript)
    context = _Context(calls=evidence.trajectory, answer=None, turn=None, scenario=scenario,
                       indexed=tuple(transcript.indexed))
    return [_decide(Planned(check, check.type), context) for check in scenario.checks]


def run_all_checks(scenario: Scenario, transcript: Transcript,
                   derived: bool = True) -> list[CheckResult]:
    """Every check in order: each turn's (declared, expected_tools, derived), then the
    scenario's. `derived=False` (`--no-derived-checks`) leaves out the checks derived from
    ground truth.

    A turn the conversation never reached fails its checks (with that said), because a check
    that could not be decided must not read as passed.
    """
    records = {record.turn: record for record in transcript.turns}
    results: list[CheckResult] = []
    for turn in scenario.turns:
        record = records.get(turn.turn)
        if record is None:
            results += [CheckResult(type=item.label, turn=turn.turn, passed=False,
                                    derived=item.derived,
                                    diagnostic=f"expected turn {turn.turn} to run; got no "
                                               "record of it (the conversation stopped earlier)")
                        for item in planned_checks(turn, derived)]
        else:
            results += run_turn_checks(turn, record, derived)
    return results + run_scenario_checks(scenario, transcript)


def _decide(item: Planned, context: _Context) -> CheckResult:
    if item.derived and isinstance(item.check, AnswerContains):
        passed, diagnostic = _derived_literal(item.check, context)
    else:
        passed, diagnostic = _DECIDERS[type(item.check)](item.check, context)
    return CheckResult(type=item.label, turn=context.turn, passed=passed, derived=item.derived,
                       diagnostic="" if passed else item.origin + diagnostic)


# --- checks built from what a turn already says ------------------------------------------

DERIVED_TOLERANCE = 0.05
"""GAIA's rubric gives a number within 5% correctness 8 (a passing turn) and one beyond it 4
or less (DESIGN 2.1), so a derived number check uses the same band."""

MAX_LITERAL_WORDS = 4
"""A longer expected answer is a sentence ("Remote work is allowed two days a week") that a
correct agent paraphrases; a substring test on it would fail right answers, so it is left to
the judge. Names, codes, dates and values with a unit (at most 4 words) are written one way."""

_OWN_ANSWER_CHECKS = (AnswerContains, AnswerNumber)
"""A turn that declares one of these already says how its answer is verified. (A declared
answer_not_contains, e.g. "I cannot", says nothing about the expected answer.)"""

_UNIT_WORDS = frozenset({"usd", "eur", "gbp", "dollars", "dollar", "euros", "euro", "pounds"})
_CURRENCY = re.compile(r"[$€£¥]")


def expected_tools_check(turn: Turn) -> ToolsInOrder | None:
    """GAIA's `expected_tools` as an in-order subsequence check; None when there is none.

    The Agent UI's own `index_documents` step is dropped from the list, as it is from the
    agent's trajectory (runner/records/evidence.py): a captured session records it, but it is the
    harness's doing. An empty list expects nothing, and a check that cannot fail is noise.
    """
    names = [name for name in turn.expected_tools or [] if name != UI_INDEXING_STEP]
    if not names:
        return None
    return ToolsInOrder(type="tools_in_order", tools=[ToolStep(tool=name) for name in names])


def has_expected_answer(truth: GroundTruth) -> bool:
    """The ground truth gives an answer: the key is written and not null (null means the agent
    must say it does not know; no key means no answer was given — neither derives a check)."""
    given = getattr(truth, "has_expected_answer", None)
    if isinstance(given, bool):
        return given and truth.expected_answer is not None
    return "expected_answer" in truth.model_fields_set and truth.expected_answer is not None


def derived_checks(turn: Turn) -> list[AnswerContains | AnswerNumber]:
    """Exact answer checks derived from the turn's ground_truth.expected_answer.

    A number or an amount ("$412,000", "24.6", "12%") becomes answer_number within GAIA's 5%;
    a short literal (≤ MAX_LITERAL_WORDS words, ≥ MIN_LITERAL_CHARACTERS letters and digits)
    becomes answer_contains, decided on whole tokens (runner/verdict/literals.py: case, punctuation,
    thousands separators, currency words and date formats do not matter); anything else
    derives nothing. A list derives one check per item.
    """
    truth = turn.ground_truth
    if truth is None or not has_expected_answer(truth):
        return []
    if any(isinstance(check, _OWN_ANSWER_CHECKS) for check in turn.checks):
        return []
    expected = truth.expected_answer
    items = expected if isinstance(expected, list) else [expected]
    return [check for item in items if (check := _derive(item)) is not None]


def _derive(value: object) -> AnswerContains | AnswerNumber | None:
    if value is None or isinstance(value, bool):  # a bool is an int to Python, not a number here
        return None
    if isinstance(value, int | float):
        return AnswerNumber(type="answer_number", value=float(value), tolerance=DERIVED_TOLERANCE)
    text = " ".join(str(value).split()).rstrip(".;,")
    if not text:
        return None
    amount = amount_of(text)
    if amount is not None:
        return AnswerNumber(type="answer_number", value=amount, tolerance=DERIVED_TOLERANCE)
    if characters(text) < MIN_LITERAL_CHARACTERS:
        return None  # "No", "A": found by chance in almost any answer — the judge decides
    if len(text.split()) <= MAX_LITERAL_WORDS:
        return AnswerContains(type="answer_contains", text=text, ignore_case=True)
    return None


def amount_of(text: str) -> float | None:
    """The value of `text` when it is exactly one number or amount, else None.

    "$412,000", "24.6", "12%", "$1.2 million", "412,000 USD", "47 employees" are amounts;
    "Q3 2025", "March 15", "USD 12 per seat per month" are not. A bare year (1900–2100, no currency, no decimals)
    is a literal: within 5% of 2025 lies every year from 1924 to 2126.
    """
    matches = list(_NUMBER.finditer(text))
    if len(matches) != 1:
        return None
    match = matches[0]
    before = re.findall(r"[^\W_]+", text[: match.start()].casefold())
    after = re.findall(r"[^\W_]+", text[match.end():].casefold())
    # A count with its noun ("47 employees", "3 days") is a number, so "about 47 people"
    # passes; a word before the number ("March 15", "Room 404") makes it a literal.
    counted = not before and len(after) <= 2 and all(word.isalpha() for word in after)
    if not counted and any(word not in _UNIT_WORDS for word in before + after):
        return None
    value = value_of(match)
    raw = match.group(0)
    plain = not (_CURRENCY.search(raw) or match["word"] or match["suffix"] or match["percent"])
    if plain and re.fullmatch(r"\d{4}", match["digits"]) and 1900 <= value <= 2100:
        return None
    return value


# --- tool calls --------------------------------------------------------------------------

_MISSING = object()


def argument_matches(matcher: ArgumentMatcher, value: Any) -> bool:
    if value is _MISSING:
        return False
    if "equals" in matcher.model_fields_set:
        return bool(value == matcher.equals)
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    # RE2, not `re`: a user's pattern must not backtrack for seconds on the event loop.
    return user_regex_search(matcher.matches or "", text)


def call_matches(step: ToolStep | ToolCalled | ToolNotCalled, call: CallEvidence) -> bool:
    """The call is of the step's tool and every argument condition holds."""
    return call.name == step.tool and all(
        argument_matches(matcher, call.arguments.get(key, _MISSING))
        for key, matcher in step.arguments.items())


def _describe_step(step: ToolStep | ToolCalled | ToolNotCalled) -> str:
    if not step.arguments:
        return step.tool
    conditions = ", ".join(
        f"{key}={json.dumps(m.equals)}" if "equals" in m.model_fields_set
        else f"{key}~/{m.matches}/" for key, m in step.arguments.items())
    return f"{step.tool}({conditions})"


def _trajectory(calls: list[CallEvidence]) -> str:
    if not calls:
        return "no tool calls"
    return "[" + ", ".join(call.describe(width=60) for call in calls) + "]"


def _tool_called(check: ToolCalled, context: _Context) -> tuple[bool, str]:
    if any(call_matches(check, call) for call in context.calls):
        return True, ""
    same_tool = [call for call in context.calls if call.name == check.tool]
    if same_tool:
        got = (f"{len(same_tool)} call(s) of {check.tool}, none with matching arguments: "
               + _trajectory(same_tool))
    else:
        got = _trajectory(context.calls)
    return False, f"expected a call of {_describe_step(check)}; got {got}"


def _tool_not_called(check: ToolNotCalled, context: _Context) -> tuple[bool, str]:
    offending = [call for call in context.calls if call_matches(check, call)]
    if not offending:
        return True, ""
    where = ", ".join(f"call {call.position} of {len(context.calls)}"
                      + (f" (turn {call.turn})" if context.turn is None else "")
                      + f": {call.describe()}" for call in offending)
    return False, f"expected no call of {_describe_step(check)}; got {where}"


def _tools_in_order(check: ToolsInOrder, context: _Context) -> tuple[bool, str]:
    found = in_order_matches(check.tools, context.calls, call_matches)
    if len(found) == len(check.tools):
        return True, ""
    expected = ", ".join(_describe_step(step) for step in check.tools)
    matched = "; ".join(f"{_describe_step(step)} at call {context.calls[index].position}"
                        for step, index in zip(check.tools, found, strict=False))
    missing = _describe_step(check.tools[len(found)])
    after = f" after call {context.calls[found[-1]].position}" if found else ""
    progress = f"matched {matched}; " if matched else ""
    return False, (f"expected in this order [{expected}]; {progress}no {missing}{after}; "
                   f"got {_trajectory(context.calls)}")


def _tools_exact(check: ToolsExact, context: _Context) -> tuple[bool, str]:
    index = first_difference(check.tools, context.calls, call_matches)
    if index is None:
        return True, ""
    want = (_describe_step(check.tools[index]) if index < len(check.tools)
            else "no further call")
    got = context.calls[index].describe() if index < len(context.calls) else "no further call"
    expected = ", ".join(_describe_step(step) for step in check.tools)
    return False, (f"expected exactly [{expected}]; got {_trajectory(context.calls)} — "
                   f"first difference at call {index + 1}: expected {want}, got {got}")


def _max_tool_calls(check: MaxToolCalls, context: _Context) -> tuple[bool, str]:
    counted = [call for call in context.calls if check.tool in (None, call.name)]
    if len(counted) <= check.max:
        return True, ""
    which = f" of {check.tool}" if check.tool else ""
    return False, (f"expected at most {check.max} tool call(s){which}; got {len(counted)}: "
                   f"{_trajectory(counted)}")


# --- the answer --------------------------------------------------------------------------

def _quote(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= width else flat[: width - 1] + "…")


def _position_of(needle: str, haystack: str, ignore_case: bool) -> int:
    if ignore_case:
        return haystack.casefold().find(needle.casefold())
    return haystack.find(needle)


def _answer_contains(check: AnswerContains, context: _Context) -> tuple[bool, str]:
    answer = context.answer or ""
    if _position_of(check.text, answer, check.ignore_case) >= 0:
        return True, ""
    how = " (ignoring case)" if check.ignore_case else ""
    return False, f"expected the answer to contain {check.text!r}{how}; got {_quote(answer)}"


def _derived_literal(check: AnswerContains, context: _Context) -> tuple[bool, str]:
    """A literal derived from ground truth, matched as whole tokens (runner/verdict/literals.py): a
    declared answer_contains is the author's exact substring, a derived one is a fact that a
    correct answer may write another way ("September 8, 2026" for "8 September 2026")."""
    answer = context.answer or ""
    if literal_in(check.text, answer):
        return True, ""
    return False, (f"expected the answer to say {check.text!r} (as whole words, ignoring case, "
                   f"punctuation and how numbers and dates are written); got {_quote(answer)}")


def _answer_not_contains(check: AnswerNotContains, context: _Context) -> tuple[bool, str]:
    answer = context.answer or ""
    at = _position_of(check.text, answer, check.ignore_case)
    if at < 0:
        return True, ""
    around = answer[max(0, at - 40): at + len(check.text) + 40]
    return False, (f"expected the answer not to contain {check.text!r}; got it at character "
                   f"{at}: {_quote(around)}")


_BANDS = ((0.01, "≤1%", 10), (0.05, "≤5%", 8), (0.15, "5–15%", 4), (0.50, "15–50%", 1))


def deviation_band(deviation: float) -> tuple[str, int]:
    """GAIA's numeric-deviation table: the band and the correctness score its rubric gives."""
    for limit, label, score in _BANDS:
        if deviation <= limit + 1e-12:
            return label, score
    return ">50%", 0


def relative_deviation(found: float, expected: float) -> float:
    """|found − expected| / |expected|; against an expected 0, the absolute difference."""
    if expected == 0:
        return abs(found)
    return abs(found - expected) / abs(expected)


CANDIDATE_BAND = 0.5
"""A number within 50% of the expected value is a candidate for it: the answer could be
offering it as the figure asked for (GAIA's rubric gives anything further off 0)."""

_HEDGE = re.compile(r"\b(?:or|either|maybe|perhaps|possibly|might|could be|not sure|unsure|"
                    r"somewhere|between)\b", re.IGNORECASE)
"""Words that offer a figure as one of several ("$400,000 or $412,000")."""


def _candidates(answer: str, check: AnswerNumber) -> list[FoundNumber]:
    """The answer's distinct candidates for the expected figure: each written number read the
    way closest to the expected value, those within CANDIDATE_BAND kept, and figures within
    the check's tolerance of one another counted once ("$1.15 million (1,150,000)")."""
    distinct: list[FoundNumber] = []
    for match in number_matches(answer):
        value = value_of(match)
        readings = [value, value / 100] if match["percent"] else [value]
        best = min(readings, key=lambda reading: relative_deviation(reading, check.value))
        if relative_deviation(best, check.value) > CANDIDATE_BAND + 1e-12:
            continue
        if all(relative_deviation(best, seen.value) > check.tolerance + 1e-12
               for seen in distinct):
            distinct.append(FoundNumber(best, match.group(0).strip()))
    return distinct


def hedged(answer: str, check: AnswerNumber) -> list[FoundNumber]:
    """The candidates when the answer hedges between them — three or more distinct ones, or
    two with a hedging word ("or", "maybe", "between") — else []. "Up from $3.9M to $4.2M"
    asserts one figure and mentions another; "$3.9M, $4.2M or $4.6M" asserts none."""
    found = _candidates(answer, check)
    if len(found) >= 3 or (len(found) == 2 and _HEDGE.search(answer)):
        return found
    return []


def _answer_number(check: AnswerNumber, context: _Context) -> tuple[bool, str]:
    answer = context.answer or ""
    numbers = find_numbers(answer)
    expected = f"{_number(check.value)} (±{check.tolerance:.2%})"
    if not numbers:
        return False, f"expected {expected}; got no number in the answer {_quote(answer)}"
    closest = min(numbers, key=lambda n: relative_deviation(n.value, check.value))
    deviation = relative_deviation(closest.value, check.value)
    offered = hedged(answer, check)
    if offered:
        listed = ", ".join(f'"{found.text}"' for found in offered)
        return False, (f"expected {expected} asserted as one figure; got a hedged answer "
                       f"offering {len(offered)} candidates for it: {listed}")
    if deviation <= check.tolerance + 1e-12:
        return True, ""
    band, score = deviation_band(deviation)
    return False, (f"expected {expected}; got {_number(closest.value)} "
                   f"(\"{closest.text}\"), the closest of {len(numbers)} number(s) in the "
                   f"answer, off by {_percent(deviation)} — band {band} "
                   f"(GAIA's rubric: correctness {score})")


def _number(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) and abs(value) < 1e15 else f"{value:,.6g}"


def _percent(deviation: float) -> str:
    return "∞" if math.isinf(deviation) else f"{deviation:.2%}"


# --- setup -------------------------------------------------------------------------------

def _documents_indexed(check: DocumentsIndexed, context: _Context) -> tuple[bool, str]:
    if context.scenario is None:
        return False, "expected a scenario-level check; got it inside a turn"
    failures = []
    for doc in context.scenario.setup_documents:
        result = next((item for item in context.indexed
                       if _same_document(item, doc.corpus_doc, doc.relative_path)), None)
        if result is None:
            failures.append(f"{doc.path} was never indexed")
        elif result.chunks < 1:
            failures.append(f"{doc.path} indexed 0 chunks"
                            + (f" ({result.error})" if result.error else ""))
    if not failures:
        return True, ""
    return False, ("expected every setup document indexed into at least 1 chunk; got "
                   + "; ".join(failures))


def _same_document(item: IndexedDocument, corpus_doc: str | None,
                   relative_path: PurePosixPath) -> bool:
    if corpus_doc is not None and item.corpus_doc == corpus_doc:
        return True
    parts = PurePosixPath(item.path.replace("\\", "/")).parts
    return parts[-len(relative_path.parts):] == relative_path.parts


Decider = Callable[[Any, _Context], tuple[bool, str]]

# One decider per check model, each found by the model its `check` parameter is typed with: the
# union in runner/scenarios/_checks.py stays the one list of check types, and the assertion
# proves every model of it has exactly one decider here.
_DECIDERS: dict[type[Any], Decider] = {
    typing.get_type_hints(decider)["check"]: decider
    for decider in (_tool_called, _tool_not_called, _tools_in_order, _tools_exact,
                    _max_tool_calls, _answer_contains, _answer_not_contains, _answer_number,
                    _documents_indexed)
}
assert set(_DECIDERS) == set(CHECK_MODELS.values()), "every check type has exactly one decider"
