"""The exact checks a turn implies: from its ground_truth.expected_answer and expected_tools."""

from __future__ import annotations

import re

from runner.records.evidence import UI_INDEXING_STEP
from runner.scenarios import AnswerContains, AnswerNumber, GroundTruth, ToolsInOrder, ToolStep, Turn
from runner.verdict.answer_checks import passes_on
from runner.verdict.assertions import reading_at
from runner.verdict.literals import DATES, MIN_LITERAL_CHARACTERS, characters
from runner.verdict.numbers import NUMBER, value_of

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
    thousands separators, currency words and date formats do not matter); a sentence derives
    the dates and figures it asserts (`sentence_checks`). A list derives one check per item.
    """
    truth = turn.ground_truth
    if truth is None or not has_expected_answer(truth):
        return []
    if any(isinstance(check, _OWN_ANSWER_CHECKS) for check in turn.checks):
        return []
    expected = truth.expected_answer
    items = expected if isinstance(expected, list) else [expected]
    derived: list[AnswerContains | AnswerNumber] = []
    for item in items:
        check = _derive(item)
        if check is not None:
            derived.append(check)
        elif isinstance(item, str):
            # Proven on the sentence it comes from: a check its own ground truth fails ("<$170"
            # offered as one of two in "sale <$200 OR refurb <$170") would fail right answers.
            derived += [found for found in sentence_checks(item) if passes_on(found, item)]
    return derived


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
    if len(text.split()) <= MAX_LITERAL_WORDS and not _ANNOTATED.search(text):
        return AnswerContains(type="answer_contains", text=text, ignore_case=True)
    return None


_ANNOTATED = re.compile(r"[():;/]|\b(?:not|was|were|or|instead|updated|stored|should)\b",
                       re.IGNORECASE)
"""Words and marks that make a short expected answer a note about the value rather than the
value written one way ("Dock 7 (not 12)", "Renamed: Quill (was Quire)", "Kept: 14 crates,
1-2x/week"): no agent writes it so, so it is read as a sentence (`sentence_checks`)."""

_LABEL_BEFORE = re.compile(
    r"\b(?:section|article|clause|chapter|page|line|step|item|room|version|v|no|number)\s*$",
    re.IGNORECASE)
"""A word that makes the number after it a label ("section 3", "Room 404", "HTTP 429"):
a value only as part of its name, which the judge reads."""
_LABEL_CAPITAL = re.compile(r"\b[A-Z][\w-]*\s*$")


def sentence_checks(sentence: str) -> list[AnswerContains | AnswerNumber]:
    """The checks a sentence-long expected answer implies: each date it asserts (as a derived
    literal, any way of writing it) and each figure it asserts (answer_number within GAIA's
    5 %), each read by the cue rules of runner/verdict/assertions.py — a value the sentence
    itself negates, compares against, revises or gives as one of several is not its answer.

    Left out as the judge's: years on their own, single digits without a unit (in almost any
    answer by chance), numbers inside a date, and numbers a label names ("section 3").
    The rest of the sentence (its names and words) is paraphrased by correct agents, so it
    derives nothing. A sentence that asserts more than one value — a single digit it
    asserts counts, though it derives no check of its own — derives nothing either:
    which of them the question asks for, and which are context a correct answer may leave
    out ("$14.2M, up 8% on Q2"), is the judge's to read — a check that demanded the context
    would fail right answers, and a check can overrule the judge's PASS.
    """
    text = " ".join(sentence.split())
    derived: list[AnswerContains | AnswerNumber] = []
    dated: list[tuple[int, int]] = []
    small = 0  # asserted single digits: no check of their own, but values all the same
    for pattern in DATES:
        for match in pattern.finditer(text.casefold()):
            if any(start <= match.start() < end for start, end in dated):
                continue
            dated.append(match.span())
            if reading_at(text, *match.span()).asserted:
                derived.append(AnswerContains(type="answer_contains",
                                              text=text[slice(*match.span())], ignore_case=True))
    for match in NUMBER.finditer(text):
        if any(start <= match.start() < end for start, end in dated):
            continue
        raw = match.group(0)
        value = value_of(match)
        marked = bool(_CURRENCY.search(raw) or match["word"] or match["suffix"]
                      or match["percent"])
        before = text[: match.start()]
        if not marked and (re.fullmatch(r"\d{4}", match["digits"]) and 1900 <= value <= 2100
                           or _LABEL_BEFORE.search(before) or _LABEL_CAPITAL.search(before)):
            continue
        if not marked and abs(value) < 10 and float(value).is_integer():
            # "up to 3 days a week" beside "15 days of leave": the sentence asserts two values,
            # and a check of the 15 alone would pass an answer that gives only the leave.
            small += reading_at(text, *match.span()).asserted
            continue
        if reading_at(text, *match.span()).asserted:
            derived.append(AnswerNumber(type="answer_number", value=value,
                                        tolerance=DERIVED_TOLERANCE))
    return derived if len(derived) == 1 and not small else []


def amount_of(text: str) -> float | None:
    """The value of `text` when it is exactly one number or amount, else None.

    "$412,000", "24.6", "12%", "$1.2 million", "412,000 USD", "47 employees" are amounts;
    "Q3 2025", "March 15", "USD 12 per seat per month" are not. A bare year (1900–2100, no
    currency, no decimals) is a literal: within 5% of 2025 lies every year from 1924 to 2126.
    """
    matches = list(NUMBER.finditer(text))
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
