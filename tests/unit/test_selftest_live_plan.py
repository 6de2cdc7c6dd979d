"""The live layer's pure parts: the plans handed to the oracle and the adversary, and what two
scorecards say about each scenario."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from runner.records.outcomes import CheckResult
from runner.report import ScenarioResult
from runner.report._models import TurnResult
from runner.scenarios import load_suite
from runner.selftest._live import (
    ADVERSARY,
    ORACLE,
    live_lines,
    live_results,
    live_sound,
    write_agents,
)
from runner.system.paths import eval_root

EVAL = eval_root()


def plans(tmp_path: Path, *ids: str) -> dict[str, list[dict]]:
    suite = load_suite([EVAL / "scenarios"], EVAL / "corpus")
    chosen = [s for s in suite.scenarios if s.id in ids]
    dest = write_agents(chosen, suite.manifest, tmp_path / "agents")
    return {agent: json.loads((dest / agent / "plan.json").read_text())["turns"]
            for agent in (ORACLE, ADVERSARY)}


def test_the_oracle_calls_the_checked_tool_and_answers_from_ground_truth(tmp_path):
    (oracle,), (adversary,) = plans(tmp_path, "query_named_file").values()
    assert oracle["kind"] == "genuine" and "0.58" in oracle["answer"]
    assert [c["name"] for c in oracle["calls"]] == ["query_specific_file", "query_specific_file"]
    assert oracle["calls"][0]["arguments"] == {
        "file_path": "documents/travel_expense_policy.txt",
        "query": "In travel_expense_policy.txt specifically, what's the mileage rate for using "
                 "my own car?"}
    # the adversary makes the same calls (the turn checks its answer) and answers 20 % off
    assert adversary["kind"] == "20% off" and adversary["answer"] == "$0.464 per mile"
    assert adversary["calls"] == oracle["calls"]


def test_a_turn_with_documents_and_no_tool_check_still_searches_them(tmp_path):
    oracle = plans(tmp_path, "budget_line_from_json")[ORACLE]
    assert [[c["name"] for c in turn["calls"]] for turn in oracle] == [["query_documents"]] * 2


def test_the_agents_are_one_file_under_two_ids_readable_by_the_sandbox(tmp_path):
    plans(tmp_path, "query_named_file")
    for agent in (ORACLE, ADVERSARY):
        source = (tmp_path / "agents" / agent / "agent.py").read_text()
        assert f'AGENT_ID = "{agent}"' in source
        mode = (tmp_path / "agents" / agent).stat().st_mode
        assert mode & stat.S_IROTH and mode & stat.S_IXOTH


def card(*results: ScenarioResult) -> list[ScenarioResult]:
    return list(results)


def result(sid: str, *passed: bool) -> ScenarioResult:
    checks = [CheckResult(type="answer_number", turn=1, passed=p,
                          diagnostic="" if p else "expected 0.58") for p in passed]
    return ScenarioResult(id=sid, status="NOT_JUDGED" if all(passed) else "FAIL",
                          turns=[TurnResult(turn=1, checks=checks)])


def test_live_results_passable_discriminating_and_judge_only():
    found = live_results(
        card(result("a", True), result("b", True), result("c"), result("guarded", True)),
        card(result("a", False), result("b", True), result("c"), result("guarded", True)),
        judge_only={"guarded"})  # e.g. tool_not_called only: the adversary passes it too
    assert [(f.id, f.passable, f.discriminating, f.judge_only) for f in found] == [
        ("a", True, True, False), ("b", True, False, False), ("c", False, False, True),
        ("guarded", True, False, True)]
    assert not live_sound(found)
    assert live_lines(found)[-1] == ("live: 2 of 4 scenarios decidable; oracle passed 2, "
                                     "adversary caught 1")
    assert live_sound(found[:1] + found[2:])


def test_an_oracle_that_fails_a_check_is_named():
    (found,) = live_results(card(result("a", False)), card(result("a", False)))
    assert not found.passable
    assert live_lines([found])[:2] == ["not_passable                a",
                                       "  oracle failed turn 1: answer_number: expected 0.58"]
