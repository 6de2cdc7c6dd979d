"""The wrong answers a turn's checks must each catch.

Built from the same facts as the genuine answer, so a check that passes one is too weak, not
the wrong answer too silly: the genuine answer with every figure 20 % off, another fact of the
same document (from the corpus manifest), "I don't know", a hedged list of three figures, an
empty answer, and the answers that write the right value without asserting it (`_talking`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner.scenarios import AnswerContains, AnswerNumber, CorpusDocument, Manifest, Scenario, Turn
from runner.selftest._genuine import UNKNOWN, expected_text, fact_text, render_number
from runner.selftest._talking import talking_answers
from runner.verdict import DATES, NUMBER, Planned, literal_in, value_of

__all__ = ["OFF_BY", "WrongAnswer", "wrong_answers"]

CLOCK_TIME = re.compile(r"(?<![\d:])\d{1,2}:\d{2}(?::\d{2})?(?![\d:])")
"""10:00, 9:30:15 — a time of day, whose parts are not figures."""

OFF_BY = 0.2
"""The figure a careless agent gets wrong by: well outside GAIA's 5 % band."""


@dataclass(frozen=True)
class WrongAnswer:
    """One wrong answer and what kind of wrong it is."""

    kind: str
    text: str

    @property
    def family(self) -> str:
        """The kind without its particulars ("another fact (doc/fact)" -> "another fact"),
        what the self-test's table counts by."""
        return self.kind.split(" (", 1)[0]


def wrong_answers(turn: Turn, genuine: str, planned: list[Planned], scenario: Scenario,
                  manifest: Manifest | None) -> list[WrongAnswer]:
    """Every wrong answer that applies to the turn.

    `genuine` is the ground truth's answer ("" when the turn has none). "I don't know" is not
    wrong where the ground truth says the document does not say; where the turn has no ground
    truth, neither "I don't know" nor an empty answer is a wrong one: there is no fact for
    them to lack.
    """
    wrong: list[WrongAnswer] = []
    if any(isinstance(item.check, AnswerNumber) for item in planned):
        off = _off(genuine)
        if off != genuine:
            wrong.append(WrongAnswer(f"{OFF_BY:.0%} off", off))
    others = _other_facts(turn, planned, scenario, manifest)
    wrong += others
    wrong.append(WrongAnswer("hedged list", _hedged(planned)))
    if genuine not in ("", UNKNOWN):
        wrong.append(WrongAnswer("I don't know", UNKNOWN))
        another = others[0].text if others else None
        wrong += [WrongAnswer(item.kind, item.text)
                  for item in talking_answers(genuine, planned, _off, another,
                                              turn.user_message or turn.objective)]
    if genuine:
        wrong.append(WrongAnswer("empty answer", ""))
    return wrong


def _off(genuine: str) -> str:
    """The genuine answer with every figure OFF_BY too low — the figures a turn checks with
    answer_number; dates, clock times and years are left alone (a turn that checks a figure is
    not asking when, and "23.2 May 1,620.8" or "8:0" for 10:00 would be wrong for the wrong
    reason)."""
    whens = [*DATES, CLOCK_TIME]
    spans = [match.span() for pattern in whens for match in pattern.finditer(genuine.casefold())]

    def scaled(match: re.Match[str]) -> str:
        inside_date = any(start <= match.start() < end for start, end in spans)
        if inside_date or (re.fullmatch(r"\d{4}", match["digits"]) and not match["percent"]
                           and 1900 <= value_of(match) <= 2100):
            return match.group(0)
        currency = re.search(r"[$€£¥]", match.group(0))
        percent = "%" if match["percent"] else ""
        value = value_of(match) * (1 - OFF_BY)
        return (currency.group(0) if currency else "") + render_number(round(value, 6)) + percent

    return NUMBER.sub(scaled, genuine)


def _hedged(planned: list[Planned]) -> str:
    """Three candidates around the checked figure — the right one among them — or, for a turn
    that checks no figure, three figures of nothing in particular."""
    value = next((item.check.value for item in planned
                  if isinstance(item.check, AnswerNumber)), None)
    if value is None:
        return "It could be 12%, 40% or 75%."
    low, high = (render_number(round(value * factor, 6)) for factor in (0.7, 1.3))
    return f"It could be {low}, {render_number(value)} or {high}."


def _documents(turn: Turn, scenario: Scenario, manifest: Manifest) -> list[CorpusDocument]:
    ids = [turn.ground_truth.doc_id] if turn.ground_truth and turn.ground_truth.doc_id else []
    ids += [doc.corpus_doc for doc in scenario.setup_documents if doc.corpus_doc]
    every = {doc.id: doc for doc in manifest.documents + manifest.adversarial_documents}
    return [every[doc_id] for doc_id in dict.fromkeys(ids) if doc_id in every]


def _other_facts(turn: Turn, planned: list[Planned], scenario: Scenario,
                 manifest: Manifest | None) -> list[WrongAnswer]:
    """The other facts of the documents the turn reads, each as a whole answer — leaving out
    any that says what this turn's answer must say (that one would be right)."""
    if manifest is None:
        return []
    own = turn.ground_truth.fact_id if turn.ground_truth else None
    expected = expected_text(turn)
    wanted = [item.check.text for item in planned if isinstance(item.check, AnswerContains)]
    wrong = []
    for doc in _documents(turn, scenario, manifest):
        for fact in doc.facts:
            if fact.id == own or fact.answer is None:
                continue
            text = fact_text(fact)
            if text is None:
                continue
            if (expected and literal_in(expected, text)) or any(
                    literal_in(want, text) for want in wanted):
                continue
            wrong.append(WrongAnswer(f"another fact ({doc.id}/{fact.id})", text))
    return wrong
