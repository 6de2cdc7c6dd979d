"""The cue rules (runner/verdict/assertions.py) and the answer checks that use them: a value
counts only where the answer asserts it, the failure line quotes the cue, and what the rules
cannot read is undecided — left to the judge, never passed."""

from __future__ import annotations

import pytest

from runner.records.transcript import TurnPerformance, TurnRecord
from runner.scenarios import Turn
from runner.verdict import (
    Cue,
    check_note,
    is_undecided,
    reading_at,
    run_turn_checks,
)
from runner.verdict.scoring import checks_passed

FIGURE = "$2,450,000"


def read(text: str, value: str = FIGURE) -> tuple[Cue, str]:
    at = text.index(value)
    reading = reading_at(text, at, at + len(value))
    return reading.cue, reading.words


@pytest.mark.parametrize(("text", "cue", "words"), [
    ("It is not $2,450,000; Engineering gets $1,960,000", Cue.NEGATED, "not"),
    ("Last year $2,450,000; for FY2027 $3,100,000", Cue.OTHER_CONTEXT, "Last year"),
    ("$2,450,000 was the draft, revised to $2,000,000", Cue.SUPERSEDED, "draft"),
    ("$2,450,000 was revised to $2,000,000", Cue.SUPERSEDED, "was revised"),
    ("$2,450,000 / $3,185,000", Cue.ONE_OF_SEVERAL, "/"),
    ("Growth of $2,450,000-3,000,000 is forecast", Cue.ONE_OF_SEVERAL, "-3"),
    ("$2,450,000 or $3,185,000", Cue.ONE_OF_SEVERAL, "or"),
    ("I can't confirm $2,450,000", Cue.DOUBTED, "can't confirm"),
    ("$2,450,000 is wrong", Cue.NEGATED, "is wrong"),
    ("If it were $2,450,000 we would know", Cue.UNDECIDED, "If"),
    ("Purchases not above $2,450,000 need no sign-off", Cue.UNDECIDED, "not above"),
    ("Is it $2,450,000?", Cue.UNDECIDED, "?"),
    ("A purchase cannot exceed $2,450,000 without the board", Cue.UNDECIDED, "cannot exceed"),
    ("Engineering doesn't get $2,450,000", Cue.NEGATED, "doesn't"),
    ("You cannot spend more than $2,450,000 without approval", Cue.UNDECIDED, "more than"),
    ("Engineering gets $2,450,000.", Cue.ASSERTED, ""),
    ("The draft said $2,000,000, revised to $2,450,000.", Cue.ASSERTED, ""),
    ("It went from $2,000,000 to $2,450,000", Cue.ASSERTED, ""),
    ("It is not $3,000,000; it is $2,450,000.", Cue.ASSERTED, ""),
    ("Going by the document you shared, the answer is $2,450,000. Hope that helps!",
     Cue.ASSERTED, ""),
])
def test_each_mention_is_read_by_the_first_rule_that_applies(text, cue, words):
    assert read(text) == (cue, words)


def turn_with(checks: list[dict[str, object]]) -> Turn:
    return Turn.model_validate({"turn": 1, "objective": "Ask for the allocation.",
                                "checks": checks})


def decide(checks: list[dict[str, object]], answer: str):
    record = TurnRecord(turn=1, user_message="?", answer=answer, tool_calls=[],
                        performance=TurnPerformance(wall_s=0.0))
    return run_turn_checks(turn_with(checks), record)


NUMBER = [{"type": "answer_number", "value": 2450000, "tolerance": 0.001}]
LITERAL = [{"type": "answer_contains", "text": "Baltics"}]


@pytest.mark.parametrize(("checks", "answer", "cue"), [
    (NUMBER, "It is not $2,450,000; Engineering gets $1,960,000", "negated ('not')"),
    (NUMBER, "Last year $2,450,000; for FY2027 $3,100,000", "in another context ('Last year')"),
    (NUMBER, "$2,450,000 was the draft, revised to $2,000,000", "superseded ('draft')"),
    (NUMBER, "$2,450,000 / $9,185,000", "one of several ('/')"),
    (NUMBER, "I can't confirm $2,450,000", "doubted (\"can't confirm\")"),
    (LITERAL, "It is not the Baltics; it is the Nordics.", "negated ('not')"),
    (LITERAL, "Baltics / Nordics", "one of several ('/')"),
])
def test_a_value_written_without_being_asserted_fails_naming_the_cue(checks, answer, cue):
    (result,) = decide(checks, answer)
    assert not result.passed and not is_undecided(result)
    assert cue in result.diagnostic and "expected the answer to assert" in result.diagnostic


def test_two_candidates_either_side_of_a_slash_are_a_hedge():
    (result,) = decide(NUMBER, "$2,450,000 / $3,185,000")
    assert not result.passed and "hedged answer offering 2 candidates" in result.diagnostic


@pytest.mark.parametrize(("checks", "answer"), [
    (NUMBER, "Engineering is allocated $2,450,000 for FY2027."),
    (NUMBER, "It was $2,000,000 in the draft; revised to $2,450,000."),
    (LITERAL, "The Baltics, with $1,150,000."),
])
def test_an_asserted_value_passes(checks, answer):
    (result,) = decide(checks, answer)
    assert result.passed, result.diagnostic


def test_what_the_rules_cannot_read_is_undecided_and_goes_to_the_judge():
    (result,) = decide(NUMBER, "If Engineering were given $2,450,000, it would hire.")
    assert not result.passed and is_undecided(result)
    assert result.diagnostic.startswith("undecided: ") and "judge decides" in result.diagnostic
    assert checks_passed([result])  # no failure: the judge decides the turn
    assert check_note(result).startswith("check answer_number (turn 1) left to the judge: ")


def test_a_lower_case_word_counts_wherever_it_is_written():
    # "never pass silently" is the rule quoted, not a denial of the word
    (result,) = decide([{"type": "answer_contains", "text": "silently"}],
                       "Errors should never pass silently.")
    assert result.passed


def test_a_derived_literal_is_read_over_its_whole_extent():
    turn = Turn.model_validate({"turn": 1, "objective": "Ask who the treasurer is.",
                                "ground_truth": {"expected_answer": "Tomasz Lindqvist"}})
    record = TurnRecord(turn=1, user_message="?", answer="Tomasz Lindqvist / Ada Berg",
                        tool_calls=[], performance=TurnPerformance(wall_s=0.0))
    (result,) = run_turn_checks(turn, record)
    assert not result.passed and "one of several ('/')" in result.diagnostic


def test_an_undecided_check_without_a_judge_leaves_the_scenario_not_judged():
    from runner.records.status import Status
    from runner.verdict import scenario_status

    (undecided,) = decide(NUMBER, "If Engineering were given $2,450,000, it would hire.")
    (failed,) = decide(NUMBER, "It is not $2,450,000.")
    outcome = scenario_status(None, [undecided])
    assert outcome.status is Status.NOT_JUDGED
    assert "0 of 1 exact checks passed, 1 undecided" in outcome.notes[0]
    assert scenario_status(None, [undecided, failed]).status is Status.FAIL


@pytest.mark.parametrize(("text", "cue"), [
    ("Engineering gets $2,450,000 (previously $2,000,000).", Cue.ASSERTED),
    ("I think it is $2,450,000.", Cue.UNDECIDED),
    ("The original allocation is $2,450,000.", Cue.ASSERTED),  # "original" is no revision
])
def test_brackets_bound_a_clause_and_soft_hedges_are_undecided(text, cue):
    assert read(text)[0] is cue


@pytest.mark.parametrize(("text", "cue", "words"), [
    # Wrong answers in words the first cue list did not have (found by reading it as an agent
    # that talks would write): each reads as what it is, not as the figure asserted.
    ("$1,960,000 (the $2,450,000 figure is from FY2026)", Cue.OTHER_CONTEXT, "FY2026"),
    ("$2,450,000 in FY2026 and $1,960,000 in FY2027", Cue.OTHER_CONTEXT, "FY2026"),
    ("The document claims $2,450,000, but that is wrong", Cue.DOUBTED, "claims"),
    ("It says $2,450,000, but that is outdated", Cue.NEGATED, "but that is outdated"),
    ("Engineering used to get $2,450,000 and now gets $1,960,000", Cue.SUPERSEDED, "used to get"),
    ("$2,450,000 is false; it is $1,960,000", Cue.NEGATED, "is false"),
    # ... and right answers that name years and reports stay asserted.
    ("Engineering gets $2,450,000 in FY2027 and $1,960,000 in FY2026", Cue.ASSERTED, ""),
    ("The FY2027 plan, approved in 2026, gives Engineering $2,450,000.", Cue.ASSERTED, ""),
    ("For FY 2027 Engineering gets $2,450,000, approved on 22 June 2026.", Cue.ASSERTED, ""),
    ("Insurance claims of $2,450,000 were paid.", Cue.ASSERTED, ""),
])
def test_talking_answers_are_read_against_the_year_the_question_names(text, cue, words):
    at = text.index(FIGURE)
    reading = reading_at(text, at, at + len(FIGURE), "How much does Engineering get in FY2027?")
    assert (reading.cue, reading.words) == (cue, words)


def test_a_period_the_question_asks_for_is_no_cue():
    at = "Last year it was $2,450,000.".index(FIGURE)
    text = "Last year it was $2,450,000."
    assert reading_at(text, at, at + len(FIGURE)).cue is Cue.OTHER_CONTEXT
    assert reading_at(text, at, at + len(FIGURE),
                      asked="What was the allocation last year?").cue is Cue.ASSERTED
    record = TurnRecord(turn=1, user_message="And the draft figure?",
                        answer="The draft said $2,450,000.", tool_calls=[],
                        performance=TurnPerformance(wall_s=0.0))
    (result,) = run_turn_checks(turn_with(NUMBER), record)
    assert result.passed, result.diagnostic


@pytest.mark.parametrize(("checks", "question", "answer"), [
    (NUMBER, "How much is allocated to Engineering?",
     "According to the FY2027 budget plan, Engineering is allocated **$2,450,000**."),
    (NUMBER, "How much is allocated to Engineering?",
     "Engineering receives $2.45 million (USD) in FY2027, out of a total of $5,210,000."),
    (NUMBER, "How much is allocated to Engineering?",
     "- **Engineering:** $2,450,000 — the largest departmental allocation"),
    (NUMBER, "How much is allocated to Engineering?",
     "Engineering gets $2,450,000, not the $5,210,000 total."),
    (NUMBER, "How much is allocated to Engineering?",
     "It isn't $2,540,000 — it's $2,450,000."),
    ([{"type": "answer_number", "value": 12.0, "tolerance": 0.01}],
     "And how does that compare with the same quarter last year?",
     "Revenue grew 12.0% year over year, from $7.47 million in Q2 FY2025 to $8.37 million."),
    ([{"type": "answer_contains", "text": "Finance Director", "ignore_case": True}],
     "If Engineering wants to buy a $40,000 test rig, who has to approve it?",
     "You need the Finance Director's approval, since it's above the $25,000 threshold but "
     "not above $250,000."),
    ([{"type": "answer_contains", "text": "Baltics"},
      {"type": "answer_number", "value": 1150000, "tolerance": 0.001}],
     "Which region has the smallest full-year target, and who owns it?",
     "The Baltics have the smallest full-year target at $1,150,000; Lucan Mercier-Dube owns it."),
])
def test_correct_answers_as_agents_write_them_pass(checks, question, answer):
    record = TurnRecord(turn=1, user_message=question, answer=answer, tool_calls=[],
                        performance=TurnPerformance(wall_s=0.0))
    results = run_turn_checks(turn_with(checks), record)
    assert all(result.passed for result in results), [r.diagnostic for r in results]
