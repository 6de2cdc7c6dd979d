"""What one exact check is decided on (calls in scope, answer, setup), and a decider's type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.records.evidence import CallEvidence
from runner.records.outcomes import CheckResult
from runner.records.transcript import IndexedDocument
from runner.scenarios import Scenario


@dataclass(frozen=True)
class CheckContext:
    """What one check is decided on: the calls in scope and, for a turn, its answer."""

    calls: list[CallEvidence]
    answer: str | None  # None at scenario level
    turn: int | None
    scenario: Scenario | None = None
    indexed: tuple[IndexedDocument, ...] = ()
    question: str = ""  # what the user asked this turn (the cue rules read its words)


class Undecided(str):
    """A decider's diagnostic when the check cannot say (runner/verdict/assertions.py: a
    conditional, a question, a comparison): the result is not a pass, and not a failure
    either — the turn goes to the judge."""


UNDECIDED = "undecided: "
"""How an undecided CheckResult's diagnostic begins (passed is False): the one mark scoring
and the self-test read it by (`is_undecided`), kept in the diagnostic so the on-disk formats
stay as they are."""


def is_undecided(result: CheckResult) -> bool:
    """The check could not decide: the turn is left to the judge, not failed."""
    return not result.passed and result.diagnostic.startswith(UNDECIDED)


CheckDecider = Callable[[Any, CheckContext], tuple[bool, str]]
"""Decides one check on its context: (passed, diagnostic), the diagnostic empty on a pass and
an `Undecided` when the check cannot say."""
