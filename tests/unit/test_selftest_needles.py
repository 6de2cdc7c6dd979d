"""What the live oracle must find in its retrieval before it gives the ground truth: the
answer as its documents write it (runner/selftest/_needles.py)."""

from __future__ import annotations

from runner.selftest._needles import needles

POLICY = """Mileage for a personal car is reimbursed at $0.58 per mile.
Hotel stays are capped at $260 per night in tier-one cities.
You must cure the violation prior to thirty days after your receipt of the notice.
The 2030 budget is $2,450,000."""


def test_an_answer_the_document_writes_is_looked_for_as_the_document_writes_it():
    assert needles("$0.58 per mile", [POLICY]) == (["0.58"], "written")
    # One token each, never a phrase (a document may break it over two lines).
    assert needles("Hotel stays are capped", [POLICY]) == (["hotel", "stays", "capped"], "written")
    assert needles("Cure", [POLICY]) == (["cure"], "written")
    # A number the document spells out, or groups, is looked for in its spelling.
    assert needles("prior to 30 days after your receipt", [POLICY]) == (["thirty"], "written")
    assert needles("2450000 dollars", [POLICY]) == (["2,450,000"], "written")
    assert needles("Reimbursed personal mileage", [POLICY]) == (
        ["reimbursed", "personal", "mileage"], "written")


def test_a_part_is_a_whole_token_not_a_piece_of_another_number():
    # "30" stands in "2030" and "$260" holds "26" — neither is the number asked for.
    assert needles("26", [POLICY]).how == "absent"
    assert needles("20 days", ["It was 2030."]).how == "absent"


def test_an_answer_written_in_part_is_worked_out_and_one_written_nowhere_is_absent():
    # 3 nights at $260: 260 is there, 780 is the agent's arithmetic.
    assert needles("$780 (3 nights at $260)", [POLICY]) == ([], "worked out")
    # Planted: a figure the policy never gives — its own parts are the needles, so no
    # retrieval of this document can bring them back.
    assert needles("$71 per day", [POLICY]) == (["71"], "absent")
    assert needles("Okafor approves it", [POLICY]) == (["okafor", "approves"], "absent")
    assert needles("anything", []) == ([], "absent")
