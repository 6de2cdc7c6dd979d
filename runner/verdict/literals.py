"""Whole-token matching of a short expected literal against an answer.

A derived literal check (runner/verdict/answer_checks.py) asks "does the answer say this name,
code, date or value?", not "does this string occur somewhere": "NOTICE" must not pass on "keep
the copyright notices", and "8 September 2026" must pass on "September 8, 2026". Both sides are
read into tokens the same way — case folded, punctuation dropped, thousands separators and scale
words read as one value ("$1,150,000" = "$1.15 million"), currency signs and words dropped, dates
written one way — and every significant token of the literal must be a whole token of the
answer (order and filler words such as "with" are a paraphrase's freedom).
"""

from __future__ import annotations

import re

from runner.verdict.numbers import NUMBER, value_of

__all__ = ["DATES", "MIN_LITERAL_CHARACTERS", "characters", "literal_in", "literal_spans",
           "significant_tokens", "tokens"]

MIN_LITERAL_CHARACTERS = 3
"""A literal of fewer letters and digits ("No", "A", "3") occurs by chance in almost any
answer ("I do not know"), so it derives no check: deciding it is the judge's job."""

_MONTHS = {name: number for number, names in enumerate((
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
    ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
    ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
    ("december", "dec")), start=1) for name in names}

_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{4})"
DATES = [re.compile(pattern) for pattern in (
    r"\b(?P<year>\d{4})-(?P<num_month>\d{1,2})-(?P<day>\d{1,2})\b",      # 2026-09-08
    rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b",                      # 8 September 2026
    rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b",                                # September 8, 2026
    rf"\b{_MONTH},?\s+{_YEAR}\b",                                         # January 2004
)]
"""The ways a date is written, most specific first (each date is read by the first that fits)."""

_CURRENCY_WORDS = frozenset({"usd", "eur", "gbp", "dollars", "dollar", "euros", "euro",
                             "pounds", "us"})
_FILLER = frozenset({"a", "an", "the", "of", "with", "and", "in", "on", "at", "for", "to",
                     "by", "per", "is", "are", "was", "its"})
_WORD = re.compile(r"[^\W_]+")


def _date_tokens(match: re.Match[str]) -> list[str]:
    """A date's tokens: the full date and its month and year, so "January 2004" is found in
    "15 January 2004" and "2004" in either."""
    groups = match.groupdict()
    month = int(groups["num_month"]) if groups.get("num_month") else _MONTHS[groups["month"]]
    year = int(groups["year"])
    found = [f"@{year:04d}-{month:02d}", f"#{year}"]
    if groups.get("day"):
        found.insert(0, f"@{year:04d}-{month:02d}-{int(groups['day']):02d}")
    return found


def _number_token(match: re.Match[str]) -> str:
    value = value_of(match)
    return f"#{value:.12g}" + ("%" if match["percent"] else "")


def _token_spans(text: str) -> list[tuple[str, int, int]]:
    """`text` as comparable tokens with where each was read from, in order (see `tokens`)."""
    text = text.casefold().replace("\u2019", "'")  # same length: the spans stay the text's
    found: list[tuple[int, int, list[str]]] = []
    for pattern in DATES:
        for match in pattern.finditer(text):
            found.append((*match.span(), _date_tokens(match)))
        text = pattern.sub(lambda m: " " * len(m.group(0)), text)  # read each date once
    for match in NUMBER.finditer(text):
        found.append((*match.span(), [_number_token(match)]))
    text = NUMBER.sub(lambda m: " " * len(m.group(0)), text)
    for match in _WORD.finditer(text):
        if match.group(0) not in _CURRENCY_WORDS:
            found.append((*match.span(), [match.group(0)]))
    return [(token, start, end) for start, end, group in sorted(found, key=lambda item: item[0])
            for token in group]


def tokens(text: str) -> list[str]:
    """`text` as comparable tokens: dates as "@YYYY-MM[-DD]" (and "#YYYY"), numbers as
    "#<value>" ("#1.15e+06" for "$1,150,000" and "$1.15 million"), words case-folded,
    currency signs and words left out."""
    return [token for token, _, _ in _token_spans(text)]


def significant_tokens(literal: str) -> list[str]:
    """The tokens of `literal` an answer must contain: filler words left out, unless the
    literal is nothing else."""
    every = tokens(literal)
    kept = [token for token in every if token not in _FILLER]
    return kept or every


def literal_in(literal: str, answer: str) -> bool:
    """Every significant token of `literal` is a whole token of `answer`."""
    wanted = significant_tokens(literal)
    have = set(tokens(answer))
    return bool(wanted) and all(token in have for token in wanted)


def literal_spans(literal: str, answer: str) -> list[tuple[int, int]]:
    """Where `answer` says `literal`: from each occurrence of its first significant token to
    the next occurrence of its last one (the whole "Tomasz Lindqvist", so what stands beside
    it is beside the literal); [] when the literal is not said (literal_in).

    Only the occurrences that go on to say the whole literal count: in "It is not Quill 2.0;
    it is Quill 1.6" the second "Quill" is another value's, and reading it as the literal
    would find the negated "Quill 2.0" asserted. When no occurrence says it in order (its
    words written in another order), each first token counts, as before."""
    if not literal_in(literal, answer):
        return []
    wanted = significant_tokens(literal)
    spans = _token_spans(answer)
    whole: list[tuple[int, int]] = []
    partial: list[tuple[int, int]] = []
    for index, (token, start, end) in enumerate(spans):
        if token != wanted[0]:
            continue
        stop, rest = end, wanted[1:]
        for name, _, until in spans[index + 1:]:
            if not rest:
                break
            if name == rest[0]:  # the literal's tokens in their order, others between
                stop, rest = until, rest[1:]
        (partial if rest else whole).append((start, stop))
    return whole or partial


def characters(literal: str) -> int:
    """How many letters and digits `literal` has."""
    return sum(char.isalnum() for char in literal)
