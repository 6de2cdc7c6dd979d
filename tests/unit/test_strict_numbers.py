"""Booleans are refused where our own files hold numbers (issue 34): pydantic's lax mode read
`wall_s: true`, `trial: true`, `cost_usd: true`, `min_pass_rate: true` and a trace's `turn: true`
as 1. Each of these fields is strict on its own (runner/records/quantities.py); a whole number
still reads as a float, and the ISO datetimes beside them still read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from runner.records.transcript import TurnRecord
from runner.report._models import ScenarioResult
from runner.run.settings import RunSettings
from runner.system.json_input import InputError

ROW = {"id": "orchard_apples", "status": "PASS"}


@pytest.mark.parametrize("field", ["wall_s", "trial", "cost_usd"])
def test_a_scorecard_row_with_true_for_a_number_is_refused_by_field(field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        ScenarioResult.model_validate_json(json.dumps(ROW | {field: True}))
    assert [error["loc"][0] for error in raised.value.errors()] == [field]


def test_a_scorecard_row_with_numbers_reads_and_a_whole_number_is_a_float() -> None:
    row = ScenarioResult.model_validate_json(json.dumps(ROW | {"wall_s": 3, "trial": 2,
                                                               "cost_usd": 0}))
    assert row.wall_s == 3.0 and isinstance(row.wall_s, float) and row.trial == 2


def test_a_trial_of_two_point_oh_is_not_a_trial() -> None:
    with pytest.raises(ValidationError):
        ScenarioResult.model_validate_json(json.dumps(ROW | {"trial": 2.0}))


TURN = {"user_message": "q", "answer": "a", "performance": {"wall_s": 1}}


@pytest.mark.parametrize("turn", [True, 1.0, "1"])
def test_a_trace_turn_that_is_no_whole_number_is_refused(turn: Any) -> None:
    assert TurnRecord.model_validate_json(json.dumps(TURN | {"turn": 1})).turn == 1
    with pytest.raises(ValidationError) as raised:
        TurnRecord.model_validate_json(json.dumps(TURN | {"turn": turn}))
    assert [error["loc"] for error in raised.value.errors()] == [("turn",)]


def test_a_trace_wall_time_of_true_is_refused() -> None:
    with pytest.raises(ValidationError) as raised:
        TurnRecord.model_validate_json(json.dumps(TURN | {"turn": 1,
                                                          "performance": {"wall_s": True}}))
    assert [error["loc"] for error in raised.value.errors()] == [("performance", "wall_s")]


def test_run_json_with_true_for_the_min_pass_rate_is_one_line_naming_it(tmp_path: Path) -> None:
    settings = RunSettings(run_id="20261206-000000-abcd", suite_paths=[Path("scenarios")],
                           corpus_root=Path("corpus"), min_pass_rate=0.8)
    settings.save(tmp_path)
    assert RunSettings.load(tmp_path).min_pass_rate == 0.8
    data = json.loads((tmp_path / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps(data | {"min_pass_rate": True}))
    with pytest.raises(InputError, match=r"run.json: min_pass_rate: ") as raised:
        RunSettings.load(tmp_path)
    assert "\n" not in str(raised.value)
