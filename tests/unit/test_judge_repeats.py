"""The judge cache and `--rejudge K`: repeat i is served only repeat i's stored reply; the gate
never reads the cache. The backend is a stand-in at the provider edge (it records every request
it is sent, so each test checks what reached the "server")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.judge import (
    BackendReply,
    JudgeCache,
    ModelJudge,
    StructuredRequest,
    calibrate,
    load_calibration,
)
from runner.judge._cache import cache_key
from runner.records.judgments import DIMENSIONS, JudgeUsage
from runner.records.transcript import Transcript, TurnPerformance, TurnRecord
from runner.scenarios import Scenario

pytestmark = pytest.mark.anyio
EXAMPLES = load_calibration()
CLAIM_TRUTH = {(e.answer, e.claim): e.label.value for e in EXAMPLES.claims}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class CountingBackend:
    """Answers like a judge that grades every turn `score`; counts requests by schema."""

    provider = "openai"
    model = "stand-in"
    temperature: float | None = 0.0
    narrow_claim_schema = True
    identity: dict[str, Any] | None = {"url": "http://127.0.0.1:1/v1", "model": "stand-in"}

    def __init__(self, score: float = 8.0) -> None:
        self.score = score
        self.sent: list[str] = []

    async def ready(self) -> None:
        return None

    async def complete(self, request: StructuredRequest) -> BackendReply:
        self.sent.append(request.schema_name)
        if request.schema_name == "claim_labels":
            case = request.messages[-1]["content"]
            answer = case.split("ANSWER:\n<<<\n", 1)[1].split("\n>>>", 1)[0]
            claim = case.split("- claim: ", 1)[1].splitlines()[0]
            body: dict[str, Any] = {"claims": [{"name": "claim", "label": CLAIM_TRUTH[(answer, claim)],
                                                "rationale": "Read."}]}
        elif request.schema_name == "turn_grades":
            scenario_id = request.messages[-1]["content"].split("SCENARIO: ", 1)[1].split()[0]
            rubric = {e.scenario.id: e for e in EXAMPLES.rubric}.get(scenario_id)
            scores = dict.fromkeys(DIMENSIONS, self.score)
            if rubric is not None:
                scores.update({n: (b.min + b.max) / 2 for n, b in rubric.bands.items()})
            body = {**scores, "overall_score": self.score, "failure_category": "none", "reasoning": "Graded."}
        else:
            body = {"verdict": "PASS", "root_cause": None, "recommended_fix": None}
        return BackendReply(json.dumps(body), JudgeUsage(requests=1))


SCENARIO = Scenario.model_validate({
    "id": "repeat_probe", "name": "Repeat probe", "category": "rag_quality", "description": "d",
    "persona": "data_analyst", "expected_outcome": "o",
    "turns": [{"turn": 1, "objective": "Ask the figure.", "user_message": "What is the figure?"}],
})
TRANSCRIPT = Transcript(scenario_id="repeat_probe",
                        turns=[TurnRecord(turn=1, user_message="What is the figure?", answer="It is 12.",
                                          performance=TurnPerformance(wall_s=1.0))])


def test_the_cache_key_of_a_repeat_differs_and_repeat_zero_keeps_the_old_key() -> None:
    args: tuple[Any, ...] = ("openai", "m", "system", [{"role": "user", "content": "q"}], {}, 0.0, None)
    assert cache_key(*args) == cache_key(*args, repeat=0)  # a cache from before still serves
    keys = {cache_key(*args, repeat=r) for r in range(3)}
    assert len(keys) == 3


async def test_every_repeat_is_a_real_call_once_and_only_its_own_reply_is_served(tmp_path: Path) -> None:
    backend = CountingBackend()
    judge = ModelJudge(backend, JudgeCache(tmp_path))
    for repeat in range(3):
        await judge.judge(SCENARIO, TRANSCRIPT, repeat)
    assert backend.sent.count("scenario_verdict") == 3  # three judgings reached the backend
    again = JudgeCache(tmp_path)
    judge = ModelJudge(backend, again)
    for repeat in range(3):
        await judge.judge(SCENARIO, TRANSCRIPT, repeat)
    assert backend.sent.count("scenario_verdict") == 3 and again.stats().hits == 6  # 2 questions × 3
    # A fourth repeat was never asked: it is a real call, not repeat 0..2's reply.
    await judge.judge(SCENARIO, TRANSCRIPT, 3)
    assert backend.sent.count("scenario_verdict") == 4


async def test_the_gate_is_asked_live_with_a_full_cache_and_stores_nothing(tmp_path: Path) -> None:
    backend = CountingBackend()
    cache = JudgeCache(tmp_path)
    questions = len(EXAMPLES.claims) + 2 * len(EXAMPLES.rubric)
    for _ in range(2):
        report = await calibrate(ModelJudge(backend, cache), deadline_s=30)
        assert report.passed, str(report)
    assert len(backend.sent) == 2 * questions and report.requests == questions
    assert cache.stats().hits == cache.stats().misses == 0 and not list(tmp_path.rglob("*.json"))
