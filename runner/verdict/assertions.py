"""Does an answer *assert* a value where it writes it? The cue rules, all in one place.

An answer check asks whether the answer gives the expected figure or literal as its answer —
not whether the text occurs. "It is not $2,450,000", "Last year $2,450,000; this year
$3,100,000", "$2,450,000 was the draft, revised to $2,000,000", "I can't confirm $2,450,000"
and "$2,450,000 / $3,185,000" all write the figure and assert none of it. Each mention is read
inside its clause (the text between clause boundaries: `;`, a sentence's end, ", ", ": ",
a bracket, "but", "whereas", "however", a dash between spaces) by these rules, first that
applies wins:

1. UNDECIDED   — the clause is conditional or a question ("if", "unless", "whether",
                 "assuming", "?"), compares against the value ("not above X", "no more
                 than X", "cannot exceed X", "cannot spend more than X") or hedges softly
                 ("I think", "I believe", "presumably"): it neither asserts nor denies the
                 value, so the check cannot say and the turn goes to the judge.
2. DOUBTED     — the clause doubts what it says ("can't confirm", "not sure", "unverified",
                 "possibly", "perhaps", "maybe", "might", "probably", "supposedly") or
                 reports it as a claim ("the document claims X").
3. NEGATED     — a negation before the mention in its clause ("not", "never", "no longer",
                 "isn't", "doesn't", "cannot", "instead of", "rather than"), a denial
                 after it ("is wrong", "is false", "is outdated", also ending its clause:
                 "X with B2 is false") or opening the next clause ("…, but that is wrong").
4. ONE_OF_SEVERAL — the mention is joined to another value by "/" or "or" ("X / Y", "X or Y"),
                 or is one end of a range ("15-18%").
5. ASSERTED    — the mention is the new value of a change ("revised to X", "changed to X",
                 "now X", "to X" after "from"): asserted, whatever the clause says of the old.
6. SUPERSEDED  — the clause marks the value as replaced ("draft", "preliminary", "previous",
                 "former", "originally", "old", "outdated", "superseded", "replaced", "revised
                 from", "used to be", "used to get"), or a change follows the mention ("X was revised to …",
                 "from X to …").
7. OTHER_CONTEXT — the clause puts the value in another period ("last year", "prior year",
                 "next quarter", "a year ago"), or names a year beside it (FY2026, 2026)
                 when the question names years and not that one.
   (6 and 7 do not apply when the question itself says the words: "What was the draft
   figure?" is answered by "The draft said X".)
8. ASSERTED    — none of the above.

What the rules read: every number an answer_number check meets, and a literal that names a
value — one with a digit or a capital letter (a name, a code, a date, "NOTICE", "2.7"). A
lower-case word ("silently", "permission", "minor") is the wording of what the answer says
rather than a value it gives: in "Errors should never pass silently" the negation is the
rule's content, not a denial of the word, so such a literal counts wherever it is written
(`names_a_value`).

The rules are deliberately lexical and short: each is a cue a reader can see in the failure
line (the check quotes the cue it read), and a cue that reads both ways is undecided rather
than guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

__all__ = ["Cue", "Reading", "clause_around", "names_a_value", "reading_at", "reading_of"]


class Cue(str, Enum):
    """How an answer offers one mention of a value."""

    ASSERTED = "asserted"
    UNDECIDED = "undecided"
    DOUBTED = "doubted"
    NEGATED = "negated"
    ONE_OF_SEVERAL = "one of several"
    SUPERSEDED = "superseded"
    OTHER_CONTEXT = "in another context"


@dataclass(frozen=True)
class Reading:
    """The cue a mention was read with and the words that showed it ("" when asserted)."""

    cue: Cue
    words: str = ""

    @property
    def asserted(self) -> bool:
        return self.cue is Cue.ASSERTED

    def describe(self) -> str:
        """"negated ('not')" — how a failure line names it."""
        return f"{self.cue.value} ({self.words!r})" if self.words else self.cue.value


def names_a_value(literal: str) -> bool:
    """The literal is a value the cue rules read (a digit or a capital letter in it)."""
    return any(char.isdigit() or char.isupper() for char in literal)


def _words(*alternatives: str) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(alternatives) + r")\b", re.IGNORECASE)


_BOUNDARY = re.compile(
    r"[;!?()\n]|\.(?=\s|$)|[,:]\s|\s[-–—]\s|\s(?:but|whereas|however|although|while)\s",
    re.IGNORECASE)

_CONDITIONAL = _words(r"if", r"unless", r"whether", r"assuming", r"suppose", r"provided that")
_COMPARISON = re.compile(
    r"\b(?:not|no)\s+(?:more|less|fewer|greater|higher|lower|above|below|over|under|"
    r"exceeding|beyond)\b(?:\s+than)?[^\w]*$"
    r"|\b(?:(?:does|do|did|can|must|may|should|will)\s*not|doesn't|don't|didn't|cannot|can't|"
    r"mustn't|won't)\s+(?:exceed|go\s+(?:above|over|beyond|below|under)|be\s+(?:more|less|"
    r"higher|lower)\s+than)\s*[^\w\s]?$",
    re.IGNORECASE)
_COMPARATIVE_BEFORE = re.compile(
    r"\b(?:(?:more|less|fewer|greater|higher|lower)\s+than|above|below|over|under|exceeding|"
    r"beyond|up\s+to|at\s+(?:most|least))\s*[^\w\s]?$", re.IGNORECASE)
"""A bound right before the value: under a negation ("cannot spend more than X") it states a
limit, neither the value asserted nor denied."""
_DOUBT = _words(r"can(?:no|')?t\s+(?:confirm|verify|be\s+sure)", r"could(?:n't|\s+not)\s+"
                r"(?:confirm|verify|find)", r"unable\s+to\s+(?:confirm|verify)",
                r"not\s+(?:sure|certain|confirmed|verified)", r"unsure", r"uncertain",
                r"unverified", r"unconfirmed", r"possibly", r"perhaps", r"maybe", r"might",
                r"probably", r"supposedly", r"allegedly")
_CLAIMED_BEFORE = re.compile(r"\b(?:claims|claimed|alleges|alleged)\s+(?:that\s+)?"
                             r"(?:it\s+is\s+)?[^\w\s]?$", re.IGNORECASE)
"""Reported, not asserted: "The document claims X" (a noun "claims of X" is no cue)."""
_SOFT_HEDGE = _words(r"I\s+think", r"I\s+believe", r"I\s+guess", r"presumably",
                     r"as\s+far\s+as\s+I\s+(?:can\s+tell|know)")
_NEGATION_BEFORE = _words(r"not", r"never", r"no\s+longer", r"isn't", r"aren't", r"wasn't",
                          r"weren't", r"doesn't", r"don't", r"didn't", r"won't", r"hasn't",
                          r"haven't", r"cannot", r"can't", r"nor", r"neither", r"instead\s+of",
                          r"rather\s+than")
_DENIAL_AFTER = re.compile(
    r"^\W*(?:is|was|would\s+be|seems)?\s*(?:wrong|incorrect|false|inaccurate|mistaken|"
    r"not\s+(?:right|correct|true|accurate)|outdated|a\s+mistake|an\s+error|a\s+typo)\b",
    re.IGNORECASE)
_DENIAL_ENDS = re.compile(
    r"\b(?:is|was|are|were)\s+(?:wrong|incorrect|false|inaccurate|mistaken|"
    r"not\s+(?:right|correct|true|accurate)|outdated)\W*$", re.IGNORECASE)
"""A denial that ends the mention's clause: "47 with bay B2 is false"."""
_DENIAL_NEXT = re.compile(
    r"^\W*(?:(?:but|however|and)\s+)?(?:that|this|it|which)\s+(?:(?:figure|number|value|"
    r"amount|date|name)\s+)?(?:is|was|'s)\s+(?:wrong|incorrect|false|inaccurate|mistaken|"
    r"not\s+(?:right|correct|true|accurate)|outdated|a\s+mistake|an\s+error|a\s+typo)\b",
    re.IGNORECASE)
"""A denial that opens the next clause: "The document claims X, but that is wrong"."""
_ALTERNATIVE_AFTER = re.compile(r"^\s*(?:/|\bor\b|\band/or\b)(?=\s*\S)|^[-–]\d",
                                re.IGNORECASE)
_ALTERNATIVE_BEFORE = re.compile(r"\S\s*(?:/|\bor\b|\band/or\b)\s*$|\d[-–]$", re.IGNORECASE)
"""Joined to another value: "X / Y", "X or Y", and a range's end ("15-18%": 15 is one end of
what the answer offers, not its figure)."""
_NEW_VALUE_BEFORE = re.compile(
    r"\b(?:(?:revised|changed|updated|corrected|moved|raised|lowered|increased|decreased|"
    r"reduced|cut|amended|set)\s+(?:it\s+)?to|now(?:\s+(?:is|at|stands\s+at))?|"
    r"from\b.*\bto)\s*[^\w\s]?$", re.IGNORECASE)
_FROM_BEFORE = re.compile(r"\bfrom\s*[^\w\s]?$", re.IGNORECASE)
_SUPERSEDED = _words(r"draft(?:ed)?", r"preliminary", r"previous(?:ly)?", r"former(?:ly)?",
                     r"originally", r"old", r"outdated", r"obsolete", r"superseded",
                     r"replaced", r"withdrawn", r"revised\s+from", r"changed\s+from",
                     r"used\s+to(?:\s+\w+)?", r"initially", r"until\s+(?:recently|now)")
_CHANGE_AFTER = re.compile(
    r"^\W*(?:(?:was|were|has\s+been|had\s+been|got)\s+)?(?:revised|changed|updated|"
    r"corrected|replaced|superseded|moved|cut|raised|lowered|amended)\b", re.IGNORECASE)
_OTHER_PERIOD = _words(r"(?:last|previous|prior|past|next|following)\s+(?:fiscal\s+)?"
                       r"(?:year|quarter|month|week|period|FY)", r"(?:a|one|the)\s+year\s+"
                       r"(?:before|earlier|ago)", r"a\s+year\s+ago", r"in\s+the\s+past")
_YEAR = re.compile(r"\b(?:FY\s?'?(\d{2}(?:\d{2})?)|(?:fiscal\s+)?((?:19|20)\d{2}))\b",
                   re.IGNORECASE)
"""A year a clause or a question names: 2026, FY2027, FY27, fiscal 2027."""


_JOINED = re.compile(r"\s(?:and|while|whereas)\s", re.IGNORECASE)


def _years(text: str) -> set[str]:
    return {("20" + short if len(short) == 2 else short) if short else full
            for short, full in _YEAR.findall(text)}


def _other_year(before: str, after: str, asked: str) -> str | None:
    """The year the mention's clause names when the question names years and not that one:
    "$2,450,000 in FY2026" answers a question about FY2027 with another period's figure."""
    wanted = _years(asked)
    # The year beside the mention, not one joined by "and" to another value's.
    before = _JOINED.split(before)[-1]
    after = _JOINED.split(after)[0]
    named = _years(before) | _years(after)
    if not wanted or not named or named & wanted:
        return None
    match = _YEAR.search(before) or _YEAR.search(after)
    return " ".join(match.group(0).split()) if match else None


def _denied_next(text: str, end: int) -> str | None:
    """The denial that opens the clause after the mention's ("…, but that is wrong")."""
    stop = _BOUNDARY.search(text, end)
    if stop is None:
        return None
    return _found(_DENIAL_NEXT, text[stop.end():])


def clause_around(text: str, start: int, end: int) -> tuple[str, str, str]:
    """The clause's text before and after the mention at [start, end), and the boundary
    that ends it ("" at the end of the text)."""
    left = max((m.end() for m in _BOUNDARY.finditer(text, 0, start) if m.end() <= start),
               default=0)
    stop = _BOUNDARY.search(text, end)
    right = stop.start() if stop else len(text)
    return text[left:start], text[end:right], stop.group(0).strip() if stop else ""


def _found(pattern: re.Pattern[str], *texts: str) -> str | None:
    for text in texts:
        match = pattern.search(text)
        if match:
            return " ".join(match.group(0).split())
    return None


def _not_asked(words: str | None, asked: str) -> str | None:
    """The cue's words, unless the question itself says them ("What was last year's
    figure?" asks for the other period, so "Last year X" answers it)."""
    return None if words and words.casefold() in asked.casefold() else words


def reading_at(text: str, start: int, end: int, asked: str = "") -> Reading:
    """How `text` offers the mention at [start, end): the first rule of the module that
    applies, and the words it read. `asked` is the question answered: a period or a draft it
    names itself is no cue."""
    before, after, stop = clause_around(text, start, end)
    question = "?" if stop == "?" else None
    rules: tuple[tuple[Cue, str | None], ...] = (
        (Cue.UNDECIDED, _found(_CONDITIONAL, before, after) or _found(_COMPARISON, before)
         or (_found(_COMPARATIVE_BEFORE, before) if _NEGATION_BEFORE.search(before) else None)
         or _found(_SOFT_HEDGE, before, after) or question),
        (Cue.DOUBTED, _found(_DOUBT, before, after) or _found(_CLAIMED_BEFORE, before)),
        (Cue.NEGATED, _found(_NEGATION_BEFORE, before) or _found(_DENIAL_AFTER, after)
         or _found(_DENIAL_ENDS, after) or _denied_next(text, end)),
        (Cue.ONE_OF_SEVERAL, _found(_ALTERNATIVE_AFTER, after)
         or _found(_ALTERNATIVE_BEFORE, before)),
        (Cue.ASSERTED, None if _FROM_BEFORE.search(before)
         else _found(_NEW_VALUE_BEFORE, before)),
        (Cue.SUPERSEDED, _not_asked(_found(_SUPERSEDED, before, after), asked)
         or _found(_CHANGE_AFTER, after)
         or (_found(_FROM_BEFORE, before) if re.search(r"\bto\b", after) else None)),
        (Cue.OTHER_CONTEXT, _not_asked(_found(_OTHER_PERIOD, before, after), asked)
         or _other_year(before, after, asked)),
    )
    for cue, words in rules:
        if words:
            return Reading(cue, "" if cue is Cue.ASSERTED else words)
    return Reading(Cue.ASSERTED)


def reading_of(text: str, spans: list[tuple[int, int]], asked: str = "") -> Reading:
    """How `text` offers a value it writes at each of `spans`: asserted when one mention
    asserts it; else undecided when one mention is undecided; else the first mention's cue."""
    readings = [reading_at(text, start, end, asked) for start, end in spans]
    for cue in (Cue.ASSERTED, Cue.UNDECIDED):
        found = next((reading for reading in readings if reading.cue is cue), None)
        if found is not None:
            return found
    return readings[0] if readings else Reading(Cue.ASSERTED)
