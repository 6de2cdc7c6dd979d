"""The answer checks: answer_contains, answer_not_contains, answer_number (bands, hedging).

A positive check passes only where the answer *asserts* what it asks for: each mention of the
value is read by the cue rules of runner/verdict/assertions.py, and a value the answer writes
only negated, doubted, superseded, in another period or as one of several fails the check with
the cue it read quoted; a mention the rules cannot read (a conditional, a question, a
comparison) is undecided, which leaves the turn to the judge.
"""

from __future__ import annotations

import math
import re

from runner.scenarios import AnswerContains, AnswerNotContains, AnswerNumber
from runner.verdict.assertions import Cue, names_a_value, reading_of
from runner.verdict.check_context import CheckContext, CheckDecider, Undecided
from runner.verdict.literals import literal_spans
from runner.verdict.numbers import FoundNumber, find_numbers, number_matches, value_of


def _quote(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= width else flat[: width - 1] + "…")


def _position_of(needle: str, haystack: str, ignore_case: bool) -> int:
    if ignore_case:
        return haystack.casefold().find(needle.casefold())
    return haystack.find(needle)


def _asserted(answer: str, spans: list[tuple[int, int]], wanted: str,
              context: CheckContext) -> tuple[bool, str]:
    """Pass when one mention at `spans` asserts the value; else say which cue was read."""
    if not names_a_value(wanted):
        return True, ""  # a word of the answer's wording, not a value (assertions.py)
    reading = reading_of(answer, spans, context.question)
    if reading.asserted:
        return True, ""
    start, end = spans[0]
    said = f"{wanted} is written ({_quote(answer[start:end])}) but {reading.describe()}"
    if reading.cue is Cue.UNDECIDED:
        return False, Undecided(f"{said}: the cue rules cannot tell whether the answer "
                                "asserts it, so the judge decides")
    return False, f"expected the answer to assert {wanted}; {said} in {_quote(answer)}"


def _spans_of(needle: str, haystack: str, ignore_case: bool) -> list[tuple[int, int]]:
    if not needle:
        return []
    text, wanted = ((haystack.casefold(), needle.casefold()) if ignore_case
                    else (haystack, needle))
    spans, at = [], text.find(wanted)
    while at >= 0:
        spans.append((at, at + len(wanted)))
        at = text.find(wanted, at + 1)
    return spans


def _answer_contains(check: AnswerContains, context: CheckContext) -> tuple[bool, str]:
    answer = context.answer or ""
    spans = _spans_of(check.text, answer, check.ignore_case)
    if spans:
        return _asserted(answer, spans, repr(check.text), context)
    how = " (ignoring case)" if check.ignore_case else ""
    return False, f"expected the answer to contain {check.text!r}{how}; got {_quote(answer)}"


def derived_literal(check: AnswerContains, context: CheckContext) -> tuple[bool, str]:
    """A literal derived from ground truth, matched as whole tokens (runner/verdict/literals.py): a
    declared answer_contains is the author's exact substring, a derived one is a fact that a
    correct answer may write another way ("September 8, 2026" for "8 September 2026")."""
    answer = context.answer or ""
    spans = literal_spans(check.text, answer)
    if spans:
        return _asserted(answer, spans, repr(check.text), context)
    return False, (f"expected the answer to say {check.text!r} (as whole words, ignoring case, "
                   f"punctuation and how numbers and dates are written); got {_quote(answer)}")


def _answer_not_contains(check: AnswerNotContains, context: CheckContext) -> tuple[bool, str]:
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
                    r"somewhere|between)\b|\s/\s", re.IGNORECASE)
"""Words that offer a figure as one of several ("$400,000 or $412,000", "47 / 37.6"; a slash
between spaces only: "24/7" and "km/h" offer nothing)."""


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


def _within(match: re.Match[str], check: AnswerNumber) -> bool:
    value = value_of(match)
    readings = [value, value / 100] if match["percent"] else [value]
    return any(relative_deviation(reading, check.value) <= check.tolerance + 1e-12
               for reading in readings)


def _answer_number(check: AnswerNumber, context: CheckContext) -> tuple[bool, str]:
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
        spans = [match.span() for match in number_matches(answer) if _within(match, check)]
        return _asserted(answer, spans, expected, context)
    band, score = deviation_band(deviation)
    return False, (f"expected {expected}; got {_number(closest.value)} "
                   f"(\"{closest.text}\"), the closest of {len(numbers)} number(s) in the "
                   f"answer, off by {_percent(deviation)} — band {band} "
                   f"(GAIA's rubric: correctness {score})")


def _number(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) and abs(value) < 1e15 else f"{value:,.6g}"


def _percent(deviation: float) -> str:
    return "∞" if math.isinf(deviation) else f"{deviation:.2%}"


ANSWER_DECIDERS: tuple[CheckDecider, ...] = (_answer_contains, _answer_not_contains, _answer_number)


def passes_on(check: AnswerContains | AnswerNumber, text: str, derived: bool = True) -> bool:
    """`check` passes on `text` read as a turn's answer (a derived literal as derived ones are
    decided): how a check derived from a ground truth is proven on that ground truth."""
    context = CheckContext(calls=[], answer=text, turn=1)
    if isinstance(check, AnswerContains):
        decided = derived_literal(check, context) if derived else _answer_contains(check, context)
    else:
        decided = _answer_number(check, context)
    return decided[0]
