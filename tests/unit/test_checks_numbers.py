"""Reading numbers out of an agent's answer, and GAIA's deviation bands."""

from __future__ import annotations

import pytest

from runner.verdict.answer_checks import deviation_band, relative_deviation
from runner.verdict.numbers import find_numbers


@pytest.mark.parametrize(("text", "values"), [
    ("Revenue was $14.2 million in Q3.", [14_200_000]),       # Q3 is a label, not a number
    ("14,200,000", [14_200_000]),
    ("14.2M", [14_200_000]),
    ("about 14.2 mn", [14_200_000]),
    ("3k riders", [3_000]),
    ("10bn and 2.5 billion", [10e9, 2.5e9]),
    ("5T", [5e12]),
    ("3 thousand", [3_000]),
    ("$1,234.56", [1_234.56]),
    ("€.5 each", [0.5]),
    ("growth of 12.5%", [12.5, 0.125]),                     # both readings of a percentage
    ("40 percent", [40, 0.4]),
    ("-3.5 and −2", [-3.5, -2]),
    ("a 5 m wall", [5]),                                    # a spaced "m" is metres, not millions
    ("5km", [5]),                                           # "k" glued to a word is not thousands
    ("1,2,3", [1, 2, 3]),                                   # not a thousands group
    ("version 1.5.2", [1.5]),
    ("no numbers here", []),
])
def test_number_parsing_table(text: str, values: list[float]) -> None:
    assert [n.value for n in find_numbers(text)] == pytest.approx(values)


def test_found_numbers_keep_their_text() -> None:
    assert [n.text for n in find_numbers("It cost $14.2 million (14,200,000).")] == [
        "$14.2 million", "14,200,000"]


@pytest.mark.parametrize(("deviation", "band", "score"), [
    (0.0, "≤1%", 10), (0.01, "≤1%", 10), (0.0101, "≤5%", 8), (0.05, "≤5%", 8),
    (0.10, "5–15%", 4), (0.15, "5–15%", 4), (0.3, "15–50%", 1), (0.5, "15–50%", 1),
    (0.51, ">50%", 0), (float("inf"), ">50%", 0),
])
def test_deviation_bands_follow_gaia(deviation: float, band: str, score: int) -> None:
    assert deviation_band(deviation) == (band, score)


def test_relative_deviation() -> None:
    assert relative_deviation(103, 100) == pytest.approx(0.03)
    assert relative_deviation(-97, -100) == pytest.approx(0.03)
    assert relative_deviation(0.2, 0) == pytest.approx(0.2)  # absolute against zero
