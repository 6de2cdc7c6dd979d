"""`trialbox selftest`'s live layer in real Docker sandboxes (agent-ui and llm-cpu images).

The oracle — a real GAIA agent mounted with --agent-dir, answering from a plan written for
this run only — must come out all-checks-passed through the real Agent UI, MCP bridge and
GAIA's RAG tools; the adversary, the same agent with a plan of wrong answers, must fail. One
scenario of our suite (two sandboxes, inside the ~2 minutes a new live test may add): it is
decided by a tool call with a file argument, GAIA's expected_tools and an exact figure; the
pure layer (tests/unit/test_selftest.py) covers every other scenario. The oracle gives an
answer only when its retrieval brought it back: a planted scenario whose fact its document does
not hold comes out not answerable from the corpus (one more sandbox).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from runner.conversation.simulate import ScriptedSimulator
from runner.conversation.target import run_conversation
from runner.records.transcript import Transcript
from runner.report import ScenarioResult
from runner.report._models import TurnResult
from runner.scenarios import Scenario, load_suite
from runner.selftest._live import (
    ADVERSARY,
    NOT_ANSWERABLE,
    ORACLE,
    kind_agent_id,
    kinds_tried,
    live_kind_table,
    live_results,
    live_sound,
    verdict_of,
    write_agents,
)
from runner.system.paths import eval_root
from runner.verdict.checks import run_all_checks

if TYPE_CHECKING:
    from labelled_containers import LlmCpu

docker = pytest.importorskip("docker")

pytestmark = [pytest.mark.containers, pytest.mark.timeout(1200)]

EVAL = eval_root()
RUN_ID = f"pytest-selftest-{int(time.time())}"
AGENT_UI = "trialbox/agent-ui:dev"
SCENARIOS = ("query_named_file",)


@pytest.fixture(scope="module")
def llm_cpu_environment() -> dict[str, str]:
    return {}


@pytest.fixture(scope="module", autouse=True)
def nothing_left_behind() -> Iterator[None]:
    client = docker.from_env()
    for image in (AGENT_UI, "trialbox/llm-cpu:dev"):
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            pytest.fail(f"{image} is not built — `make images` (make test builds them first)")
    yield
    leftovers = client.containers.list(all=True, filters={"label": f"trialbox.run={RUN_ID}"})
    leftovers += client.networks.list(filters={"label": f"trialbox.run={RUN_ID}"})
    assert leftovers == [], f"left behind: {[x.name for x in leftovers]}"


@pytest.fixture(scope="module")
def scenarios() -> list[Scenario]:
    suite = load_suite([EVAL / "scenarios"], EVAL / "corpus")
    return [next(s for s in suite.scenarios if s.id == sid) for sid in SCENARIOS]


#: Planted: a fact its document does not hold (the travel policy has no Oslo lunch allowance).
#: A self-test that answered from the plan would pass it; one that answers from what
#: retrieval brought back must call it not answerable from the corpus.
PLANTED = """\
id: oslo_lunch_not_in_policy
name: A fact the named document does not hold
category: tool_selection
persona: power_user
setup:
  index_documents:
    - corpus_doc: travel_expense_policy
      path: documents/travel_expense_policy.txt
turns:
  - turn: 1
    objective: Ask for a figure the policy does not give.
    user_message: In travel_expense_policy.txt, what is the lunch allowance for a day in Oslo?
    ground_truth:
      doc_id: travel_expense_policy
      expected_answer: "$71 per day"
    checks:
      - {type: tool_called, tool: query_specific_file}
      - {type: answer_number, value: 71, tolerance: 0}
"""


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    tree = tmp_path_factory.mktemp("planted")
    (tree / "oslo_lunch_not_in_policy.yaml").write_text(PLANTED, encoding="utf-8")
    (scenario,) = load_suite([tree], EVAL / "corpus").scenarios
    return scenario


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory, scenarios: list[Scenario],
           planted: Scenario) -> Path:
    suite = load_suite([EVAL / "scenarios"], EVAL / "corpus")
    return write_agents([*scenarios, planted], suite.manifest, tmp_path_factory.mktemp("agents"),
                        every_kind=True)


def converse(llm: str, agents: Path, scenario: Scenario, agent_id: str) -> Transcript:
    from runner.sandbox.docker import DockerBackend

    backend = DockerBackend(RUN_ID, llm, EVAL / "corpus", image=AGENT_UI, agent_dirs=[agents])

    async def run() -> Transcript:
        async with backend.open(f"{scenario.id}-{agent_id}") as box:
            return await run_conversation(box, scenario, ScriptedSimulator(), device="cpu",
                                          turn_timeout_s=300, agent_id=agent_id)

    return asyncio.run(run())


@pytest.fixture(scope="module")
def runs(llm_cpu: LlmCpu, agents: Path, scenarios: list[Scenario]
         ) -> dict[tuple[str, str], Transcript]:
    return {(scenario.id, agent): converse(llm_cpu.name, agents, scenario, agent)
            for scenario in scenarios for agent in (ORACLE, ADVERSARY)}


@pytest.mark.parametrize("scenario_id", SCENARIOS)
def test_the_oracle_passes_every_check_through_the_real_tool_path(runs, scenarios, scenario_id):
    scenario = next(s for s in scenarios if s.id == scenario_id)
    transcript = runs[(scenario_id, ORACLE)]
    assert all(record.error is None for record in transcript.turns), transcript.turns
    results = run_all_checks(scenario, transcript)
    assert results and all(r.passed for r in results), [r.diagnostic for r in results]
    assert any(call.name.startswith("query") for record in transcript.turns
               for call in record.tool_calls)


@pytest.mark.parametrize("scenario_id", SCENARIOS)
def test_the_adversary_fails_a_check(runs, scenarios, scenario_id):
    scenario = next(s for s in scenarios if s.id == scenario_id)
    transcript = runs[(scenario_id, ADVERSARY)]
    assert all(record.error is None for record in transcript.turns), transcript.turns
    assert not all(r.passed for r in run_all_checks(scenario, transcript))


def test_a_fact_its_document_does_not_hold_is_not_answerable_from_the_corpus(
    llm_cpu: LlmCpu, agents: Path, planted: Scenario
) -> None:
    transcript = converse(llm_cpu.name, agents, planted, ORACLE)
    (turn,) = transcript.turns
    assert turn.error is None, turn
    assert any(call.name == "query_specific_file" for call in turn.tool_calls)
    assert turn.answer.startswith(NOT_ANSWERABLE), turn.answer
    assert "71" not in turn.answer  # never quoted: it would pass the check it decides
    results = run_all_checks(planted, transcript)
    row = ScenarioResult(id=planted.id, status="FAIL", turns=[
        TurnResult(turn=1, answer=turn.answer, checks=results)])
    (found,) = live_results([row], [row])
    assert verdict_of(found) == "not_answerable_from_corpus" and not live_sound([found])


def scored(scenario: Scenario, transcript: Transcript) -> ScenarioResult:
    """The scorecard row a run would write: each turn's answer and its checks."""
    results = run_all_checks(scenario, transcript)
    return ScenarioResult(id=scenario.id, status="FAIL", turns=[
        TurnResult(turn=record.turn, answer=record.answer,
                   checks=[r for r in results if r.turn == record.turn])
        for record in transcript.turns])


@pytest.mark.parametrize("scenario_id", SCENARIOS)
def test_every_kind_of_wrong_answer_is_caught_through_the_real_tool_path(
    llm_cpu: LlmCpu, agents: Path, runs, scenarios, scenario_id
) -> None:
    """--every-kind, live: one adversary per kind (20 % off, another fact, negation, revision,
    doubt, two values, ...; one sandbox each), each caught on the turn that says it."""
    scenario = next(s for s in scenarios if s.id == scenario_id)
    tried = kinds_tried([scenario], load_suite([EVAL / "scenarios"], EVAL / "corpus").manifest)
    assert len(tried) >= 8, tried
    by_kind = {}
    for kind in tried:
        transcript = converse(llm_cpu.name, agents, scenario, kind_agent_id(kind))
        assert all(record.error is None for record in transcript.turns), (kind, transcript.turns)
        by_kind[kind] = [scored(scenario, transcript)]
    (found,) = live_results([scored(scenario, runs[(scenario_id, ORACLE)])],
                            [scored(scenario, runs[(scenario_id, ADVERSARY)])],
                            (), by_kind, tried)
    assert found.kinds_caught == dict.fromkeys(tried, True), live_kind_table([found])
    assert live_sound([found])
