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


def test_the_oracle_answers_a_corpus_fact_only_through_its_retrieval(tmp_path):
    (oracle,) = plans(tmp_path, "query_named_file")[ORACLE]
    assert oracle["needles"] == ["0.58"]  # the policy writes the rate so


STAGED_REPO = Path(__file__).resolve().parents[1] / "fixtures" / "gaia_staged_repo"


def staged_plan(tmp_path: Path, fixtures_root: Path | None) -> list[dict]:
    suite = load_suite([STAGED_REPO / "eval" / "scenarios"], STAGED_REPO / "eval" / "corpus")
    chosen = [s for s in suite.scenarios if s.id == "shelf_read_ledger"]
    dest = write_agents(chosen, suite.manifest, tmp_path / "agents", fixtures_root)
    return json.loads((dest / ORACLE / "plan.json").read_text())["turns"]


def test_a_turn_that_names_a_staged_file_is_answered_by_reading_it(tmp_path):
    fixtures = STAGED_REPO / "tests" / "fixtures" / "gaia"
    staged = "~/gaia-eval/shelf_files/ledger/pantry count.txt"  # a space in its name
    first, second = staged_plan(tmp_path, fixtures)
    assert first["calls"] == [
        {"name": "index_document", "arguments": {"file_path": staged}},
        {"name": "query_specific_file", "arguments": {"file_path": staged,
                                                      "query": first["user_message"]}}]
    assert first["answer"] == "17" and first["needles"] == ["17"]
    # The second turn names no file ("and the other one?"): nothing to read, nothing to prove.
    assert second["calls"] == [] and second["needles"] == []
    # Without the fixture tree there is no staged file to read, and no fact to gate.
    (bare, _) = staged_plan(tmp_path / "bare", None)
    assert bare["calls"] == [] and bare["needles"] == []


def oracle_helpers() -> dict:
    """The oracle's own checks of what its tools returned, from eval/agents/oracle/agent.py as
    the sandbox runs it. They need nothing of GAIA, so the part after the agent class runs here
    alone (the class itself imports GAIA, which only the sandbox has)."""
    source = (EVAL / "agents" / "oracle" / "agent.py").read_text()
    helpers = source[source.index("#: How the oracle's answer says"):]
    namespace: dict = {"re": __import__("re")}
    exec(compile(helpers, "agent.py", "exec"), namespace)  # noqa: S102 — our own file
    return namespace


def test_the_oracle_looks_for_each_needle_in_what_its_tools_returned():
    missing = oracle_helpers()["_missing"]
    chunks = ["Mileage for a personal car is reimbursed at $0.58 per mile.",
              "You must act within  Thirty days\u2019 notice."]
    # Null: the needles as the chunks write them, case and white space aside.
    assert missing(["$0.58 per mile", "thirty days' notice"], chunks) == []
    # Planted: a needle the chunks do not hold is missing.
    assert missing(["$0.62 per mile", "thirty"], chunks) == ["$0.62 per mile"]


def test_a_tools_echo_of_its_own_arguments_is_not_retrieved_text():
    returned = oracle_helpers()["_returned"]
    # GAIA's search answers "Found 1 matches for '17'": the pattern is not the document's.
    result = {"status": "success", "message": "Pattern '17' not found in indexed documents",
              "matches": [], "pattern": "17"}
    assert not any("17" in text for text in returned(result, {"pattern": "17"}))
    # ... while a chunk that holds it is the document's text.
    found = {"matches": [{"chunk_preview": "Pantry count: 17 jars"}], "message": "Found 1 for '17'"}
    assert returned(found, {"pattern": "17"}) == ["Pantry count: 17 jars"]


def test_the_oracle_reads_a_failed_tool_as_a_failure():
    error_of = oracle_helpers()["_error_of"]
    assert error_of({"status": "error", "error": "File not found: budget.json"}) == \
        "File not found: budget.json"
    assert error_of({"success": False, "message": "no such document"}) == "no such document"
    assert error_of({"status": "success", "chunks": ["..."]}) is None


def test_the_oracle_and_the_self_test_use_the_same_words():
    from runner.selftest._live import NOT_ANSWERABLE, SEARCH_TOOL, TOOL_FAILED
    from runner.selftest._needles import normal

    helpers = oracle_helpers()
    assert (helpers["NOT_ANSWERABLE"], helpers["TOOL_FAILED"], helpers["SEARCH_TOOL"]) == (
        NOT_ANSWERABLE, TOOL_FAILED, SEARCH_TOOL)
    # ... and the same normalisation when the needles are found and when they are looked for.
    for text in ("Thirty  Days\u2019", "$2,450,000\n per  year"):
        assert helpers["_normal"](text) == normal(text)


def answered(sid: str, answer: str, passed: bool) -> ScenarioResult:
    checks = [CheckResult(type="answer_contains", turn=1, passed=passed,
                          diagnostic="" if passed else "expected '$2,540,000'")]
    return ScenarioResult(id=sid, status="FAIL", turns=[TurnResult(turn=1, answer=answer,
                                                                   checks=checks)])


def test_a_fact_the_retrieval_cannot_bring_back_is_not_answerable_from_the_corpus():
    from runner.selftest._live import NOT_ANSWERABLE, TOOL_FAILED

    unfound = answered("planted", f"{NOT_ANSWERABLE} the text its tools returned does not hold "
                                  "the answer", passed=False)
    broken = answered("broken", f"{TOOL_FAILED} query_documents: no documents indexed", False)
    fine = answered("fine", "$2,450,000", passed=True)
    found = live_results(card(unfound, broken, fine),
                         card(answered("planted", "x", False), answered("broken", "x", False),
                              answered("fine", "x", False)))
    assert [f.not_answerable for f in found] == [
        ["turn 1: the text its tools returned does not hold the answer"],
        [], []]
    assert [f.tool_failures for f in found] == [
        [], ["turn 1: query_documents: no documents indexed"], []]
    lines = live_lines(found)
    assert lines[0] == "not_answerable_from_corpus  planted"
    assert lines[1] == ("  not answerable from the corpus: turn 1: the text its tools returned "
                        "does not hold the answer")
    assert "oracle_tool_failed          broken" in lines
    assert lines[-1].endswith("; 1 not answerable from the corpus")
    assert not live_sound(found) and not live_sound(found[1:]) and live_sound(found[2:])


def test_every_kind_has_an_adversary_that_says_only_that_kind(tmp_path):
    from runner.selftest._live import kind_agent_id, kinds_tried

    suite = load_suite([EVAL / "scenarios"], EVAL / "corpus")
    chosen = [s for s in suite.scenarios if s.id in ("query_named_file", "budget_line_from_json")]
    tried = kinds_tried(chosen, suite.manifest)
    assert {"negation", "revision", "doubt", "two values", "wrong context"} <= set(tried)
    assert tried["negation"]["query_named_file"] == [1]
    dest = write_agents(chosen, suite.manifest, tmp_path / "agents", every_kind=True)
    oracle = json.loads((dest / ORACLE / "plan.json").read_text())["turns"]
    for kind in tried:
        folder = dest / kind_agent_id(kind)
        assert f'AGENT_ID = "{kind_agent_id(kind)}"' in (folder / "agent.py").read_text()
        turns = json.loads((folder / "plan.json").read_text())["turns"]
        for planned, genuine in zip(turns, oracle, strict=True):
            if planned["turn"] in tried[kind].get(planned["scenario"], []):
                # The kind's answer on every turn that has one ...
                assert planned["kind"].split(" (")[0] == kind and planned["answer"] != genuine["answer"]
            else:
                # ... and the oracle's elsewhere, so a failed check there is this kind caught.
                assert planned == genuine
    assert kind_agent_id("I don't know") == "adversary_i_don_t_know"


def test_a_kind_is_caught_only_where_each_turn_that_said_it_fails_a_check():
    def two_turns(sid: str, first: bool, second: bool, undecided: bool = False) -> ScenarioResult:
        def check(turn: int, passed: bool) -> CheckResult:
            why = "undecided: 'maybe' before the figure" if undecided and not passed else "x"
            return CheckResult(type="answer_number", turn=turn, passed=passed, diagnostic=why)
        return ScenarioResult(id=sid, status="FAIL", turns=[
            TurnResult(turn=1, checks=[check(1, first)]),
            TurnResult(turn=2, checks=[check(2, second)])])

    oracle = [two_turns("a", True, True), two_turns("b", True, True)]
    adversary = [two_turns("a", False, False), two_turns("b", False, True)]
    tried = {"negation": {"a": [1, 2], "b": [2]}, "doubt": {"a": [1]}}
    by_kind = {"negation": [two_turns("a", False, True), two_turns("b", True, False)],
               "doubt": [two_turns("a", False, True, undecided=True)]}
    found = live_results(oracle, adversary, (), by_kind, tried)
    # a: negation said on turns 1 and 2, only turn 1 failed -> let through; an undecided
    # check catches nothing (the judge would decide it). b: its one negation turn failed.
    assert [f.kinds_caught for f in found] == [{"negation": False, "doubt": False},
                                               {"negation": True}]
    lines = live_lines(found)
    assert "not_discriminating          a" in lines
    assert "  the adversary's 'negation' answer passed every check of its turn" in lines
    assert "passable_and_discriminating b" in lines
    assert lines[-3:] == ["live wrong answer  caught in scenarios",
                          "negation           1 of 2  (1 let it through)",
                          "doubt              0 of 1  (1 let it through)"]
    assert not live_sound(found) and live_sound(found[1:])


PLANTED = """\
id: oslo_lunch
category: tool_selection
persona: casual_user
setup:
  index_documents:
    - {corpus_doc: travel_expense_policy, path: documents/travel_expense_policy.txt}
turns:
  - turn: 1
    objective: Ask for a figure the policy does not give.
    user_message: In travel_expense_policy.txt, what is the lunch allowance in Oslo?
    ground_truth: {doc_id: travel_expense_policy, expected_answer: "$71 per day"}
    checks:
      - {type: answer_number, value: 71, tolerance: 0}
"""


def test_a_fact_its_named_document_does_not_write_is_looked_for_and_cannot_be_found(tmp_path):
    from runner.selftest._live import unproven_lines

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "oslo_lunch.yaml").write_text(PLANTED, encoding="utf-8")
    suite = load_suite([tree, EVAL / "scenarios"], EVAL / "corpus")
    chosen = [s for s in suite.scenarios if s.id in ("oslo_lunch", "sales_total_from_csv")]
    dest = write_agents(chosen, suite.manifest, tmp_path / "agents")
    plan = {(t["scenario"], t["turn"]): t
            for t in json.loads((dest / ORACLE / "plan.json").read_text())["turns"]}
    # Its own figure is the needle: no retrieval of the policy can bring it back.
    assert plan[("oslo_lunch", 1)]["needles"] == ["71"]
    # A total the corpus gate recomputes is worked out, not written: left unproven, said so.
    total = plan[("sales_total_from_csv", 1)]
    assert total["needles"] == [] and total["unproven"].startswith("worked out")
    assert unproven_lines(dest) == [
        "live: 2 turn(s) answered without proof through retrieval (worked out from its "
        "documents, not written in them: 2)"]
