"""What a live oracle's retrieval must bring back before it may give the ground truth.

The oracle of `trialbox selftest --live` answers a turn only with what its tools returned. What
it looks for are *needles*: the answer as its document writes it — each of its numbers in the
document's own spelling ("30" written "thirty days" in a licence, "2,450,000" for "2450000"),
else each of its words of four letters or more, else the answer whole. Each is one token, never
a phrase: GAIA's `search_indexed_chunks`, the oracle's second look, matches within a line, and
a phrase a document breaks over two lines would never be found. They are found in
the document's own text here, on the host, before the run; the oracle then needs each of them
in the text its tools returned in the sandbox (eval/agents/oracle/agent.py compares with the
same normalisation, `normal`).

An answer the documents write only in part — worked out from them ("$780 (3 nights at $260)"),
or reformatted ("2026-09-08" for "8 September 2026") — has no needles: its retrieval cannot be
proven by looking for it, and the self-test says how many such turns it left unproven rather
than calling them answerable. So does an answer none of whose parts the documents write when
the ground truth names a manifest fact (a column's total: the corpus gate recomputes it), and
a document that is not plain text (a PDF, a spreadsheet: its text is GAIA's extraction, which
only the sandbox sees). An answer none of whose parts they write, with no fact behind it, is
"absent": its needles are its own parts, so the oracle's retrieval cannot bring them back and
the scenario comes out not answerable from the corpus — through the real tools, not by a
guess here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

#: Documents whose bytes are their text: read here to find the needles.
TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".rst", ".csv", ".json", ".yaml", ".yml",
                           ".ini", ".toml", ".cfg", ".html", ".xml", ".log", ".py"})

_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_WORD = re.compile(r"[\w']+")
_NUMBER_WORDS = {
    0: "zero", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven",
    8: "eight", 9: "nine", 10: "ten", 11: "eleven", 12: "twelve", 13: "thirteen",
    14: "fourteen", 15: "fifteen", 16: "sixteen", 17: "seventeen", 18: "eighteen",
    19: "nineteen", 20: "twenty", 30: "thirty", 40: "forty", 50: "fifty", 60: "sixty",
    70: "seventy", 80: "eighty", 90: "ninety", 100: "one hundred"}


def normal(text: str) -> str:
    """Case, runs of white space and curly apostrophes set aside (the oracle's own rule)."""
    return " ".join(str(text).replace("\u2019", "'").split()).casefold()


def readable_text(path: Path) -> str | None:
    """The document's text when it is plain text and there, else None."""
    if path.suffix.casefold() not in TEXT_SUFFIXES or not path.is_file():
        return None
    return path.read_text(encoding="utf-8", errors="replace")


def _spellings(number: str) -> list[str]:
    """How a document may write the number: as given, without or with thousands separators,
    and as a word for the small whole numbers a licence or a policy spells out."""
    plain = number.replace(",", "")
    forms = [number, plain]
    whole, _, fraction = plain.partition(".")
    if whole.isdigit():
        grouped = f"{int(whole):,}" + (f".{fraction}" if fraction else "")
        forms.append(grouped)
        if not fraction and int(whole) in _NUMBER_WORDS:
            forms.append(_NUMBER_WORDS[int(whole)])
    return list(dict.fromkeys(forms))


def _holds(text: str, needle: str) -> bool:
    """`needle` stands in `text` as a whole token (not "30" inside "300" or "2030")."""
    return re.search(rf"(?<![\w.,]){re.escape(needle)}(?![\w]|[.,]\d)", text) is not None


class Needles(NamedTuple):
    """What to look for, and how the documents hold the answer: "written" (each needle is
    there), "worked out" (some of its parts are there, not all: a sum, a reformatted date) or
    "absent" (none of them is: the needles are the answer's own parts, which no retrieval of
    these documents can bring back)."""

    needles: list[str]
    how: str


def needles(answer: str, documents: Iterable[str]) -> Needles:
    """The needles of `answer` in the documents' texts (each number and word in some
    document, as that document writes it)."""
    text = "\n".join(normal(document) for document in documents)
    said = normal(answer)
    if not text or not said:
        return Needles([], "absent")
    numbers = list(dict.fromkeys(_NUMBER.findall(said)))
    if numbers:
        found = [next((form for form in _spellings(n) if _holds(text, form)), None)
                 for n in numbers]
        return _judged([form for form in found if form], numbers)
    words = list(dict.fromkeys(w for w in _WORD.findall(said) if len(w) >= 4)) or [said]
    return _judged([word for word in words if _holds(text, word)], words)


def _judged(found: list[str], parts: list[str]) -> Needles:
    if len(found) == len(parts):
        return Needles(found, "written")
    return Needles(parts, "absent") if not found else Needles([], "worked out")
