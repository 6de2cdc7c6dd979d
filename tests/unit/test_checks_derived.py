"""Checks trialbox builds from what a turn already says: ground_truth.expected_answer (derived)
and GAIA's `expected_tools` — worked examples for every rule."""

from __future__ import annotations

from typing import Any

import pytest

from runner.records.outcomes import CheckResult
from runner.records.transcript import ToolCall, Transcript, TurnPerformance, TurnRecord
from runner.scenarios import AnswerContains, AnswerNumber, Scenario, Turn
from runner.verdict.checks import EXPECTED_TOOLS, run_all_checks, run_turn_checks
from runner.verdict.derived import amount_of, derived_checks


def turn(number: int = 1, **fields: Any) -> Turn:
    return Turn.model_validate({"turn": number, "objective": "Ask about the budget.", **fields})


def truth(expected: Any) -> dict[str, Any]:
    return {"ground_truth": {"doc_id": "budget_2026", "expected_answer": expected}}


def record(answer: str = "", calls: tuple[str, ...] = (), number: int = 1) -> TurnRecord:
    return TurnRecord(
        turn=number,
        user_message="q",
        answer=answer,
        tool_calls=[ToolCall(name=name) for name in calls],
        performance=TurnPerformance(wall_s=1.0),
    )


def only(expected: Any, answer: str) -> CheckResult:
    (result,) = run_turn_checks(turn(**truth(expected)), record(answer))
    return result


# --- which expected answers derive which check --------------------------------------------


@pytest.mark.parametrize(
    ("expected", "value"),
    [
        ("$412,000", 412_000),
        ("24.6", 24.6),
        ("12%", 12),
        ("$1.2 million", 1_200_000),
        ("412,000 USD", 412_000),
        ("47 employees", 47),
        (412000, 412_000),
        (24.6, 24.6),
    ],
)
def test_numbers_and_amounts_derive_answer_number_with_gaias_5_percent(expected, value):
    (check,) = derived_checks(turn(**truth(expected)))
    assert check == AnswerNumber(type="answer_number", value=value, tolerance=0.05)


@pytest.mark.parametrize(
    ("expected", "text"),
    [
        ("Jane Doe", "Jane Doe"),
        ("Q3 2025", "Q3 2025"),
        ("March 15", "March 15"),
        ("2025", "2025"),  # a year: within 5% of 2025 lies every year from 1924 to 2126
        ("Vendor   Corp.", "Vendor Corp"),
        ("3 business days left", "3 business days left"),
    ],
)
def test_short_literals_derive_answer_contains_ignoring_case(expected, text):
    (check,) = derived_checks(turn(**truth(expected)))
    assert check == AnswerContains(type="answer_contains", text=text, ignore_case=True)


@pytest.mark.parametrize(
    "fields",
    [
        truth("Remote work is allowed two days a week"),  # 8 words: a sentence, left to the judge
        truth(None),  # null: the agent must say it does not know
        {"ground_truth": {"doc_id": "budget_2026", "note": "no expected_answer key"}},
        {},  # no ground truth at all
        truth("   "),
    ],
)
def test_nothing_is_derived(fields):
    assert derived_checks(turn(**fields)) == []


def test_a_list_derives_one_check_per_short_item():
    checks = derived_checks(
        turn(**truth(["Alice Chen", "$5,000", "a long sentence of many words"]))
    )
    assert checks == [
        AnswerContains(type="answer_contains", text="Alice Chen", ignore_case=True),
        AnswerNumber(type="answer_number", value=5000, tolerance=0.05),
    ]


@pytest.mark.parametrize(
    "own", [{"type": "answer_contains", "text": "412"}, {"type": "answer_number", "value": 412000}]
)
def test_a_turn_with_its_own_answer_check_gets_no_derived_one(own):
    assert derived_checks(turn(checks=[own], **truth("$412,000"))) == []


def test_an_answer_not_contains_does_not_stop_derivation():
    # "must not say I cannot" says nothing about what the right answer is
    t = turn(checks=[{"type": "answer_not_contains", "text": "I cannot"}], **truth("$412,000"))
    assert len(derived_checks(t)) == 1


@pytest.mark.parametrize(
    ("text", "value"), [("-3.5%", -3.5), ("$2025", 2025), ("EUR 12", 12), ("14.2M", 14_200_000)]
)
def test_amount_of(text, value):
    assert amount_of(text) == pytest.approx(value)


@pytest.mark.parametrize(
    "text", ["Q3 2025", "2025", "March 15", "USD 12 per seat per month", "between 3 and 5"]
)
def test_not_an_amount(text):
    assert amount_of(text) is None


# --- deciding them ------------------------------------------------------------------------


def test_a_derived_number_passes_within_5_percent_and_is_marked_derived():
    result = only("$412,000", "Travel gets about $400,000 this year.")  # 2.9% off
    assert result == CheckResult(type="answer_number", turn=1, passed=True, derived=True)


def test_a_derived_number_fails_beyond_5_percent_saying_where_it_came_from():
    result = only("$412,000", "Travel gets $380,000.")  # 7.8% off
    assert not result.passed and result.derived
    assert result.diagnostic.startswith(
        "derived from ground_truth.expected_answer '$412,000': expected 412,000 (±5.00%); "
        "got 380,000"
    )
    assert "band 5–15% (GAIA's rubric: correctness 4)" in result.diagnostic


def test_a_derived_literal_ignores_case_and_spacing():
    assert only("Jane Doe", "The owner is JANE\n   doe, per the contract.").passed
    result = only("Jane Doe", "The owner is John Doe.")
    assert not result.passed
    assert result.diagnostic == (
        "derived from ground_truth.expected_answer 'Jane Doe': expected "
        "the answer to say 'Jane Doe' (as whole words, ignoring case, punctuation and how "
        "numbers and dates are written); got 'The owner is John Doe.'"
    )


def test_declared_checks_keep_their_exact_spacing():
    t = turn(checks=[{"type": "answer_contains", "text": "Jane Doe"}])
    (result,) = run_turn_checks(t, record("Jane\nDoe"))
    assert not result.passed and not result.derived


# --- expected_tools -----------------------------------------------------------------------


def test_expected_tools_is_an_in_order_subsequence_of_the_turns_calls():
    t = turn(expected_tools=["search_file", "query_documents"])
    (ok,) = run_turn_checks(
        t,
        record(
            calls=("list_indexed_documents", "search_file", "index_document", "query_documents")
        ),
    )
    assert ok == CheckResult(type=EXPECTED_TOOLS, turn=1, passed=True)
    (bad,) = run_turn_checks(t, record(calls=("query_documents", "search_file")))
    assert not bad.passed and not bad.derived
    assert bad.diagnostic == (
        "GAIA expected_tools: expected in this order [search_file, query_documents]; matched "
        "search_file at call 2; no query_documents after call 2; got [query_documents(), "
        "search_file()]"
    )


def test_expected_tools_leaves_out_the_ui_indexing_step_and_empty_lists():
    # A captured session lists the Agent UI's own indexing step; it is not the agent's choice.
    (result,) = run_turn_checks(
        turn(expected_tools=["index_documents", "query_documents"]),
        record(calls=("index_documents", "query_documents")),
    )
    assert result.passed
    assert run_turn_checks(turn(expected_tools=["index_documents"]), record()) == []
    assert run_turn_checks(turn(expected_tools=[]), record()) == []


# --- run_all_checks -----------------------------------------------------------------------


def scenario(*turns: Turn) -> Scenario:
    return Scenario(id="s", category="rag_quality", persona="casual_user", turns=list(turns))


def test_run_all_checks_order_declared_then_expected_tools_then_derived():
    s = scenario(
        turn(
            1,
            checks=[{"type": "max_tool_calls", "max": 3}],
            expected_tools=["query_documents"],
            **truth("24.6"),
        )
    )
    transcript = Transcript(scenario_id="s", turns=[record("It is 24.6%.", ("query_documents",))])
    results = run_all_checks(s, transcript)
    assert [(r.type, r.derived, r.passed) for r in results] == [
        ("max_tool_calls", False, True),
        (EXPECTED_TOOLS, False, True),
        ("answer_number", True, True),
    ]


def test_run_all_checks_without_derived_checks():
    s = scenario(turn(1, expected_tools=["query_documents"], **truth("24.6")))
    transcript = Transcript(scenario_id="s", turns=[record("no idea")])
    assert [r.type for r in run_all_checks(s, transcript, derived=False)] == [EXPECTED_TOOLS]


def test_a_turn_never_reached_fails_its_expected_tools_and_derived_checks():
    s = scenario(turn(1), turn(2, expected_tools=["query_documents"], **truth("$5,000")))
    results = run_all_checks(s, Transcript(scenario_id="s", turns=[record("hi")]))
    assert [(r.type, r.turn, r.derived, r.passed) for r in results] == [
        (EXPECTED_TOOLS, 2, False, False),
        ("answer_number", 2, True, False),
    ]
    assert all(r.diagnostic.startswith("expected turn 2 to run") for r in results)


# --- literals match as whole tokens (issue 19: each example of its "Why") ----------------


def test_notice_does_not_pass_on_copyright_notices():
    assert not only("NOTICE", "Yes — keep the copyright notices when you redistribute.").passed
    assert only("NOTICE", "It is the NOTICE file; you must pass it on.").passed
    assert only("NOTICE", "The file is called notice.txt.").passed  # punctuation splits tokens


@pytest.mark.parametrize("expected", ["No", "A", "Q", "ok", "n/a"])
def test_a_literal_of_fewer_than_3_letters_or_digits_derives_no_check(expected):
    # "No" would otherwise pass on "I do not know": deciding it is the judge's job
    assert derived_checks(turn(**truth(expected))) == []


@pytest.mark.parametrize("answer", [
    "The contract ends on 8 September 2026.",
    "It ends September 8, 2026.",
    "End date: 2026-09-08",
    "The 8th of September, 2026 is the last day.",
    "sept. 8 2026",
])
def test_a_date_passes_every_way_of_writing_it(answer):
    assert only("8 September 2026", answer).passed


@pytest.mark.parametrize("answer", [
    "It ends on 9 September 2026.", "It ends on 8 October 2026.", "2027-09-08", "In 2026.",
])
def test_a_date_fails_another_date(answer):
    assert not only("8 September 2026", answer).passed


@pytest.mark.parametrize("answer", [
    "The Baltics, with $1,150,000.",
    "The largest allocation goes to the Baltics: $1.15 million.",
    "Baltics — 1,150,000 USD",
    "The baltics region gets 1.15M dollars",
])
def test_a_region_and_amount_literal_passes_paraphrases(answer):
    assert only("Baltics with $1,150,000", answer).passed


@pytest.mark.parametrize("answer", [
    "The Baltics, with $1,500,000.", "Poland, with $1,150,000.", "The Baltics.",
])
def test_a_region_and_amount_literal_fails_the_wrong_region_or_amount(answer):
    assert not only("Baltics with $1,150,000", answer).passed


@pytest.mark.parametrize(("expected", "answer", "passed"), [
    # GAIA-shaped ground truths: codes, versions, names and short values
    ("Version 2.0, January 2004", "This is version 2.0 of the licence, from January 2004.", True),
    ("Version 2.0, January 2004", "This is version 2.1, January 2004.", False),
    ("Q3 2025", "That was in Q3 2025.", True),
    ("Q3 2025", "That was in Q4 2025.", False),
    ("ISO 9001", "They hold iso-9001 certification.", True),
    ("ISO 9001", "They hold ISO 90012.", False),
    ("Jane Doe", "Doe, Jane owns it.", True),
    ("Finance Director", "The Finance Director's sign-off.", True),
    ("Finance Director", "The Finance Directorate.", False),
    ("2025", "Published in March 2025.", True),
    ("2025", "Published in 20256.", False),
])
def test_gaia_shaped_literals(expected, answer, passed):
    assert only(expected, answer).passed is passed


# --- amounts: the figure the answer asserts, and hedged answers ---------------------------


def test_a_hedged_list_of_amounts_fails_even_though_one_is_right():
    result = only("$412,000", "It is $380,000, $412,000 or $450,000.")
    assert not result.passed
    assert "hedged answer offering 3 candidates" in result.diagnostic


def test_two_candidates_with_or_is_hedged():
    assert not only("$412,000", "Either $350,000 or $412,000, I am not sure.").passed


def test_one_figure_with_others_mentioned_is_not_hedged():
    # a second figure of another size is context, not a candidate
    assert only("$412,000", "Travel gets $412,000 of the $3,100,000 total.").passed
    # two close figures without a hedging word: one asserted, one compared against
    assert only("$4.2 million", "Revenue rose to $4.2M, up from $3.9M.").passed


def test_the_same_figure_written_twice_is_one_candidate():
    assert only("$1,150,000", "$1.15 million (1,150,000 USD), or about 1.15M").passed


def test_hedging_applies_to_declared_number_checks_too():
    t = turn(checks=[{"type": "answer_number", "value": 2450000, "tolerance": 0.001}])
    (result,) = run_turn_checks(t, record("Maybe $2,000,000, $2,450,000 or $2,900,000."))
    assert not result.passed and not result.derived


# --- literals that are notes, literals said twice, checks proven on their own truth ---------

@pytest.mark.parametrize(("expected", "derived"), [
    # A short expected answer that annotates its value is no value written one way: read as a
    # sentence, it derives the one figure it asserts, or nothing.
    ("Dock 7 (not 12)", []),
    ("Renamed: Quill (was Quire)", []),
    ("Kept: 14 crates, 2-3x/month", [14.0]),
    ("Budget now $48,000 (not $40,000)", [48000.0]),
])
def test_an_annotated_short_answer_is_read_as_a_sentence(expected, derived):
    checks = derived_checks(turn(**truth(expected)))
    assert [c.value for c in checks if isinstance(c, AnswerNumber)] == derived
    assert not any(isinstance(c, AnswerContains) for c in checks), checks


def test_a_sentence_check_its_own_ground_truth_fails_is_not_derived():
    # "$95" is offered as one of two bounds: asserted by the sentence rule's reading, it is a
    # hedge to the number check, which a right answer written like the truth would fail.
    assert derived_checks(turn(**truth("Alert set: under $120 OR used under $95"))) == []


def test_a_literal_said_twice_is_read_where_it_is_said_whole():
    # The second "Quill" belongs to another version: the negated whole mention decides.
    result = only("Quill 3.1", "It is not Quill 3.1; it is Quill 2.")
    assert not result.passed and "negated ('not')" in result.diagnostic
    assert only("Quill 3.1", "It is Quill 3.1, not Quill 2.").passed
    # Its words in another order still count where they stand.
    assert only("Quill 3.1", "Version 3.1 of Quill.").passed


def test_a_sentence_with_a_single_digit_beside_its_figure_asserts_two_values():
    # The 3 derives no check of its own (a single digit is in almost any answer), but it is
    # a value the sentence asserts: a check of the 18 alone would pass an answer that gives
    # only the leave, so the sentence is the judge's.
    assert derived_checks(turn(**truth("18 days of leave; up to 3 days a week at home"))) == []
    assert [c.value for c in derived_checks(turn(**truth("18 days of leave in the first year")))
            if isinstance(c, AnswerNumber)] == [18.0]
