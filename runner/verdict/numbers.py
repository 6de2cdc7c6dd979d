"""Reading numbers out of text: "$14.2 million", "14,200,000" and "14.2M" are one value.

Used by the answer checks (runner/verdict/answer_checks.py), the checks derived from ground truth
(runner/verdict/derived.py) and literal matching (runner/verdict/literals.py), so a figure reads
the same whichever check meets it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["NUMBER", "FoundNumber", "find_numbers", "number_matches", "value_of"]


@dataclass(frozen=True)
class FoundNumber:
    """A number read from text: its value and the text it was read from."""

    value: float
    text: str


_SCALES = {"thousand": 1e3, "k": 1e3, "million": 1e6, "mn": 1e6, "m": 1e6,
           "billion": 1e9, "bn": 1e9, "b": 1e9, "trillion": 1e12, "t": 1e12}

NUMBER = re.compile(
    r"""
    (?<![\w.])                                    # not the middle of a word or a number
    (?P<sign>[-−])?
    [$€£¥]?
    (?P<digits>\d{1,3}(?:,\d{3})+(?:\.\d+)?       # 14,200,000 or 1,234.5
             |\d+(?:\.\d+)?                       # 14200000 or 14.2
             |\.\d+)                              # .5
    (?:
        \s?(?P<word>(?i:thousand|million|billion|trillion|mn|bn))\b
      | (?P<suffix>[kKmMbBT])\b                   # 14.2M, 3k — attached only ("5 m" is metres)
    )?
    (?P<percent>\s?(?:%|(?i:percent)\b))?
    """,
    re.VERBOSE,
)
"""One number as written: sign, currency sign, digits, a scale word or suffix, a percent."""


def value_of(match: re.Match[str]) -> float:
    """The scaled value of one NUMBER match ("$14.2 million" -> 14200000)."""
    value = float(match["digits"].replace(",", ""))
    scale = match["word"] or match["suffix"]
    if scale:
        value *= _SCALES[scale.lower()]
    return -value if match["sign"] else value


def number_matches(text: str) -> list[re.Match[str]]:
    """Every number written in `text`, as NUMBER matches, in order."""
    return list(NUMBER.finditer(text))


def find_numbers(text: str) -> list[FoundNumber]:
    """Every number in `text`, scaled ("$14.2 million" -> 14200000).

    A percentage yields two readings, 12.5 and 0.125, so the expected value may be written
    either way; the closest reading wins.
    """
    found = []
    for match in NUMBER.finditer(text):
        value = value_of(match)
        raw = match.group(0).strip()
        found.append(FoundNumber(value, raw))
        if match["percent"]:
            found.append(FoundNumber(value / 100, raw))
    return found
