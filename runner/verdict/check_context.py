"""What one exact check is decided on (calls in scope, answer, setup), and a decider's type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.records.evidence import CallEvidence
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


CheckDecider = Callable[[Any, CheckContext], tuple[bool, str]]
"""Decides one check on its context: (passed, diagnostic), the diagnostic empty on a pass."""
