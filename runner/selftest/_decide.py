"""The pure self-test: genuine and wrong attempts through the real check code, no model.

A check *decides* when some wrong attempt can fail it: an answer check (answer_contains,
answer_number, derived or written) or a check that asks for a call (tool_called,
tools_in_order, tools_exact, GAIA's expected_tools). The others are guards — tool_not_called,
max_tool_calls, answer_not_contains, documents_indexed — that a model which calls no tool and
says nothing passes: a scenario with guards only is decided by its judge (judge-only), however
many of its checks "pass".

Wrong answers come with the genuine trajectory when the turn checks its answer (so only the
answer checks can catch them), and with no tool calls when it checks tools only (the model
that calls nothing and answers wrongly).
"""

from __future__ import annotations

from collections.abc import Iterable

from runner.records.transcript import (
    IndexedDocument,
    ToolCall,
    Transcript,
    TurnPerformance,
    TurnRecord,
)
from runner.scenarios import (
    AnswerContains,
    AnswerNumber,
    Manifest,
    Scenario,
    ToolCalled,
    ToolsExact,
    ToolsInOrder,
    Turn,
)
from runner.selftest._genuine import (
    ANSWER_CHECKS,
    UNKNOWN,
    genuine_calls,
    ground_truth_answer,
    wanted,
)
from runner.selftest._report import (
    ScenarioSelftest,
    SelftestReport,
    Slipped,
    TurnSelftest,
    Verdict,
)
from runner.selftest._talking import paraphrase
from runner.selftest._wrong import wrong_answers
from runner.verdict import (
    Planned,
    is_undecided,
    planned_checks,
    run_scenario_checks,
    run_turn_checks,
)

__all__ = ["decides", "selftest_scenario", "selftest_suite"]

_DECIDING_ANSWER_CHECKS = (AnswerContains, AnswerNumber)


def decides(item: Planned) -> bool:
    """The check can fail a wrong attempt (see the module docstring)."""
    if isinstance(item.check, ToolsExact):
        return bool(item.check.tools)
    return isinstance(item.check, (*_DECIDING_ANSWER_CHECKS, ToolCalled, ToolsInOrder))


def _record(turn: Turn, answer: str, calls: list[ToolCall]) -> TurnRecord:
    return TurnRecord(turn=turn.turn, user_message=turn.user_message or turn.objective,
                      answer=answer, tool_calls=calls, performance=TurnPerformance(wall_s=0.0))


def _failures(turn: Turn, record: TurnRecord, considered: list[Planned],
              undecided_fails: bool = True) -> list[str]:
    """Diagnostics of the considered checks that `record` does not pass (a check left to the
    judge is run with the others and its result set aside). With `undecided_fails` False an
    undecided check does not count: a wrong answer only the judge would stop is not caught
    by the checks."""
    return [f"{result.type}: {result.diagnostic}"
            for item, result in zip(planned_checks(turn), run_turn_checks(turn, record),
                                    strict=True)
            if item in considered and not result.passed
            and (undecided_fails or not is_undecided(result))]


def _genuine_failures(turn: Turn, genuine: TurnRecord, considered: list[Planned]) -> list[str]:
    """One line per considered check the genuine attempt fails; for an answer check it names
    what the check asks for and what the ground truth says, the two values that disagree."""
    lines = []
    for item, result in zip(planned_checks(turn), run_turn_checks(turn, genuine), strict=True):
        if item not in considered or result.passed:
            continue
        if isinstance(item.check, ANSWER_CHECKS):
            lines.append(f"{item.label} {wanted(item.check)} is not satisfied by the ground "
                         f"truth {genuine.answer!r}: {result.diagnostic}")
        else:
            lines.append(f"{result.type}: {result.diagnostic}")
    return lines


def _turn(turn: Turn, scenario: Scenario, manifest: Manifest | None
          ) -> tuple[TurnSelftest | None, TurnRecord]:
    planned = planned_checks(turn)
    truth = ground_truth_answer(turn, manifest)
    calls = genuine_calls(planned, scenario)
    genuine = _record(turn, truth or "", calls)
    # With no ground truth there is no right answer to prove an answer check on: those
    # checks are the judge's, and only the tool checks are self-tested.
    considered = [item for item in planned
                  if truth is not None or not isinstance(item.check, ANSWER_CHECKS)]
    left_to_judge = [item.label for item in planned if item not in considered]
    if not any(decides(item) for item in considered):
        behavior = turn.ground_truth.expected_behavior if turn.ground_truth else None
        if behavior and truth is None:
            return TurnSelftest(turn=turn.turn, checks=[], genuine_answer="", genuine_tools=[],
                                wrong_tried=0, judge_only_checks=left_to_judge,
                                judge_only_reason=f"its ground truth is expected_behavior "
                                                  f"({behavior!r}), words only the judge can "
                                                  "hold a reply to"), genuine
        if left_to_judge:
            return TurnSelftest(turn=turn.turn, checks=[], genuine_answer="",
                                genuine_tools=[], wrong_tried=0,
                                judge_only_checks=left_to_judge), genuine
        return None, genuine
    checks_answer = any(decides(item) and isinstance(item.check, _DECIDING_ANSWER_CHECKS)
                        for item in considered)
    with_calls = calls if checks_answer else []
    wrong = wrong_answers(turn, truth or "", considered, scenario, manifest)
    slipped = [Slipped(kind=item.kind, family=item.family, answer=item.text,
                       tools=[c.name for c in with_calls])
               for item in wrong
               if not _failures(turn, _record(turn, item.text, with_calls), considered,
                                undecided_fails=False)]
    failures = _genuine_failures(turn, genuine, considered)
    paraphrase_passed = None
    if truth not in (None, "", UNKNOWN) and checks_answer and not failures:
        # A right answer in other words must pass too: a check that fails it fails agents
        # that are right.
        said = paraphrase(truth or "")
        failures += [f"the paraphrase {said!r} of the right answer fails {failure}"
                     for failure in _failures(turn, _record(turn, said, calls), considered)]
        paraphrase_passed = not failures
    answer_decided = checks_answer and truth not in (None, "")
    return TurnSelftest(turn=turn.turn, checks=[item.label for item in considered],
                        answer_decided=answer_decided,
                        genuine_answer=truth or "", genuine_tools=[call.name for call in calls],
                        genuine_failures=failures, wrong_tried=len(wrong),
                        tried=list(dict.fromkeys(item.family for item in wrong)),
                        paraphrase_passed=paraphrase_passed,
                        slipped=slipped, judge_only_checks=left_to_judge), genuine


def selftest_scenario(scenario: Scenario, manifest: Manifest | None) -> ScenarioSelftest:
    """One scenario: each deciding turn's genuine and wrong attempts, then its verdict."""
    turns: list[TurnSelftest] = []
    records: list[TurnRecord] = []
    for turn in scenario.turns:
        tested, record = _turn(turn, scenario, manifest)
        records.append(record)
        if tested is not None:
            turns.append(tested)
    deciding = [turn for turn in turns if turn.checks]
    indexed = [IndexedDocument(corpus_doc=doc.corpus_doc, path=doc.path, chunks=1)
               for doc in scenario.setup_documents]
    transcript = Transcript(scenario_id=scenario.id, turns=records, indexed=indexed)
    scenario_failures = [f"{result.type}: {result.diagnostic}"
                         for result in run_scenario_checks(scenario, transcript)
                         if not result.passed]
    if not deciding:
        verdict = Verdict.JUDGE_ONLY
    elif scenario_failures or any(turn.genuine_failures for turn in deciding):
        verdict = Verdict.NOT_PASSABLE
    elif any(turn.slipped for turn in deciding):
        verdict = Verdict.NOT_DISCRIMINATING
    else:
        verdict = Verdict.SOUND
    file = str(scenario.source_file) if scenario.source_file else scenario.id
    return ScenarioSelftest(file=file, id=scenario.id, category=scenario.category,
                            turn_count=len(scenario.turns), verdict=verdict,
                            genuine_failures=scenario_failures, turns=turns)


def selftest_suite(scenarios: Iterable[Scenario], manifest: Manifest | None) -> SelftestReport:
    """Every scenario's self-test, in the order given."""
    return SelftestReport(scenarios=[selftest_scenario(s, manifest) for s in scenarios])
