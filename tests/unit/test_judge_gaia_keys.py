"""Everything GAIA gives its judge reaches ours: each typed GAIA key with a label, unknown keys
verbatim, and "no expected answer" kept apart from "expected answer: null".

The requests are checked where they leave us: the real Anthropic SDK over an httpx mock transport
(the network edge), reading the text of the case we send.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx  # the anthropic SDK 2.x transport package
import pytest
import yaml

from runner.conversation import situation
from runner.judge import AnthropicBackend, ModelJudge
from runner.judge._cases import expected_answer_state
from runner.records.transcript import ToolCall, Transcript, TurnPerformance, TurnRecord
from runner.scenarios import GroundTruth, Scenario, Turn

pytestmark = pytest.mark.anyio

GRADES = {"correctness": 8, "tool_selection": 8, "context_retention": 10, "completeness": 8,
          "efficiency": 9, "personality": 8, "error_recovery": 10, "overall_score": 8.5,
          "failure_category": "none", "reasoning": "Figure taken from the queried document."}
VERDICT = {"verdict": "PASS", "root_cause": None, "recommended_fix": None}

# A GAIA user's scenario in the shape of their tree: expected_behavior at both
# levels, fact_ids, expected_phrases, turn persona and note, captured_from, a ground truth without
# an expected_answer key, and keys nobody declared (`difficulty`, `reviewer`, `source_row`).
GAIA_SCENARIO = yaml.safe_load("""
id: riverton_parks_followup
name: Riverton parks budget follow-up
category: real_world
severity: high
description: A council analyst checks the parks line of the Riverton budget, then follows up.
persona: data_analyst
expected_behavior: Answers only from the indexed budget and says when a figure is missing.
captured_from: {session_id: 7f3c2a, captured_at: "2026-10-02T14:03:11Z"}
difficulty: hard
reviewer: mkowalski
setup:
  index_documents:
    - corpus_doc: riverton_budget_2026
      path: eval/corpus/documents/riverton_budget_2026.md
turns:
  - turn: 1
    objective: Ask 'What is the parks maintenance allocation for 2026?'
    ground_truth:
      doc_id: riverton_budget_2026
      fact_id: parks_maintenance
      expected_answer: "$1.84 million"
      note: Line 14 of the capital table.
      fact_ids: [parks_maintenance, parks_capital_total]
      expected_phrases: ["1.84", "capital"]
  - turn: 2
    objective: Ask whether the allocation grew compared with last year.
    persona: confused_user
    note: The user mixes up capital and operating budgets.
    fact_ids: [parks_maintenance, parks_maintenance_2025]
    expected_phrases: ["increase", "2025"]
    expected_behavior: Compares both years and names the direction of change.
    expected_tools: [query_documents]
    source_row: 41
    ground_truth:
      doc_id: riverton_budget_2026
      note: The 2025 figure is in the appendix; no single expected string.
    success_criteria: Says the allocation increased and gives both figures.
  - turn: 3
    objective: Ask who approved the parks budget.
    ground_truth:
      doc_id: riverton_budget_2026
      expected_answer: null
""")

def record(turn: int, message: str, answer: str) -> TurnRecord:
    return TurnRecord(turn=turn, user_message=message, answer=answer,
                      tool_calls=[ToolCall(name="query_documents", arguments={"query": message},
                                           result_summary="Parks maintenance: $1.84 million (2025: $1.61 million)")],
                      performance=TurnPerformance(wall_s=2.5))


TRANSCRIPT = Transcript(scenario_id="riverton_parks_followup", turns=[
    record(1, "What is the parks maintenance allocation for 2026?", "It is $1.84 million."),
    record(2, "Did that go up from last year?", "Yes: $1.61 million in 2025, $1.84 million in 2026."),
    record(3, "Who approved it?", "The budget does not say who approved it."),
])


def tool_message(name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"id": "msg_01Q2w3E4r5T6y7U8i9O0pA", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-6", "stop_reason": "tool_use", "stop_sequence": None,
            "content": [{"type": "tool_use", "id": "toolu_01Zx9Yw8Vu7Ts6Rq5Po4Nm", "name": name,
                         "input": tool_input}],
            "usage": {"input_tokens": 900, "output_tokens": 120, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 1500}}


class JudgeAPI:
    """Answers the Messages API with grades or a verdict, by the forced tool; keeps every case text."""

    def __init__(self) -> None:
        self.cases: dict[str, list[str]] = {"turn_grades": [], "scenario_verdict": []}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        tool = body["tool_choice"]["name"]
        self.cases[tool].append(body["messages"][0]["content"])
        return httpx.Response(200, json=tool_message(tool, GRADES if tool == "turn_grades" else VERDICT))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> JudgeAPI:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    return JudgeAPI()


async def judged(api: JudgeAPI, scenario: Any) -> JudgeAPI:
    client = httpx.AsyncClient(transport=httpx.MockTransport(api))
    await ModelJudge(AnthropicBackend(http_client=client, max_retries=0)).judge(scenario, TRANSCRIPT)
    return api


async def test_every_typed_gaia_key_reaches_the_turn_judge_with_its_label(api: JudgeAPI) -> None:
    cases = (await judged(api, Scenario.model_validate(GAIA_SCENARIO))).cases["turn_grades"]
    second = cases[1]
    assert "Expected behavior: Answers only from the indexed budget and says when a figure is missing." in second
    assert 'Captured from: {"captured_at": "2026-10-02T14:03:11Z", "session_id": "7f3c2a"}' in second
    assert ("Documents indexed before the first turn: eval/corpus/documents/riverton_budget_2026.md "
            "(riverton_budget_2026)") in second
    assert "Persona for this turn: confused_user" in second
    assert "Turn note: The user mixes up capital and operating budgets." in second
    assert "Facts this turn covers: parks_maintenance, parks_maintenance_2025" in second
    assert 'Expected phrases in the answer: "increase"; "2025"' in second
    assert "Expected behavior: Compares both years and names the direction of change." in second
    assert "Expected tools (from the captured session): query_documents" in second
    assert "Ground truth note: The 2025 figure is in the appendix; no single expected string." in second
    assert "Success criteria: Says the allocation increased and gives both figures." in second
    assert "Persona for this turn" not in cases[0]  # the scenario's own persona is not repeated


async def test_unknown_keys_reach_the_judge_verbatim_as_other_notes(api: JudgeAPI) -> None:
    sent = await judged(api, Scenario.model_validate(GAIA_SCENARIO))
    first = sent.cases["turn_grades"][0]
    assert "Other scenario notes (verbatim from the scenario file):\n- difficulty: hard\n- reviewer: mkowalski" in first
    second = sent.cases["turn_grades"][1]
    assert "Other notes for this turn (verbatim from the scenario file):\n- source_row: 41" in second
    assert "source_row" not in first  # a turn's notes belong to that turn
    verdict = sent.cases["scenario_verdict"][0]
    assert "- reviewer: mkowalski" in verdict and "- source_row: 41" in verdict


async def test_a_ground_truth_without_expected_answer_shows_no_expected_answer_line(api: JudgeAPI) -> None:
    second = (await judged(api, Scenario.model_validate(GAIA_SCENARIO))).cases["turn_grades"][1]
    assert "expected answer:" not in second.lower()
    assert "null" not in second
    assert "No expected answer is given for this turn: grade correctness against the success criteria" in second
    assert "Ground truth source: document riverton_budget_2026" in second


async def test_an_explicit_null_means_the_documents_do_not_contain_it(api: JudgeAPI) -> None:
    third = (await judged(api, Scenario.model_validate(GAIA_SCENARIO))).cases["turn_grades"][2]
    assert "Ground truth expected answer: null (the documents do not contain it" in third
    assert "No expected answer is given" not in third


async def test_a_given_expected_answer_is_shown_as_written(api: JudgeAPI) -> None:
    first = (await judged(api, Scenario.model_validate(GAIA_SCENARIO))).cases["turn_grades"][0]
    assert "Ground truth expected answer: $1.84 million" in first
    assert "Ground truth source: document riverton_budget_2026, fact parks_maintenance" in first
    assert "Ground truth note: Line 14 of the capital table." in first
    # GAIA writes these inside ground_truth too: declared keys with labels, not "other notes".
    assert "Ground truth facts: parks_maintenance, parks_capital_total" in first
    assert 'Ground truth phrases in a good answer: "1.84"; "capital"' in first
    assert "Other ground truth notes" not in first


async def test_the_verdict_judge_sees_the_same_ground_truth_rules(api: JudgeAPI) -> None:
    verdict = (await judged(api, Scenario.model_validate(GAIA_SCENARIO))).cases["scenario_verdict"][0]
    assert verdict.count("Ground truth expected answer: $1.84 million") == 1
    assert verdict.count("Ground truth expected answer: null (the documents do not contain it") == 1
    assert "Expected behavior: Compares both years" in verdict


async def test_the_scenario_model_keeps_missing_and_null_apart(api: JudgeAPI) -> None:
    """runner.scenarios' GroundTruth: the key left out is not the key written as null."""
    scenario = Scenario.model_validate(GAIA_SCENARIO)
    assert [expected_answer_state(t.ground_truth) for t in scenario.turns] == ["given", "absent", "must_say_unknown"]
    cases = (await judged(api, scenario)).cases["turn_grades"]
    assert "Ground truth expected answer: $1.84 million" in cases[0]
    assert "expected answer:" not in cases[1].lower()
    assert "Ground truth expected answer: null (the documents do not contain it" in cases[2]


@pytest.mark.parametrize(("truth", "state"), [
    ({"doc_id": "d", "expected_answer": "42"}, "given"),
    ({"doc_id": "d", "expected_answer": None}, "must_say_unknown"),
    ({"doc_id": "d"}, "absent"),
])
def test_expected_answer_state_for_plain_mappings(truth: dict[str, Any], state: str) -> None:
    assert expected_answer_state(truth) == state
    assert expected_answer_state(GroundTruth.model_validate(truth)) == state


def test_a_turn_with_nothing_to_grade_against_says_so() -> None:
    from runner.judge._cases import _ground_truth

    bare = Turn.model_validate({"turn": 1, "objective": "Say hello."})
    assert _ground_truth(bare) == ["No ground truth or success criteria were given for this turn."]


def test_the_simulated_user_never_sees_what_the_judge_is_told() -> None:
    scenario = Scenario.model_validate(GAIA_SCENARIO)
    text = situation(scenario, scenario.turns[1], TRANSCRIPT.turns[:1])
    assert "confused_user" in text  # the turn's persona wins over the scenario's
    for secret in ("Compares both years", "increase", "parks_maintenance_2025", "mixes up capital",
                   "appendix", "Says the allocation increased", "source_row"):
        assert secret not in text, secret
