"""Exact checks, verified by code (never by a model): plan each turn's checks and decide them.

A scenario declares checks (their models live in runner/scenarios/_checks.py); this module plans
which checks a turn is decided on, in order, and hands each to its decider: answer_checks.py,
tool_checks.py, setup_checks.py; derived.py builds the checks a turn implies. "The agent
answered wrongly" is a failed CheckResult whose diagnostic says `expected … ; got …` — never
an exception. Dispatch goes through an explicit registry, one function per type.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, replace
from typing import Any

from runner.records.evidence import Evidence, TurnEvidence
from runner.records.outcomes import CheckResult
from runner.records.transcript import Transcript, TurnRecord
from runner.scenarios import CHECK_MODELS, AnswerContains, Check, Scenario, Turn
from runner.verdict.answer_checks import ANSWER_DECIDERS, derived_literal
from runner.verdict.check_context import UNDECIDED, CheckContext, CheckDecider, Undecided
from runner.verdict.derived import derived_checks, expected_tools_check
from runner.verdict.setup_checks import SETUP_DECIDERS
from runner.verdict.tool_checks import TOOL_DECIDERS

__all__ = [
    "EXPECTED_TOOLS",
    "Planned",
    "planned_checks",
    "run_all_checks",
    "run_scenario_checks",
    "run_turn_checks",
]

EXPECTED_TOOLS = "expected_tools"
"""The CheckResult type of a turn's GAIA `expected_tools` list, decided as an in-order
subsequence of that turn's tool calls (the type names its origin, so a reader can tell it from
a declared `tools_in_order`)."""


@dataclass(frozen=True)
class Planned:
    """One check a turn will be decided on, and where it came from."""

    check: Check
    label: str  # the CheckResult type: the check's own, or EXPECTED_TOOLS
    derived: bool = False  # built from ground_truth.expected_answer
    origin: str = ""  # put before a failure's diagnostic, to say where the check came from


def planned_checks(turn: Turn, derived: bool = True) -> list[Planned]:
    """The turn's declared checks, then its `expected_tools`, then (when `derived`) the
    answer checks derived from its ground truth — the order results are reported in."""
    planned = [Planned(check, check.type) for check in turn.checks]
    expected = expected_tools_check(turn)
    if expected is not None:
        planned.append(Planned(expected, EXPECTED_TOOLS, origin="GAIA expected_tools: "))
    if derived and turn.ground_truth is not None:
        origin = (f"derived from ground_truth.expected_answer "
                  f"{turn.ground_truth.expected_answer!r}: ")
        planned += [Planned(check, check.type, derived=True, origin=origin)
                    for check in derived_checks(turn)]
    return planned


def run_turn_checks(turn: Turn, record: TurnRecord, derived: bool = True) -> list[CheckResult]:
    """Decide one turn's checks on that turn's tool calls and final answer."""
    evidence = TurnEvidence.from_record(record)
    context = CheckContext(calls=evidence.calls, answer=evidence.answer, turn=turn.turn,
                           question=evidence.user_message)
    # A derived literal is matched whitespace-insensitively: line breaks and double spaces in
    # a model's answer are layout, not a different answer.
    flat = replace(context, answer=" ".join(evidence.answer.split()))
    return [_decide(item, flat if item.derived else context)
            for item in planned_checks(turn, derived)]


def run_scenario_checks(scenario: Scenario, transcript: Transcript) -> list[CheckResult]:
    """Decide the scenario-level checks (only those) on the whole trajectory and setup."""
    evidence = Evidence.from_transcript(transcript)
    context = CheckContext(calls=evidence.trajectory, answer=None, turn=None,
                           scenario=scenario, indexed=tuple(transcript.indexed))
    return [_decide(Planned(check, check.type), context) for check in scenario.checks]


def run_all_checks(scenario: Scenario, transcript: Transcript,
                   derived: bool = True) -> list[CheckResult]:
    """Every check in order: each turn's (declared, expected_tools, derived), then the
    scenario's. `derived=False` (`--no-derived-checks`) leaves out the checks derived from
    ground truth.

    A turn the conversation never reached fails its checks (with that said), because a check
    that could not be decided must not read as passed.
    """
    records = {record.turn: record for record in transcript.turns}
    results: list[CheckResult] = []
    for turn in scenario.turns:
        record = records.get(turn.turn)
        if record is None:
            results += [CheckResult(type=item.label, turn=turn.turn, passed=False,
                                    derived=item.derived,
                                    diagnostic=f"expected turn {turn.turn} to run; got no "
                                               "record of it (the conversation stopped earlier)")
                        for item in planned_checks(turn, derived)]
        else:
            results += run_turn_checks(turn, record, derived)
    return results + run_scenario_checks(scenario, transcript)


def _decide(item: Planned, context: CheckContext) -> CheckResult:
    if item.derived and isinstance(item.check, AnswerContains):
        passed, diagnostic = derived_literal(item.check, context)
    else:
        passed, diagnostic = _DECIDERS[type(item.check)](item.check, context)
    if not passed and isinstance(diagnostic, Undecided):
        diagnostic = Undecided(UNDECIDED + item.origin + diagnostic)
    elif not passed:
        diagnostic = item.origin + diagnostic
    return CheckResult(type=item.label, turn=context.turn, passed=passed, derived=item.derived,
                       diagnostic="" if passed else diagnostic)


# One decider per check model, each found by the model its `check` parameter is typed with: the
# union in runner/scenarios/_checks.py stays the one list of check types, and the assertion
# proves every model of it has exactly one decider.
_DECIDERS: dict[type[Any], CheckDecider] = {
    typing.get_type_hints(decider)["check"]: decider
    for decider in (*TOOL_DECIDERS, *ANSWER_DECIDERS, *SETUP_DECIDERS)
}
assert set(_DECIDERS) == set(CHECK_MODELS.values()), "every check type has exactly one decider"
