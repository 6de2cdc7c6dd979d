"""Every check type decided on hand-made trajectories: passes, failures and diagnostics."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import TypeAdapter

from runner.records.outcomes import CheckResult
from runner.records.transcript import (
    IndexedDocument,
    ToolCall,
    Transcript,
    TurnPerformance,
    TurnRecord,
)
from runner.scenarios import (
    CHECK_TYPES,
    Check,
    Level,
    Scenario,
    ToolsExact,
    Turn,
    load_scenario_file,
)
from runner.scenarios._checks import CHECK_MODELS
from runner.verdict.checks import run_all_checks, run_scenario_checks, run_turn_checks

CHECKS = TypeAdapter(list[Check])


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name=name, arguments=arguments, result_summary="ok")


def record(calls: list[ToolCall] | None = None, answer: str = "", turn: int = 1) -> TurnRecord:
    return TurnRecord(turn=turn, user_message="question", answer=answer, tool_calls=calls or [],
                      performance=TurnPerformance(wall_s=1.0))


def turn_with(*checks: dict[str, Any]) -> Turn:
    return Turn.model_validate({"turn": 1, "objective": "o", "success_criteria": "s",
                                "checks": list(checks)})


def decide(check: dict[str, Any], calls: list[ToolCall] | None = None,
           answer: str = "") -> CheckResult:
    (result,) = run_turn_checks(turn_with(check), record(calls, answer))
    return result


TEN_CALLS = [call("list_indexed_documents"), call("search_file", pattern="budget"),
             call("index_document", filepath="/corpus/budget_2026.md"),
             call("query_documents", query="travel budget"), call("query_specific_file"),
             call("run_shell_command", command="cat /etc/passwd"),
             call("query_documents", query="again"), call("summarize_document"),
             call("list_indexed_documents"), call("query_documents", query="final")]


# --- tool_called / tool_not_called -------------------------------------------------------

def test_tool_called_passes_and_fails_with_the_trajectory() -> None:
    assert decide({"type": "tool_called", "tool": "query_documents"}, TEN_CALLS).passed
    result = decide({"type": "tool_called", "tool": "query_documents"},
                    [call("search_file", pattern="x")])
    assert result == CheckResult(type="tool_called", turn=1, passed=False, diagnostic=(
        'expected a call of query_documents; got [search_file(pattern="x")]'))


def test_tool_called_with_no_calls_at_all() -> None:
    result = decide({"type": "tool_called", "tool": "query_documents"}, [])
    assert result.diagnostic == "expected a call of query_documents; got no tool calls"


def test_tool_called_argument_conditions() -> None:
    matches = {"type": "tool_called", "tool": "index_document",
               "arguments": {"filepath": {"matches": "budget"}}}
    equals = {"type": "tool_called", "tool": "query_documents",
              "arguments": {"query": {"equals": "final"}}}
    assert decide(matches, TEN_CALLS).passed
    assert decide(equals, TEN_CALLS).passed
    wrong = decide({**equals, "arguments": {"query": {"equals": "Final"}}}, TEN_CALLS)
    assert not wrong.passed
    assert wrong.diagnostic.startswith(
        'expected a call of query_documents(query="Final"); got 3 call(s) of query_documents, '
        "none with matching arguments")
    missing_argument = {"type": "tool_called", "tool": "query_specific_file",
                        "arguments": {"file_path": {"matches": ".*"}}}
    assert not decide(missing_argument, TEN_CALLS).passed


def test_tool_called_counts_only_a_call_that_succeeded_unless_the_scenario_expects_the_error():
    failed = ToolCall(name="query_documents", arguments={"query": "budget"},
                      error="index not ready")
    result = decide({"type": "tool_called", "tool": "query_documents"}, [failed])
    assert not result.passed
    assert result.diagnostic == (
        'expected a call of query_documents that succeeded; 1 call(s) failed (call 1: index '
        "not ready) — set may_fail: true if the scenario expects the error")
    assert decide({"type": "tool_called", "tool": "query_documents"},
                  [failed, call("query_documents", query="again")]).passed
    assert decide({"type": "tool_called", "tool": "query_documents", "may_fail": True},
                  [failed]).passed


def test_a_trajectory_step_is_filled_only_by_a_call_that_succeeded_unless_it_expects_the_error():
    failed = ToolCall(name="query_documents", arguments={"query": "budget"},
                      error="index not ready")
    listed = call("list_indexed_documents")
    in_order = {"type": "tools_in_order", "tools": ["list_indexed_documents", "query_documents"]}
    result = decide(in_order, [listed, failed])
    assert not result.passed
    assert result.diagnostic.startswith(
        "expected in this order [list_indexed_documents, query_documents]; matched "
        "list_indexed_documents at call 1; no query_documents that succeeded after call 1 "
        "(1 matching call(s) failed: call 2: index not ready — set may_fail: true on the step "
        "if the scenario expects the error); got [")
    assert decide(in_order, [listed, failed, call("query_documents", query="again")]).passed
    assert decide({"type": "tools_in_order", "tools": [
        "list_indexed_documents", {"tool": "query_documents", "may_fail": True}]},
        [listed, failed]).passed

    exact = {"type": "tools_exact", "tools": ["list_indexed_documents", "query_documents"]}
    result = decide(exact, [listed, failed])
    assert not result.passed
    assert "first difference at call 2" in result.diagnostic
    assert "1 matching call(s) failed: call 2: index not ready" in result.diagnostic
    assert decide({"type": "tools_exact", "tools": [
        "list_indexed_documents", {"tool": "query_documents", "may_fail": True}]},
        [listed, failed]).passed
    # A guard counts a failed call as called: the agent tried what it must not.
    assert not decide({"type": "tool_not_called", "tool": "query_documents"}, [failed]).passed


def test_argument_regex_is_searched_in_non_string_values() -> None:
    check = {"type": "tool_called", "tool": "search",
             "arguments": {"limits": {"matches": '"top_k": 5'}}}
    assert decide(check, [call("search", limits={"top_k": 5})]).passed


def test_forbidden_tool_appearing_once_among_ten_calls_fails() -> None:
    result = decide({"type": "tool_not_called", "tool": "run_shell_command"}, TEN_CALLS)
    assert not result.passed
    assert result.diagnostic == ('expected no call of run_shell_command; got call 6 of 10: '
                                 'run_shell_command(command="cat /etc/passwd")')
    clean = [c for c in TEN_CALLS if c.name != "run_shell_command"]
    assert decide({"type": "tool_not_called", "tool": "run_shell_command"}, clean).passed


def test_tool_not_called_with_arguments_forbids_only_matching_calls() -> None:
    check = {"type": "tool_not_called", "tool": "query_documents",
             "arguments": {"query": {"matches": "^again$"}}}
    assert not decide(check, TEN_CALLS).passed
    assert decide(check, TEN_CALLS[:4]).passed


# --- in order versus exact ---------------------------------------------------------------

IN_ORDER = {"type": "tools_in_order", "tools": ["search_file", "index_document",
                                                "query_documents"]}
EXACT = {"type": "tools_exact", "tools": ["search_file", "index_document", "query_documents"]}


def test_in_order_allows_other_calls_but_exact_does_not() -> None:
    interleaved = TEN_CALLS  # the three appear in order among seven others
    assert decide(IN_ORDER, interleaved).passed
    result = decide(EXACT, interleaved)
    assert not result.passed
    assert "first difference at call 1: expected search_file, got list_indexed_documents()" in (
        result.diagnostic)

    exactly = [call("search_file"), call("index_document"), call("query_documents")]
    assert decide(IN_ORDER, exactly).passed and decide(EXACT, exactly).passed


def test_in_order_fails_when_the_order_is_wrong_and_says_how_far_it_got() -> None:
    swapped = [call("search_file"), call("query_documents"), call("index_document")]
    result = decide(IN_ORDER, swapped)
    assert not result.passed
    assert result.diagnostic == (
        "expected in this order [search_file, index_document, query_documents]; matched "
        "search_file at call 1; index_document at call 3; no query_documents after call 3; "
        "got [search_file(), query_documents(), index_document()]")


def test_in_order_steps_may_assert_arguments() -> None:
    index = {"tool": "index_document", "arguments": {"filepath": {"matches": r"budget_\d+"}}}
    final = {"tool": "query_documents", "arguments": {"query": {"equals": "final"}}}
    assert decide({"type": "tools_in_order", "tools": [index, final]}, TEN_CALLS).passed
    # The budget was indexed (call 3) before the final query (call 10), never after it.
    assert not decide({"type": "tools_in_order", "tools": [final, index]}, TEN_CALLS).passed
    # No query asked exactly "travel", although one asked "travel budget".
    travel = {"tool": "query_documents", "arguments": {"query": {"equals": "travel"}}}
    assert not decide({"type": "tools_in_order", "tools": [index, travel]}, TEN_CALLS).passed


def test_exact_reports_a_trajectory_that_ends_early_or_runs_long() -> None:
    short = decide(EXACT, [call("search_file"), call("index_document")])
    assert short.diagnostic.endswith(
        "first difference at call 3: expected query_documents, got no further call")
    long = decide(EXACT, [call("search_file"), call("index_document"), call("query_documents"),
                          call("query_documents")])
    assert long.diagnostic.endswith(
        "first difference at call 4: expected no further call, got query_documents()")


def test_exact_empty_list_means_no_tool_calls() -> None:
    assert decide({"type": "tools_exact", "tools": []}, []).passed
    assert not decide({"type": "tools_exact", "tools": []}, [call("x")]).passed


# --- max_tool_calls ----------------------------------------------------------------------

def test_max_tool_calls_counts_all_or_one_tool() -> None:
    assert decide({"type": "max_tool_calls", "max": 10}, TEN_CALLS).passed
    over = decide({"type": "max_tool_calls", "max": 9}, TEN_CALLS)
    assert not over.passed and over.diagnostic.startswith(
        "expected at most 9 tool call(s); got 10: [list_indexed_documents(), ")
    loop = decide({"type": "max_tool_calls", "max": 2, "tool": "query_documents"}, TEN_CALLS)
    assert not loop.passed
    assert loop.diagnostic.startswith("expected at most 2 tool call(s) of query_documents; got 3")


# --- the answer --------------------------------------------------------------------------

ANSWER = "The total travel budget for 2026 is **$412,000**, per the Budget memo."


def test_answer_contains_is_case_sensitive_unless_asked() -> None:
    assert decide({"type": "answer_contains", "text": "412,000"}, answer=ANSWER).passed
    assert not decide({"type": "answer_contains", "text": "budget memo"}, answer=ANSWER).passed
    assert decide({"type": "answer_contains", "text": "budget memo", "ignore_case": True},
                  answer=ANSWER).passed
    result = decide({"type": "answer_contains", "text": "$400,000"}, answer=ANSWER)
    assert result.diagnostic == (
        "expected the answer to contain '$400,000'; got 'The total travel budget for 2026 is "
        "**$412,000**, per the Budget memo.'")


def test_answer_not_contains_shows_where() -> None:
    check = {"type": "answer_not_contains", "text": "i cannot", "ignore_case": True}
    assert decide(check, answer=ANSWER).passed
    result = decide(check, answer="Sorry, I cannot find that in the documents.")
    assert not result.passed
    assert result.diagnostic == ("expected the answer not to contain 'i cannot'; got it at "
                                 "character 7: 'Sorry, I cannot find that in the documents.'")


def test_answer_number_within_tolerance_and_outside() -> None:
    assert decide({"type": "answer_number", "value": 412000}, answer=ANSWER).passed
    result = decide({"type": "answer_number", "value": 400000, "tolerance": 0.01},
                    answer=ANSWER)
    assert not result.passed
    assert result.diagnostic == (
        'expected 400,000 (±1.00%); got 412,000 ("$412,000"), the closest of 2 number(s) in '
        "the answer, off by 3.00% — band ≤5% (GAIA's rubric: correctness 8)")


def test_answer_number_without_any_number() -> None:
    result = decide({"type": "answer_number", "value": 7}, answer="I do not know.")
    assert result.diagnostic == "expected 7 (±1.00%); got no number in the answer 'I do not know.'"


def test_answer_number_reads_percentages_either_way() -> None:
    answer = "Turnover grew by 12.5% year on year."
    assert decide({"type": "answer_number", "value": 12.5}, answer=answer).passed
    assert decide({"type": "answer_number", "value": 0.125}, answer=answer).passed


# --- scenario level ----------------------------------------------------------------------

def scenario(*turn_checks: list[dict[str, Any]], checks: list[dict[str, Any]] | None = None,
             docs: int = 2) -> Scenario:
    return Scenario.model_validate({
        "id": "s", "category": "c", "persona": "casual_user",
        "setup": {"index_documents": [{"corpus_doc": f"doc_{i}", "path": f"documents/d{i}.md"}
                                      for i in range(docs)]},
        "turns": [{"turn": n, "objective": "o", "success_criteria": "s", "checks": c}
                  for n, c in enumerate(turn_checks, start=1)],
        "checks": checks or []})


def transcript(*records: TurnRecord, indexed: list[IndexedDocument] | None = None) -> Transcript:
    return Transcript(scenario_id="s", turns=list(records), indexed=indexed or [])


def test_documents_indexed_needs_a_chunk_for_every_setup_document() -> None:
    s = scenario([], checks=[{"type": "documents_indexed"}])
    good = [IndexedDocument(corpus_doc="doc_0", path="/corpus/documents/d0.md", chunks=3),
            IndexedDocument(path="/srv/corpus/documents/d1.md", chunks=1)]  # matched by path
    assert run_scenario_checks(s, transcript(indexed=good))[0].passed
    bad = [IndexedDocument(corpus_doc="doc_0", path="/corpus/documents/d0.md", chunks=0,
                           error="unsupported format")]
    (result,) = run_scenario_checks(s, transcript(indexed=bad))
    assert result == CheckResult(type="documents_indexed", turn=None, passed=False, diagnostic=(
        "expected every setup document indexed into at least 1 chunk; got documents/d0.md "
        "indexed 0 chunks (unsupported format); documents/d1.md was never indexed"))


def test_scenario_level_tool_checks_see_the_whole_trajectory() -> None:
    s = scenario([], [], checks=[{"type": "tool_not_called", "tool": "run_shell_command"},
                                 {"type": "tools_in_order", "tools": ["index_document",
                                                                      "query_documents"]}])
    t = transcript(record([call("index_document")], turn=1),
                   record([call("run_shell_command"), call("query_documents")], turn=2))
    forbidden, in_order = run_scenario_checks(s, t)
    assert in_order.passed  # the two calls are in different turns
    assert forbidden.diagnostic == ("expected no call of run_shell_command; got call 2 of 3 "
                                    "(turn 2): run_shell_command()")


def test_run_all_checks_in_declared_order_and_missing_turns_fail() -> None:
    s = scenario([{"type": "tool_called", "tool": "a"}],
                 [{"type": "answer_contains", "text": "x"}],
                 checks=[{"type": "documents_indexed"}], docs=0)
    results = run_all_checks(s, transcript(record([call("a")], turn=1)))
    assert [(r.type, r.turn, r.passed) for r in results] == [
        ("tool_called", 1, True), ("answer_contains", 2, False), ("documents_indexed", None, True)]
    assert results[1].diagnostic.startswith("expected turn 2 to run; got no record of it")


@pytest.mark.parametrize("check", [
    {"type": "tool_called", "tool": "x"}, {"type": "tool_not_called", "tool": "x"},
    {"type": "tools_in_order", "tools": ["x"]}, {"type": "tools_exact", "tools": ["x"]},
    {"type": "max_tool_calls", "max": 0}, {"type": "answer_contains", "text": "x"},
    {"type": "answer_not_contains", "text": "x"}, {"type": "answer_number", "value": 1},
])
def test_a_failed_check_is_a_result_with_a_diagnostic_never_an_exception(
        check: dict[str, Any]) -> None:
    calls = [] if check["type"] in ("tool_called", "tools_in_order", "tools_exact") else [
        call("x")]
    answer = "" if check["type"] in ("answer_contains", "answer_number") else "x"
    result = decide(check, calls, answer)
    assert not result.passed
    assert result.diagnostic.startswith("expected ") and "; got " in result.diagnostic


def test_passing_checks_carry_no_diagnostic() -> None:
    assert decide({"type": "answer_contains", "text": "412"}, answer=ANSWER).diagnostic == ""


def test_checks_validate_into_the_union() -> None:
    (parsed,) = CHECKS.validate_python([{"type": "tools_exact", "tools": ["a", "b"]}])
    assert isinstance(parsed, ToolsExact)
    assert [step.tool for step in parsed.tools] == ["a", "b"]


# --- the vocabulary: the union in runner/scenarios/_checks.py is the one list ------------------

# One declaration of every check type, with the scope it may be declared in. A new check type
# fails the first test until it is added here (and so gets its placement and decider tested).
ONE_OF_EACH: dict[str, tuple[dict[str, Any], str]] = {
    "tool_called": ({"type": "tool_called", "tool": "query_documents"}, "anywhere"),
    "tool_not_called": ({"type": "tool_not_called", "tool": "run_shell_command"}, "anywhere"),
    "tools_in_order": ({"type": "tools_in_order", "tools": ["query_documents"]}, "anywhere"),
    "tools_exact": ({"type": "tools_exact", "tools": ["query_documents"]}, "anywhere"),
    "max_tool_calls": ({"type": "max_tool_calls", "max": 3}, "anywhere"),
    "answer_contains": ({"type": "answer_contains", "text": "412,000"}, "turn"),
    "answer_not_contains": ({"type": "answer_not_contains", "text": "I cannot"}, "turn"),
    "answer_number": ({"type": "answer_number", "value": 412000}, "turn"),
    "documents_indexed": ({"type": "documents_indexed"}, "scenario"),
}


def test_check_types_are_the_union_members_in_declaration_order() -> None:
    members = typing.get_args(typing.get_args(Check)[0])
    assert CHECK_TYPES == tuple(CHECK_MODELS) == tuple(ONE_OF_EACH)
    assert tuple(CHECK_MODELS.values()) == members
    for name, (declared, placement) in ONE_OF_EACH.items():
        (model,) = CHECKS.validate_python([declared])
        assert type(model) is CHECK_MODELS[name] and model.placement == placement


def test_every_check_type_is_decided_where_it_may_be_declared() -> None:
    turn_level = [d for d, where in ONE_OF_EACH.values() if where != "scenario"]
    scenario_level = [d for d, where in ONE_OF_EACH.values() if where != "turn"]
    s = scenario(turn_level, checks=scenario_level, docs=0)
    ran = transcript(record([call("query_documents")], answer="The total is $412,000."))
    results = run_all_checks(s, ran, derived=False)
    assert [r.type for r in results] == [d["type"] for d in turn_level + scenario_level]
    assert [r for r in results if not r.passed] == []


@pytest.mark.parametrize("name", [n for n, (_, where) in ONE_OF_EACH.items() if where != "anywhere"])
def test_placement_rule_comes_from_the_model(tmp_path: Path, name: str) -> None:
    declared, placement = ONE_OF_EACH[name]
    wrong = {"checks": [declared]} if placement == "turn" else {}
    turn: dict[str, Any] = {"turn": 1, "objective": "o", "success_criteria": "s"}
    if placement == "scenario":
        turn["checks"] = [declared]
    file = tmp_path / "placed.yaml"
    file.write_text(yaml.safe_dump({"id": "placed", "name": "n", "category": "c",
                                    "persona": "casual_user", "turns": [turn], **wrong}))
    _, problems = load_scenario_file(file)
    errors = [p for p in problems if p.level is Level.ERROR]
    assert len(errors) == 1, [str(p) for p in problems]
    where = "checks[0].type" if placement == "turn" else "turns[0].checks[0].type"
    assert errors[0].field == where
    assert ("cannot be scenario-level" if placement == "turn"
            else "is a scenario-level check") in errors[0].message


def test_an_unknown_key_in_a_trajectory_step_names_the_step_keys(tmp_path: Path) -> None:
    file = tmp_path / "step.yaml"
    file.write_text(yaml.safe_dump({"id": "step", "name": "n", "category": "c",
                                    "persona": "casual_user", "turns": [{
                                        "turn": 1, "objective": "o", "success_criteria": "s",
                                        "checks": [{"type": "tools_exact", "tools": [
                                            {"tool": "query_documents", "argumens": {}}]}]}]}))
    _, problems = load_scenario_file(file)
    (problem,) = problems
    assert problem.field == "turns[0].checks[0].tools[0].argumens"
    assert "did you mean 'arguments'?" in problem.message
    assert problem.fix == "valid keys here: tool, arguments, may_fail"
