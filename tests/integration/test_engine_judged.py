"""Repeated trials, repeated judging and offline rescoring through the real engine.

The conversations are real (llm-cpu server, GAIA Agent UI and MCP bridge as local processes).
The judge is a double — the one edge allowed one (DESIGN 1.6) — so the PASS path and a judge
that changes its mind can be driven on purpose; its verdicts still go through our scoring.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from runner.conversation.simulate import ScriptedSimulator
from runner.records.judgments import DimensionScores, Judgments, ScenarioVerdict, TurnJudgment
from runner.records.transcript import Transcript
from runner.report import RunConfig, RunWriter, read_scorecard
from runner.run.conversations import LiveConversations
from runner.run.engine import Engine
from runner.run.launch import rescore
from runner.run.prepare import selected_scenarios
from runner.run.settings import Backend, RunSettings, Selection, new_run_id
from runner.sandbox.local import LocalBackend

pytestmark = pytest.mark.integration

SUITE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "engine_suite"
SCENARIO = "orchard_followup"  # no exact checks: the judge alone decides PASS/FAIL


class ScriptedJudge:
    """Gives each call the next score from `scores` (all seven dimensions alike)."""

    def __init__(self, scores: list[float], model: str = "judge-double") -> None:
        self.scores, self.calls, self.model = scores, 0, model

    @property
    def judge_model(self) -> str:
        return self.model

    async def judge(self, scenario: Any, transcript: Transcript, repeat: int = 0) -> Judgments:
        value = self.scores[self.calls % len(self.scores)]
        self.calls += 1
        dims = DimensionScores(**{name: value for name in DimensionScores.model_fields})
        turns = [TurnJudgment(turn=t.turn, scores=dims, reasoning=f"double says {value}") for t in transcript.turns]
        verdict = ScenarioVerdict(verdict="PASS" if value >= 6 else "FAIL")
        return Judgments(judge_model=self.model, turns=turns, verdict=verdict)

    async def judge_claims(self, claims: Any, answer: str, reference: str | None = None) -> list[Any]:
        return []


def settings_for(results: Path, llm_url: str, **overrides: Any) -> RunSettings:
    return RunSettings(
        run_id=new_run_id(), suite_paths=[SUITE / "scenarios"], corpus_root=SUITE / "corpus",
        results_root=results, selection=Selection(ids=[SCENARIO]), backend=Backend.LOCAL,
        device="cpu", llm_url=llm_url, judge_provider="double", **overrides,
    )


def run_engine(settings: RunSettings, judge: ScriptedJudge) -> Path:
    settings.save(settings.run_dir)
    writer = RunWriter(settings.run_dir, run_id=settings.run_id,
                       config=RunConfig(judge_provider="double", judge_model=judge.model, trials=settings.trials,
                                        rejudge=settings.rejudge))
    backend = LocalBackend(llm_url=settings.llm_url, corpus_root=settings.corpus_root)
    scenarios, _, _ = selected_scenarios(settings)
    conversations = LiveConversations(settings, backend, ScriptedSimulator())
    engine = Engine(settings, scenarios, conversations, judge, writer, say=lambda line: None)
    asyncio.run(engine.run())
    return settings.run_dir


@pytest.fixture(scope="module")
def three_trials(tmp_path_factory: pytest.TempPathFactory, llm_url: str, gaia_python: Path) -> Path:
    # trial 1 and 3 pass (score 8), trial 2 fails (score 3): a flaky scenario.
    return run_engine(settings_for(tmp_path_factory.mktemp("trials"), llm_url, trials=3), ScriptedJudge([8, 3, 8]))


def test_trials_are_counted_and_labelled(three_trials: Path) -> None:
    card = read_scorecard(three_trials / "scorecard.json")
    assert [(r.id, r.trial, r.status.value) for r in card.scenarios] == [
        (SCENARIO, 1, "PASS"), (SCENARIO, 2, "FAIL"), (SCENARIO, 3, "PASS")]
    stats = card.trials[SCENARIO]  # type: ignore[index]
    assert stats.passes == 2 and stats.label.value == "flaky"
    assert stats.all_passed is False
    assert stats.pass_hat_k[3] == pytest.approx(0.0)  # C(2,3)/C(3,3): not all three passed
    assert stats.pass_at_k[1] == pytest.approx(2 / 3)
    assert SCENARIO in (three_trials / "summary.md").read_text()


def test_every_trial_gets_a_fresh_sandbox(three_trials: Path) -> None:
    sessions = set()
    for trial in (1, 2, 3):
        trace = json.loads((three_trials / "traces" / f"{SCENARIO}__trial{trial}.json").read_text())
        sessions.add(trace["transcript"]["session_id"])
        assert (three_trials / "artifacts" / f"{SCENARIO}__trial{trial}" / "gaia_chat.db").is_file()
    assert len(sessions) == 3


def test_rejudging_reports_judge_agreement(tmp_path: Path, llm_url: str, gaia_python: Path) -> None:
    judge = ScriptedJudge([8, 3, 8])  # the same transcript: PASS, FAIL, PASS
    run_dir = run_engine(settings_for(tmp_path, llm_url, rejudge=3), judge)
    card = read_scorecard(run_dir / "scorecard.json")
    assert judge.calls == 3
    agreement = card.judge_agreement
    assert agreement is not None and agreement.repeats == 3
    assert agreement.unstable_scenarios == [SCENARIO]
    assert agreement.dimension_spread["correctness"] == pytest.approx(5.0)
    assert card.scenarios[0].status.value == "PASS"  # the first judgment decides the status


def test_rescore_judges_saved_transcripts_without_the_agent(
    three_trials: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.run import launch

    settings = RunSettings.load(three_trials).model_copy(
        update={"run_id": new_run_id(), "results_root": tmp_path, "backend": Backend.LOCAL})
    harsh = ScriptedJudge([2], model="harsh-double")

    async def no_calibration(settings: RunSettings, say: Any) -> tuple[Any, Any]:
        return harsh, ScriptedSimulator()

    monkeypatch.setattr(launch, "prepare_judge", no_calibration)  # the double needs no gate
    card = asyncio.run(rescore(three_trials, settings, say=lambda line: None))
    assert [r.status.value for r in card.scenarios] == ["FAIL", "FAIL", "FAIL"]
    assert harsh.calls == 3
    old = {r.key: r.turns for r in read_scorecard(three_trials / "scorecard.json").scenarios}
    for result in card.scenarios:  # the same conversation, judged again
        assert [t.answer for t in result.turns] == [t.answer for t in old[result.key]]
    assert card.config.extra["rescored_from"] == three_trials.name
