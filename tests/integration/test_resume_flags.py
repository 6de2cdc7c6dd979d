"""`--resume` keeps its word: the flags it can apply are applied and said, the others refused in
one line naming each; a served model that changed is refused (exit 2) unless
--allow-model-change; results of scenarios outside the suite are named, not kept silently.

The run folder is a finished run of the engine fixture suite (every scenario recorded), so the
resume reaches the engine and ends at once; the LLM server is the real llm-cpu (session fixture).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.records.transcript import Transcript, TurnPerformance, TurnRecord
from runner.report import RunConfig, RunWriter, declared_order
from runner.report._identity import served_model_of
from runner.run.engine import Engine
from runner.run.jobs import Job, Outcome
from runner.run.llm_server import llm_identity
from runner.run.settings import Backend, RunSettings, new_run_id
from runner.scenarios import load_suite

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "fixtures" / "engine_suite"


class Recorded:
    """The finished run's conversations: each scenario answered once (the folder is then resumed)."""

    live = False

    async def prepare(self, jobs: Sequence[Job]) -> None:
        """Nothing to prepare."""

    async def converse(self, job: Job) -> Outcome:
        turns = [TurnRecord(turn=t.turn, user_message=t.user_message or t.objective, answer="340 litres",
                            performance=TurnPerformance(wall_s=0.1)) for t in job.scenario.turns]
        return Outcome(transcript=Transcript(scenario_id=job.scenario.id, turns=turns))

    def interrupted(self, key: str) -> None:
        """No turn is ever under way: each outcome comes whole."""

    async def close(self) -> None:
        """Nothing to release."""


def finished_run(results: Path, llm_url: str, served_model: str | None, *, extra_id: str | None = None,
                 target_url: str | None = None) -> Path:
    settings = RunSettings(run_id=new_run_id(), suite_paths=[SUITE / "scenarios"], corpus_root=SUITE / "corpus",
                           results_root=results, backend=Backend.LOCAL, llm_url=llm_url,
                           judge_provider="none", simulator_mode="scripted", target_url=target_url)  # fmt: skip
    suite = load_suite([SUITE / "scenarios"], SUITE / "corpus").scenarios
    writer = RunWriter(settings.run_dir, run_id=settings.run_id, config=RunConfig(served_model=served_model, judge_model="judge-a"),
                       order=declared_order([s.id for s in suite]))
    engine = Engine(settings, suite, Recorded(), None, writer, say=lambda line: None)
    if extra_id is not None:  # a result of a scenario this suite does not have
        foreign = suite[0].model_copy(update={"id": extra_id})
        engine.scenarios = [*suite, foreign]
    asyncio.run(engine.run())
    settings.save(settings.run_dir)
    return settings.run_dir


def resume(run_dir: Path, *flags: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["run", "--resume", str(run_dir), *flags],
                                env={"ANTHROPIC_API_KEY": "", "COLUMNS": "200"})
    assert "Traceback" not in result.output, result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


@pytest.fixture
def same_model(llm_url: str) -> str:
    served = served_model_of(llm_identity(llm_url))
    assert served, "the llm-cpu server names no served model (else the check probes nothing)"
    return served


def test_resume_applies_concurrency_and_says_so(tmp_path: Path, llm_url: str, same_model: str) -> None:
    run_dir = finished_run(tmp_path, llm_url, same_model)
    code, out = resume(run_dir, "--concurrency", "2")
    assert code == 0, out
    assert "resume: applying --concurrency 2" in out and "concurrency 2" in out.split("resume:")[-1], out
    assert "now serves" not in out  # the same model: nothing to refuse (null test)


def test_resume_refuses_flags_it_will_not_change_in_one_line(tmp_path: Path, llm_url: str, same_model: str) -> None:
    run_dir = finished_run(tmp_path, llm_url, same_model)
    code, out = resume(run_dir, "--trials", "3", "--simulator", "local", "--concurrency", "2")
    assert code == 2, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, out
    assert "--trials" in lines[0] and "--simulator" in lines[0] and "--concurrency" not in lines[0]


def test_resume_against_another_served_model_exits_2_unless_allowed(tmp_path: Path, llm_url: str) -> None:
    run_dir = finished_run(tmp_path, llm_url, "Qwen3-8B Q4_K_M by Lemonade Server 9.1.4")
    code, out = resume(run_dir)
    assert code == 2, out
    refusal = [line for line in out.splitlines() if "now serves" in line]
    assert len(refusal) == 1 and "Qwen3-8B" in refusal[0] and "--allow-model-change" in refusal[0], out
    code, out = resume(run_dir, "--allow-model-change")
    assert code == 0, out
    assert "(--allow-model-change)" in out
    card = (run_dir / "scorecard.json").read_text()
    assert "resumed with another model" in card


def test_resume_names_the_results_of_scenarios_outside_the_suite(tmp_path: Path, llm_url: str, same_model: str) -> None:
    run_dir = finished_run(tmp_path, llm_url, same_model, extra_id="from_another_suite")
    code, out = resume(run_dir)
    assert code == 0, out
    assert "resume keeps 1 result(s) of scenarios not in this suite's selection: from_another_suite" in out


def test_allow_model_change_without_resume_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", str(SUITE / "scenarios"), "--allow-model-change"],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 2 and "only makes sense with --resume" in result.output


@pytest.mark.parametrize(("judge_model", "expected"), [("judge-a", 0), ("judge-b", 4)])
def test_a_baseline_of_other_models_is_its_own_outcome_not_infrastructure(
    tmp_path: Path, llm_url: str, same_model: str, judge_model: str, expected: int
) -> None:
    """--baseline (applied on resume): the same models compare (0, null test); another judge
    model is "not comparable", exit 4 — not 3, which says the infrastructure failed."""
    run_dir = finished_run(tmp_path, llm_url, same_model)
    card = json.loads((run_dir / "scorecard.json").read_text())
    card["config"]["judge_model"] = judge_model
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(card))
    code, out = resume(run_dir, "--baseline", str(baseline))
    assert code == expected, out
    assert ("not comparable" in out) == (expected == 4), out


def test_resume_of_an_attached_run_says_why_concurrency_stays_1(tmp_path: Path, llm_url: str, same_model: str) -> None:
    run_dir = finished_run(tmp_path, llm_url, same_model, target_url="http://127.0.0.1:9/mcp")
    code, out = resume(run_dir, "--concurrency", "2")
    assert "resume: applying --concurrency 2" in out, out
    assert "concurrency 1, not 2: an attached Agent UI is one UI" in out, out
    assert code == 0, out
