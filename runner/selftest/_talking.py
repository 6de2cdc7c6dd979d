"""Wrong answers that talk: they write the right value and do not assert it.

A check that counts a value wherever it is written passes "It is not $2,450,000; Engineering
gets $1,960,000". These answers each write the values the turn's checks ask for the way
runner/verdict/assertions.py says is not asserting them — negated, in another period, revised
away, doubted, one of two, denied after it, reported as a claim — or give the right value for another entity; and one, the
paraphrase, asserts the right answer in other words, which every check must pass.

They apply where a check reads values: answer_number, and an answer_contains whose literal
names a value (assertions.names_a_value). The wrong-entity answer applies where the turn
checks the entity beside its value (two such checks), the only place a check can tell.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runner.scenarios import AnswerContains, AnswerNumber
from runner.selftest._genuine import render_number
from runner.verdict import Planned, names_a_value, number_matches, relative_deviation, value_of

__all__ = ["PARAPHRASE", "TALKING_KINDS", "TalkingAnswer", "paraphrase", "talking_answers"]

PARAPHRASE = "paraphrase"
"""The right answer in other words: the one talking answer that must pass."""

TALKING_KINDS = ("negation", "wrong context", "revision", "doubt", "two values", "denial",
                 "reported claim", "wrong entity")
"""The wrong talking answers, in the order they are tried and tabled."""


@dataclass(frozen=True)
class TalkingAnswer:
    """One talking wrong answer and its kind (one of TALKING_KINDS)."""

    kind: str
    text: str


def _value_as_written(check: AnswerContains | AnswerNumber, truth: str) -> str:
    """The checked value as the ground truth writes it ("$2,450,000"), else the check's own."""
    if isinstance(check, AnswerContains):
        return check.text
    for match in number_matches(truth):
        if relative_deviation(value_of(match), check.value) <= check.tolerance + 1e-12:
            return match.group(0).strip()
    return render_number(check.value)


def _value_checks(planned: list[Planned]) -> list[AnswerContains | AnswerNumber]:
    return [item.check for item in planned
            if isinstance(item.check, AnswerNumber)
            or (isinstance(item.check, AnswerContains) and names_a_value(item.check.text))]


def talking_answers(truth: str, planned: list[Planned], shifted: Callable[[str], str],
                    another: str | None, question: str = "") -> list[TalkingAnswer]:
    """The talking wrong answers for a turn whose ground truth is `truth`. Beside the right
    values stands a wrong one of the same shape: `shifted` of them (the figures 20 % off),
    else `another` (another fact of the document), else "something else". [] when no check
    of the turn reads a value. The wrong context is a period `question` does not ask for."""
    checks = _value_checks(planned)
    if not checks:
        return []
    right = " with ".join(dict.fromkeys(_value_as_written(check, truth) for check in checks))
    other = shifted(right) if shifted(right) != right else another or "something else"
    answers = [
        TalkingAnswer("negation", f"It is not {right}; it is {other}."),
        TalkingAnswer("wrong context", f"{_other_period(question)} {right}; now {other}."),
        TalkingAnswer("revision", f"{right} was the {_superseded_word(question)}, revised to "
                                  f"{other}."),
        TalkingAnswer("doubt", f"I can't confirm {right}."),
        TalkingAnswer("two values", f"{right} / {other}"),
        TalkingAnswer("denial", f"{right} is false; it is {other}."),
        TalkingAnswer("reported claim", f"The document claims {right}, but that is outdated; "
                                        f"it is {other}."),
    ]
    entities = [check for check in checks if isinstance(check, AnswerContains)
                and not any(char.isdigit() for char in check.text)]
    if entities and len(checks) > len(entities):
        # The value(s) kept, the entity swapped for another: "Nordics with $1,150,000".
        values = [_value_as_written(check, truth) for check in checks
                  if check not in entities]
        answers.append(TalkingAnswer("wrong entity",
                                     " with ".join(["Another one", *values]) + "."))
    return answers


def _superseded_word(question: str) -> str:
    """What the revision calls the old value: a word the question does not say ("draft", else
    "preliminary figure"): a question that names the draft asks for it (assertions' rule)."""
    return "preliminary figure" if "draft" in question.casefold() else "draft"


def _other_period(question: str) -> str:
    """A period the question does not ask about ("Last year", else "In the previous quarter")."""
    return "In the previous quarter" if "last year" in question.casefold() else "Last year"


def paraphrase(truth: str) -> str:
    """The ground truth asserted in other words around it, as an agent would put it."""
    return f"Going by the document you shared, the answer is {truth.rstrip('.')}. Hope that helps!"
