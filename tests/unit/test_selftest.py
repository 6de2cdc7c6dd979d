"""`trialbox selftest`, the pure layer: genuine answers pass, wrong answers are caught, and a
weak check is named with the file, turn and wrong answer that slipped through."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from runner.bench.make_bench import selftest_line
from runner.cli.app import app
from runner.scenarios import Scenario, Turn, load_suite
from runner.selftest import SelftestReport, Verdict, selftest_scenario, summary_line
from runner.system.paths import eval_root

EVAL = eval_root()
FIXTURES = Path(__file__).parent.parent / "fixtures"


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["selftest", *args])
    return result.exit_code, result.output


def budget_scenario(turns: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A scenario on our corpus's FY2027 budget (facts: $2,450,000 engineering, $5,210,000
    total, $540,000 marketing, $25,000 and $250,000 thresholds, 22 June 2026 approval)."""
    return {"id": "planted", "category": "rag_quality", "persona": "data_analyst",
            "setup": {"index_documents": [{"corpus_doc": "budget_fy2027",
                                           "path": "documents/budget_fy2027_plan.json"}]},
            "turns": turns, **extra}


def engineering(**fields: Any) -> dict[str, Any]:
    return {"turn": 1, "objective": "Ask for the Engineering allocation.",
            "user_message": "How much does Engineering get?",
            "ground_truth": {"doc_id": "budget_fy2027", "fact_id": "engineering_allocation",
                             "expected_answer": "$2,450,000"}, **fields}


def tree(tmp_path: Path, *scenarios: dict[str, Any]) -> Path:
    folder = tmp_path / "scenarios" / "rag_quality"
    folder.mkdir(parents=True)
    for number, scenario in enumerate(scenarios):
        (folder / f"s{number}.yaml").write_text(yaml.safe_dump(scenario))
    return folder


def selftest_of(scenario: dict[str, Any]) -> Any:
    suite = load_suite([], EVAL / "corpus")
    return selftest_scenario(Scenario.model_validate(scenario), suite.manifest)


# --- our suite and GAIA's trees -------------------------------------------------------------


def test_our_suite_is_passable_and_discriminating_wherever_a_check_decides():
    code, output = invoke()
    assert code == 0, output
    assert output.strip().splitlines()[-1].endswith(
        "scenarios decidable offline, all passable and discriminating")


def test_the_web_system_scenarios_are_judge_only():
    # Their checks are guards (tool_not_called): a model that calls no tool and invents a
    # CPU figure passes them, so only the judge can decide these scenarios.
    code, output = invoke(str(EVAL / "scenarios" / "web_system"), "--json")
    assert code == 0
    report = SelftestReport.model_validate_json(output)
    assert len(report.scenarios) == 6
    assert {item.verdict for item in report.scenarios} == {Verdict.JUDGE_ONLY}
    assert summary_line(report) == ("0 of 6 scenarios decidable offline, all passable and "
                                    "discriminating")


@pytest.mark.parametrize("path", [FIXTURES / "gaia_tree" / "scenarios",
                                  FIXTURES / "gaia_repo" / "eval"])
def test_a_gaia_tree_is_reported_without_failing_on_judge_only_scenarios(path):
    code, output = invoke(str(path), "--json")
    assert code == 0, output
    report = SelftestReport.model_validate_json(output)
    verdicts = {item.verdict for item in report.scenarios}
    assert Verdict.JUDGE_ONLY in verdicts and Verdict.SOUND in verdicts
    assert verdicts <= {Verdict.JUDGE_ONLY, Verdict.SOUND}


# --- a planted weak check --------------------------------------------------------------------


def test_a_literal_found_in_every_answer_exits_1_naming_file_turn_and_answer(tmp_path):
    truth = {"doc_id": "budget_fy2027", "fact_id": "engineering_allocation",
             "expected_answer": "Engineering gets $2,450,000"}
    folder = tree(tmp_path, budget_scenario([engineering(
        ground_truth=truth, checks=[{"type": "answer_contains", "text": "e", "ignore_case": True}])]))
    code, output = invoke(str(folder), "--corpus", str(EVAL / "corpus"))
    assert code == 1
    assert "not_discriminating" in output
    assert (f"{folder / 's0.yaml'}: turn 1: wrong answer (I don't know) passed every check: "
            "\"I don't know: the documents do not say.\"") in output
    assert "hedged list" in output and "It could be" in output
    assert output.strip().splitlines()[-1] == (
        "1 of 1 scenarios decidable offline: 0 not passable, 1 not discriminating")


GAIA_SHAPED = """\
id: engineering_allocation_planted
name: Engineering allocation
category: rag_quality
severity: high
description: A planted scenario whose check transposes two digits of its ground truth.
persona: data_analyst
setup:
  index_documents:
    - corpus_doc: budget_fy2027
      path: documents/budget_fy2027_plan.json
turns:
  - turn: 1
    objective: Ask for the Engineering department's FY2027 allocation.
    ground_truth:
      doc_id: budget_fy2027
      fact_id: engineering_allocation
      expected_answer: "$2,450,000"
    success_criteria: States $2,450,000 for Engineering.
    checks:
      - {check}
expected_outcome: The agent reads the figure from the JSON budget.
"""


@pytest.mark.parametrize(("check", "wants"), [
    ({"type": "answer_contains", "text": "$2,540,000"}, "answer_contains '$2,540,000'"),
    ({"type": "answer_number", "value": 2540000, "tolerance": 0.01},
     "answer_number 2,540,000 (±1.00%)"),
])
def test_a_check_that_contradicts_the_ground_truth_exits_1_naming_file_turn_and_both_values(
        tmp_path, check, wants):
    # The genuine answer is the ground truth alone: $2,450,000 with a check asking for the
    # transposed $2,540,000 is a scenario a correct agent fails for ever. The file is written
    # in the shape GAIA's scenario YAML has (name, severity, description, success_criteria,
    # expected_outcome), plus our check.
    folder = tmp_path / "scenarios" / "rag_quality"
    folder.mkdir(parents=True)
    (folder / "s0.yaml").write_text(GAIA_SHAPED.format(check=json.dumps(check)))
    code, output = invoke(str(folder), "--corpus", str(EVAL / "corpus"))
    assert code == 1, output
    line = next(line for line in output.splitlines() if "not passable:" in line)
    assert line.startswith(f"  {folder / 's0.yaml'}: turn 1: not passable: {wants} ")
    assert "the ground truth '$2,450,000'" in line
    assert output.strip().splitlines()[-1] == (
        "1 of 1 scenarios decidable offline: 1 not passable, 0 not discriminating")


def test_the_revision_calls_the_old_value_by_a_word_the_question_does_not_say():
    from runner.selftest._talking import talking_answers
    from runner.verdict import planned_checks

    checks = [{"type": "answer_number", "value": 2450000, "tolerance": 0.001}]
    planned = planned_checks(Turn.model_validate(engineering(checks=checks)))
    said = {a.kind: a.text for a in talking_answers(
        "$2,450,000", planned, lambda text: "$1,960,000", None,
        "Which figure replaced the draft allocation?")}
    assert said["revision"] == "$2,450,000 was the preliminary figure, revised to $1,960,000."
    plain = {a.kind: a.text for a in talking_answers(
        "$2,450,000", planned, lambda text: "$1,960,000", None, "What does Engineering get?")}
    assert plain["revision"] == "$2,450,000 was the draft, revised to $1,960,000."


def test_a_scenario_no_right_answer_passes_catches_no_kind_in_the_table():
    contradicting = [{"type": "answer_contains", "text": "$2,540,000"}]
    sound = [{"type": "answer_number", "value": 2450000, "tolerance": 0.001}]
    results = [selftest_of(budget_scenario([engineering(checks=checks)]))
               for checks in (contradicting, sound)]
    assert [r.verdict for r in results] == [Verdict.NOT_PASSABLE, Verdict.SOUND]
    table = SelftestReport(scenarios=results).caught_by_kind()
    assert table and all(tried == 1 for _, tried in table.values()), table
    alone = SelftestReport(scenarios=results[:1]).caught_by_kind()
    assert alone == {}


def test_without_an_expected_answer_the_genuine_answer_is_the_named_fact_of_the_manifest():
    truth = {"doc_id": "budget_fy2027", "fact_id": "engineering_allocation"}
    checks = [{"type": "answer_number", "value": 2450000, "tolerance": 0.001}]
    result = selftest_of(budget_scenario([engineering(ground_truth=truth, checks=checks)]))
    assert result.verdict is Verdict.SOUND
    assert result.turns[0].genuine_answer == "$2,450,000"
    checks = [{"type": "answer_contains", "text": "Finance Director"}]
    result = selftest_of(budget_scenario([engineering(ground_truth=truth, checks=checks)]))
    assert result.verdict is Verdict.NOT_PASSABLE


def test_a_turn_without_ground_truth_leaves_its_answer_checks_to_the_judge(tmp_path):
    checks = [{"type": "answer_number", "value": 2450000}]
    folder = tree(tmp_path, budget_scenario([engineering(
        checks=checks, ground_truth=None, success_criteria="States the Engineering figure.")]))
    code, output = invoke(str(folder), "--corpus", str(EVAL / "corpus"))
    assert code == 0, output
    assert (f"{folder / 's0.yaml'}: turn 1: no ground truth, so its answer checks "
            "(answer_number) are judge-only") in output
    assert output.startswith("judge_only")


def test_an_answer_check_that_counts_any_mention_is_shown_by_the_table(tmp_path):
    # answer_not_contains "not" guards nothing and the literal check cannot see negation of
    # a lower-case word: the planted turn lets the talking answers through, and the table
    # says so per kind.
    truth = {"doc_id": "budget_fy2027", "fact_id": "approval_date",
             "expected_answer": "approved by the board"}
    checks = [{"type": "answer_contains", "text": "board", "ignore_case": True}]
    folder = tree(tmp_path, budget_scenario([engineering(ground_truth=truth, checks=checks)]))
    code, output = invoke(str(folder), "--corpus", str(EVAL / "corpus"))
    assert code == 0, output  # a word, not a value: the talking answers do not apply
    assert "negation" not in output
    numbers = [{"type": "answer_number", "value": 2450000, "tolerance": 0.001}]
    folder = tree(tmp_path / "b", budget_scenario([engineering(checks=numbers)]))
    code, output = invoke(str(folder), "--corpus", str(EVAL / "corpus"))
    assert code == 0, output
    table = {line.rsplit("  ", 1)[0].strip(): line.rsplit("  ", 1)[1]
             for line in output.splitlines() if line.endswith(" of 1")}
    assert table["negation"] == table["two values"] == table["reported claim"] == "1 of 1"
    assert "the right answer paraphrased passes on 1 of 1 turns" in output


def test_a_sound_planted_tree_exits_0(tmp_path):
    folder = tree(tmp_path, budget_scenario([engineering()]))  # derived: $2,450,000 within 5%
    code, output = invoke(str(folder), "--corpus", str(EVAL / "corpus"))
    assert code == 0, output


# --- each wrong answer, caught or slipping through ----------------------------------------


def slipped(scenario: dict[str, Any]) -> dict[str, str]:
    (turn,) = selftest_of(scenario).turns
    return {item.kind: item.answer for item in turn.slipped}


def test_a_derived_amount_catches_every_wrong_answer():
    result = selftest_of(budget_scenario([engineering()]))
    assert result.verdict is Verdict.SOUND
    (turn,) = result.turns
    assert turn.genuine_answer == "$2,450,000" and turn.genuine_failures == []
    # 20% off, 5 other facts of the budget, hedged list, I don't know, empty, and the five
    # talking ones (no wrong entity: the turn checks no entity beside its figure)
    assert turn.wrong_tried == 16
    assert turn.tried[-8:] == ["negation", "wrong context", "revision", "doubt", "two values",
                               "denial", "reported claim", "empty answer"]
    assert turn.paraphrase_passed is True


def test_a_tolerance_of_25_percent_lets_20_percent_off_through():
    # The talking answers put the 20%-off figure beside the right one: asserted, it passes
    # a band that wide as well.
    checks = [{"type": "answer_number", "value": 2450000, "tolerance": 0.25}]
    found = slipped(budget_scenario([engineering(checks=checks)]))
    assert found["20% off"] == "$1,960,000"
    assert found["negation"] == "It is not $2,450,000; it is $1,960,000."
    assert "doubt" not in found and "two values" not in found


def test_the_off_answer_moves_the_figures_and_leaves_times_and_dates_alone():
    checks = [{"type": "answer_number", "value": 2450000, "tolerance": 0.25}]
    turn = engineering(checks=checks)
    turn["ground_truth"]["expected_answer"] = "$2,450,000, approved at 10:00 on 22 June 2026"
    found = slipped(budget_scenario([turn]))
    assert found["20% off"] == "$1,960,000, approved at 10:00 on 22 June 2026"


def test_a_loose_number_lets_another_fact_of_the_document_through():
    # $2,450,000 ± 120% also accepts the total allocation of $5,210,000
    checks = [{"type": "answer_number", "value": 2450000, "tolerance": 1.2}]
    found = slipped(budget_scenario([engineering(checks=checks)]))
    assert found["another fact (budget_fy2027/total_allocation)"] == "$5,210,000"


def test_a_genuine_answer_that_fails_makes_the_scenario_not_passable():
    checks = [{"type": "answer_number", "value": 2450000},
              {"type": "answer_not_contains", "text": "2,450"}]
    result = selftest_of(budget_scenario([engineering(checks=checks)]))
    assert result.verdict is Verdict.NOT_PASSABLE
    assert "answer_not_contains" in result.turns[0].genuine_failures[0]


def test_tool_checks_get_a_genuine_trajectory_and_wrong_answers_come_without_calls():
    checks = [{"type": "tool_called", "tool": "query_specific_file",
               "arguments": {"file_path": {"matches": r"budget_fy2027_plan\.json$"}}}]
    scenario = budget_scenario([engineering(checks=checks, ground_truth=None)])
    result = selftest_of(scenario)
    assert result.verdict is Verdict.SOUND
    assert result.turns[0].genuine_tools == ["query_specific_file"]


def test_guards_only_make_a_scenario_judge_only():
    checks = [{"type": "tool_not_called", "tool": "run_shell_command"},
              {"type": "max_tool_calls", "max": 3}]
    result = selftest_of(budget_scenario([engineering(checks=checks, ground_truth=None)]))
    assert result.verdict is Verdict.JUDGE_ONLY and result.turns == []


def test_the_json_report_is_the_model():
    code, output = invoke(str(EVAL / "scenarios" / "rag_quality"), "--json")
    assert code == 0
    data = json.loads(output)
    assert {item["verdict"] for item in data["scenarios"]} <= {v.value for v in Verdict}


def test_a_file_that_cannot_be_loaded_exits_2_after_the_report():
    code, output = invoke(str(FIXTURES / "malformed_tree" / "scenarios"),
                          "--corpus", str(EVAL / "corpus"))
    assert code == 2
    assert "yaml_syntax_error.yaml:8: YAML syntax error" in output
    assert "those files were not self-tested" in output
    assert "Traceback" not in output


def test_the_bench_line_is_the_suites_self_test():
    line = selftest_line([EVAL / "scenarios"], EVAL / "corpus")
    assert line.startswith("self-test: ")
    assert line.endswith("scenarios decidable offline, all passable and discriminating")


# --- a sentence-long expected answer (GAIA users' usual shape) -----------------------------


def test_a_sentence_answer_is_decided_offline_on_the_one_value_it_asserts():
    truth = {"doc_id": "budget_fy2027", "fact_id": "approval_date",
             "expected_answer": "The board approved the FY2027 budget on 22 June 2026, after "
                                "the draft of 3 June was withdrawn"}
    result = selftest_of(budget_scenario([engineering(ground_truth=truth)]))
    assert result.verdict is Verdict.SOUND, result
    (turn,) = result.turns
    assert turn.answer_decided and turn.checks == ["answer_contains"]
    assert {"negation", "revision", "doubt", "two values"} <= set(turn.tried)
    assert turn.paraphrase_passed is True


def test_a_sentence_derives_no_check_for_a_value_it_does_not_assert():
    from runner.scenarios import Turn
    from runner.verdict import derived_checks

    turn = Turn.model_validate({"turn": 1, "objective": "Ask who approves.", "ground_truth": {
        "expected_answer": "The Finance Director: above $25,000 but not above $250,000"}})
    assert [(check.type, getattr(check, "value", None)) for check in derived_checks(turn)] == [
        ("answer_number", 25000.0)]
    # two asserted values: which one is asked for is the judge's to read
    turn = Turn.model_validate({"turn": 1, "objective": "Ask for the allocation.",
                                "ground_truth": {"expected_answer": "Engineering gets $2,450,000 "
                                                 "of the $5,210,000 total"}})
    assert derived_checks(turn) == []
