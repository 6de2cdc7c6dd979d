"""The Anthropic judge, driven through the real SDK with an httpx mock transport at the network edge.

The transport checks the request we send (model, forced tool, cached rubric, temperature 0) and
answers with realistic Messages API responses.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2 as httpx  # the anthropic SDK 2.x transport package (same API as httpx)
import pytest

from runner import verdict
from runner.judge import AnthropicBackend, JudgeCache, JudgeError, ModelJudge
from runner.judge._files import prompt
from runner.records.judgments import ClaimLabel, JudgeUsage, Judgments
from runner.records.transcript import ToolCall, Transcript, TurnPerformance, TurnRecord
from runner.verdict.prices import cost_note, judge_cost_usd, judgings_cost_usd, price_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def message(tool_name: str, tool_input: dict[str, Any] | None = None, text: str | None = None) -> dict[str, Any]:
    """A Messages API response as the API returns it (tool_use block, usage with cache fields)."""
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    if tool_input is not None:
        content.append({"type": "tool_use", "id": "toolu_01A2b3C4d5E6f7G8h9J0kLmN", "name": tool_name,
                        "input": tool_input})
    return {
        "id": "msg_01XyZabc123DEF456ghi789",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content,
        "stop_reason": "tool_use" if tool_input is not None else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 412,
            "output_tokens": 88,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 1203,
            "service_tier": "standard",
        },
    }


class FakeAnthropicAPI:
    """Answers POST /v1/messages from a queue of replies and records every request body."""

    def __init__(self, replies: list[dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.versions: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.method == "POST" and request.url.path == "/v1/messages"
        assert request.headers["authorization"] == "Bearer sk-ant-test-not-a-real-key"
        body = json.loads(request.content)
        self.requests.append(body)
        self.versions.append(request.headers["anthropic-version"])
        reply = self.replies.pop(0)
        return httpx.Response(200, json=reply(body) if callable(reply) else reply)


def make_judge(api: FakeAnthropicAPI, cache: JudgeCache | None = None) -> ModelJudge:
    client = httpx.AsyncClient(transport=httpx.MockTransport(api))
    return ModelJudge(AnthropicBackend(http_client=client, max_retries=0), cache)


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")


CLAIMS = [{"name": "total", "claim": "The total travel budget for 2026 is $412,000."},
          {"name": "source", "claim": "The figure comes from the budget document."}]
ANSWER = "The 2026 travel budget totals $412,000, per the Acme budget document."


def labels(*entries: tuple[str, str]) -> dict[str, Any]:
    return {"claims": [{"name": n, "label": label, "rationale": f"The answer speaks to {n}."}
                       for n, label in entries]}


async def test_claim_request_is_a_forced_tool_with_cached_rubric_at_temperature_zero() -> None:
    api = FakeAnthropicAPI([message("claim_labels", labels(("total", "entailed"), ("source", "entailed")))])
    result = await make_judge(api).judge_claims(CLAIMS, ANSWER, reference="Travel total: $412,000.")

    sent = api.requests[0]
    assert sent["model"] == "claude-sonnet-4-6"
    assert sent["temperature"] == 0
    assert api.versions == ["2023-06-01"]  # the API version that still accepts temperature
    assert sent["tool_choice"] == {"type": "tool", "name": "claim_labels"}
    assert [tool["name"] for tool in sent["tools"]] == ["claim_labels"]
    schema = sent["tools"][0]["input_schema"]
    assert schema["type"] == "object" and schema["required"] == ["claims"]
    assert schema["additionalProperties"] is False
    assert sent["system"] == [{"type": "text", "text": prompt("claim_judge"),
                               "cache_control": {"type": "ephemeral"}}]
    user_text = sent["messages"][0]["content"]
    assert user_text.count("Travel total: $412,000.") == 1  # the reference, exactly once
    assert ANSWER in user_text and "total: The total travel budget" in user_text
    assert [(j.name, j.label) for j in result] == [("total", ClaimLabel.ENTAILED), ("source", ClaimLabel.ENTAILED)]
    assert "never supplies content" in prompt("claim_judge") or "never evidence" in prompt("claim_judge")


async def test_usage_and_cost_are_recorded_from_the_response() -> None:
    api = FakeAnthropicAPI([message("turn_grades", GOOD_TURN), message("scenario_verdict", VERDICT)])
    judgments = await make_judge(api).judge(make_scenario(with_claims=False), TRANSCRIPT)

    assert judgments.usage.requests == 2
    assert judgments.usage.input_tokens == 824 and judgments.usage.output_tokens == 176
    assert judgments.usage.cache_read_tokens == 2406 and judgments.usage.cache_write_tokens == 0
    expected_cost = (824 * 3.0 + 176 * 15.0 + 2406 * 0.30) / 1_000_000
    assert judgments.usage.cost_usd == pytest.approx(expected_cost)
    assert judgments.judge_model == "anthropic:claude-sonnet-4-6"
    # The backend prices from the same table as the budget check and the scorecard.
    assert judge_cost_usd(judgments.usage, judgments.judge_model) == pytest.approx(expected_cost)


async def test_an_anthropic_model_missing_from_the_table_is_unpriced_not_guessed() -> None:
    api = FakeAnthropicAPI([message("turn_grades", GOOD_TURN), message("scenario_verdict", VERDICT)])
    client = httpx.AsyncClient(transport=httpx.MockTransport(api))
    backend = AnthropicBackend("claude-opus-9-preview", http_client=client, max_retries=0)
    judgments = await ModelJudge(backend).judge(make_scenario(with_claims=False), TRANSCRIPT)
    assert judgments.usage.input_tokens == 824 and judgments.usage.cost_usd == 0.0
    assert "unpriced" in cost_note(judgments.judge_model)


# --- the price table (runner/verdict/prices.py): exact ids, one table for budget and report ------------

MILLION_EACH = JudgeUsage(input_tokens=1_000_000, output_tokens=1_000_000)


@pytest.mark.parametrize("model", ["claude-sonnet-4-6", "anthropic:claude-sonnet-4-6",
                                   "anthropic:claude-sonnet-4-5-20250929"])
def test_anthropic_ids_are_priced_bare_or_as_recorded(model: str) -> None:
    assert judge_cost_usd(MILLION_EACH, model) == pytest.approx(3.0 + 15.0)
    assert "$3 in / $15 out" in cost_note(model)


@pytest.mark.parametrize("model", [
    "openai:my-opus-distill-q4",        # a local model whose name contains "opus"
    "my-opus-distill-q4",
    "openai:claude-opus-4-1",           # Claude's name behind an OpenAI-compatible server
    "anthropic:claude-opus",            # a family, not a model id
    "anthropic:claude-sonnet-4-6-turbo",
    "openai:SmolLM2-135M-Instruct",
])
def test_names_that_are_not_exact_anthropic_ids_cost_nothing_and_say_unpriced(model: str) -> None:
    assert price_of(model) is None
    assert judge_cost_usd(MILLION_EACH, model) == 0.0
    assert cost_note(model) == (f"{model}: unpriced (no list price in runner/verdict/prices.py; its cost "
                                "counts as $0)")


def test_opus_generations_have_their_own_prices() -> None:
    assert judge_cost_usd(MILLION_EACH, "claude-opus-4-1") == pytest.approx(15.0 + 75.0)
    assert judge_cost_usd(MILLION_EACH, "claude-opus-4-6") == pytest.approx(5.0 + 25.0)


def test_every_judging_of_a_rejudged_scenario_is_counted() -> None:
    usage = JudgeUsage(input_tokens=10_000, output_tokens=1_000)
    one = Judgments(judge_model="anthropic:claude-sonnet-4-6", usage=usage)
    local = Judgments(judge_model="openai:SmolLM2-135M-Instruct", usage=usage)
    single = judge_cost_usd(usage, one.judge_model)
    assert single == pytest.approx((10_000 * 3 + 1_000 * 15) / 1e6)
    assert judgings_cost_usd([one, one, one]) == pytest.approx(3 * single)  # --rejudge 3
    assert judgings_cost_usd([one, local]) == pytest.approx(single)
    assert judgings_cost_usd([]) == 0.0


def test_the_verdict_face_hands_out_the_same_functions() -> None:
    assert verdict.judge_cost_usd is judge_cost_usd
    assert verdict.judgings_cost_usd is judgings_cost_usd


class _Spec:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def make_scenario(with_claims: bool = True) -> _Spec:
    claims = [_Spec(name="total", claim=CLAIMS[0]["claim"])] if with_claims else []
    return _Spec(
    id="budget_lookup", name="Budget lookup", description="Asks for the travel total.",
    persona="data_analyst", expected_outcome="States $412,000 from the document.", reference=None,
    turns=[_Spec(turn=1, objective="Ask for the total.", user_message="What is the travel total?",
                 ground_truth=_Spec(expected_answer="$412,000", note="summary table", doc_id="b", fact_id="t"),
                 success_criteria="States $412,000.", claims=claims,
                 reference="Travel total: $412,000.")],
    )


SCENARIO = make_scenario()
TRANSCRIPT = Transcript(
    scenario_id="budget_lookup",
    turns=[TurnRecord(turn=1, user_message="What is the travel total?", answer=ANSWER,
                      tool_calls=[ToolCall(name="query_documents", arguments={"query": "travel total"},
                                           result_summary="Travel — total $412,000")],
                      performance=TurnPerformance(wall_s=2.0))],
)
GOOD_TURN = {"correctness": 10, "tool_selection": 9, "context_retention": 10, "completeness": 9,
             "efficiency": 9, "personality": 8, "error_recovery": 10, "overall_score": 9.4,
             "failure_category": "none", "reasoning": "Exact figure from the queried document."}
VERDICT = {"verdict": "PASS", "root_cause": None, "recommended_fix": None}


async def test_whole_scenario_judgment_grades_turns_claims_and_verdict() -> None:
    api = FakeAnthropicAPI([
        message("turn_grades", GOOD_TURN),
        message("claim_labels", labels(("total", "entailed"))),
        message("scenario_verdict", VERDICT),
    ])
    judgments = await make_judge(api).judge(SCENARIO, TRANSCRIPT)

    assert [body["tool_choice"]["name"] for body in api.requests] == ["turn_grades", "claim_labels", "scenario_verdict"]
    turn_prompt = api.requests[0]["messages"][0]["content"]
    assert "query_documents" in turn_prompt and "$412,000" in turn_prompt and "States $412,000." in turn_prompt
    assert api.requests[0]["system"][0]["text"] == prompt("turn_rubric")
    assert api.requests[0]["system"][0]["cache_control"] == {"type": "ephemeral"}
    turn = judgments.turns[0]
    assert turn.turn == 1 and turn.scores.correctness == 10 and turn.reported_score == 9.4
    assert turn.failure_category == "none"
    assert [(c.turn, c.name, c.label) for c in judgments.claims] == [(1, "total", ClaimLabel.ENTAILED)]
    assert judgments.verdict is not None and judgments.verdict.verdict == "PASS"


async def test_invalid_reply_gets_one_correction_quoting_the_error_then_succeeds() -> None:
    out_of_range = dict(GOOD_TURN, correctness=14)
    api = FakeAnthropicAPI([message("turn_grades", out_of_range), message("turn_grades", GOOD_TURN),
                            message("scenario_verdict", VERDICT)])
    judgments = await make_judge(api).judge(make_scenario(with_claims=False), TRANSCRIPT)

    retry = api.requests[1]["messages"]
    assert [m["role"] for m in retry] == ["user", "assistant", "user"]
    assert json.loads(retry[1]["content"])["correctness"] == 14
    assert "correctness" in retry[2]["content"] and "less than or equal to 10" in retry[2]["content"]
    assert api.requests[1]["tool_choice"] == {"type": "tool", "name": "turn_grades"}
    assert judgments.turns[0].scores.correctness == 10
    assert judgments.usage.requests == 3


async def test_invalid_twice_raises_judge_error_and_never_a_score() -> None:
    api = FakeAnthropicAPI([message("turn_grades", text="I think this turn deserves an 8."),
                            message("turn_grades", dict(GOOD_TURN, bonus_points=3))])
    with pytest.raises(JudgeError, match=r"(?s)failed validation twice.*bonus_points"):
        await make_judge(api).judge(SCENARIO, TRANSCRIPT)
    assert len(api.requests) == 2


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (labels(("total", "entailed"), ("source", "entailed"), ("extra", "entailed")), "unknown claim names ['extra']"),
        (labels(("total", "entailed")), "missing claim names ['source']"),
        (labels(("total", "entailed"), ("total", "contradicted"), ("source", "entailed")),
         "claim names given more than once ['total']"),
        ({"claims": [{"name": "total", "label": "entailed", "rationale": "ok", "confidence": 0.9},
                     {"name": "source", "label": "entailed", "rationale": "ok"}]}, "Extra inputs are not permitted"),
        (labels(("total", "true"), ("source", "entailed")), "Input should be 'entailed'"),
        (labels(("total", "entailed"), ("source", "entailed")) | {"summary": "all good"}, "Extra inputs"),
    ],
    ids=["unknown-name", "missing-name", "duplicate-name", "extra-field", "fifth-label", "extra-top-field"],
)
async def test_claim_reply_problems_get_one_correction_then_error(reply: dict[str, Any], problem: str) -> None:
    api = FakeAnthropicAPI([message("claim_labels", reply), message("claim_labels", reply)])
    with pytest.raises(JudgeError, match="failed validation twice"):
        await make_judge(api).judge_claims(CLAIMS, ANSWER)
    assert len(api.requests) == 2
    assert problem in api.requests[1]["messages"][2]["content"]


async def test_claim_names_corrected_on_second_try_are_accepted() -> None:
    api = FakeAnthropicAPI([message("claim_labels", labels(("total", "entailed"))),
                            message("claim_labels", labels(("source", "not_addressed"), ("total", "entailed")))])
    result = await make_judge(api).judge_claims(CLAIMS, ANSWER)
    # Returned in the caller's order, whatever order the judge used.
    assert [(j.name, j.label) for j in result] == [("total", ClaimLabel.ENTAILED), ("source", ClaimLabel.NOT_ADDRESSED)]


async def test_empty_answer_labels_every_claim_not_addressed_without_calling_the_model() -> None:
    api = FakeAnthropicAPI([])
    result = await make_judge(api).judge_claims(CLAIMS, "   \n")
    assert [j.label for j in result] == [ClaimLabel.NOT_ADDRESSED, ClaimLabel.NOT_ADDRESSED]
    assert api.requests == []


async def test_duplicate_claim_names_in_the_request_are_a_caller_error() -> None:
    with pytest.raises(ValueError, match="repeated: \\['total'\\]"):
        await make_judge(FakeAnthropicAPI([])).judge_claims([CLAIMS[0], CLAIMS[0]], ANSWER)


async def test_cache_serves_a_repeated_question_from_disk(tmp_path: Any) -> None:
    reply = message("claim_labels", labels(("total", "entailed"), ("source", "contradicted")))
    first_cache = JudgeCache(tmp_path)
    first = await make_judge(FakeAnthropicAPI([reply]), first_cache).judge_claims(CLAIMS, ANSWER)
    assert (first_cache.hits, first_cache.misses) == (0, 1)

    second_api = FakeAnthropicAPI([])  # any request would fail: the queue is empty
    second_cache = JudgeCache(tmp_path)
    second = await make_judge(second_api, second_cache).judge_claims(CLAIMS, ANSWER)
    assert second == first and second_api.requests == []
    assert second_cache.stats().hits == 1 and second_cache.stats().misses == 0

    other_answer = FakeAnthropicAPI([reply])
    await make_judge(other_answer, second_cache).judge_claims(CLAIMS, ANSWER + " Approved in May.")
    assert len(other_answer.requests) == 1 and second_cache.misses == 1


async def test_invalid_replies_are_not_cached(tmp_path: Any) -> None:
    bad = message("claim_labels", labels(("total", "entailed")))
    good = message("claim_labels", labels(("total", "entailed"), ("source", "entailed")))
    cache = JudgeCache(tmp_path)
    await make_judge(FakeAnthropicAPI([bad, good]), cache).judge_claims(CLAIMS, ANSWER)
    stored = [p.read_text() for p in tmp_path.rglob("*.json")]
    assert len(stored) == 1 and '\\"source\\"' in stored[0]
    assert "sk-ant" not in stored[0]


async def test_missing_key_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(JudgeError, match="ANTHROPIC_API_KEY"):
        AnthropicBackend()


async def test_api_error_status_becomes_judge_error() -> None:
    def overloaded(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"type": "error", "error": {"type": "invalid_request_error",
                                                                     "message": "model: not found"}})
    client = httpx.AsyncClient(transport=httpx.MockTransport(overloaded))
    judge = ModelJudge(AnthropicBackend("claude-nonexistent", http_client=client, max_retries=0))
    with pytest.raises(JudgeError, match="HTTP 400.*model: not found"):
        await judge.judge_claims(CLAIMS, ANSWER)
