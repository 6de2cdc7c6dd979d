"""Run control, with the conversation source and the judge as in-memory doubles.

The real-process tests (tests/integration, tests/containers) show the engine drives real
sandboxes; these pin down its rules — streaks, budgets, judge failures, skips, cancellation,
resume — with every outcome chosen by the test, the way tau2-bench tests its orchestrator.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from runner.judge import JudgeError
from runner.records.judgments import DimensionScores, JudgeUsage, Judgments, TurnJudgment
from runner.records.status import Status
from runner.records.transcript import IndexedDocument, Transcript, TurnPerformance, TurnRecord
from runner.report import RunConfig, RunWriter, declared_order
from runner.run.engine import Engine, cause_of
from runner.run.errors import EXIT_INFRA, EXIT_OK
from runner.run.gate import exit_code
from runner.run.jobs import Job, Outcome
from runner.run.settings import RunSettings
from runner.scenarios import Scenario, load_suite

SUITE = Path(__file__).parents[1] / "fixtures" / "engine_suite"


def scenarios() -> list[Scenario]:
    suite = load_suite([SUITE / "scenarios"], SUITE / "corpus")
    assert not suite.errors, suite.errors
    return suite.scenarios


def transcript_for(scenario: Scenario, answer: str = "340 litres; Marta Ilves; 12,600 kg; 14 batches") -> Transcript:
    return Transcript(
        scenario_id=scenario.id,
        indexed=[IndexedDocument(corpus_doc=d.corpus_doc, path=d.path, chunks=3)
                 for d in scenario.setup_documents],
        turns=[TurnRecord(turn=t.turn, user_message=t.user_message or t.objective, answer=answer,
                          performance=TurnPerformance(wall_s=0.1)) for t in scenario.turns],
    )


class Conversations:
    """A conversation source whose outcome per scenario id is chosen by the test."""

    live = True

    def __init__(self, outcome: Callable[[Job], Outcome] | None = None) -> None:
        self.outcome = outcome or (lambda job: Outcome(transcript=transcript_for(job.scenario)))
        self.started: list[str] = []
        self.planned: list[str] | None = None  # what the engine announced, in order
        self.closed = 0

    async def prepare(self, jobs: Sequence[Job]) -> None:
        self.planned = [job.key for job in jobs]

    async def converse(self, job: Job) -> Outcome:
        self.started.append(job.key)
        await asyncio.sleep(0)
        return self.outcome(job)

    def interrupted(self, key: str) -> None:
        """No turn is ever under way: each outcome comes whole."""

    async def close(self) -> None:
        self.closed += 1


class Judge:
    """Scores every turn `score` on every dimension; optionally fails or costs money."""

    judge_model = "claude-sonnet-4-6"

    def __init__(self, score: float = 8.0, fail: bool = False, input_tokens: int = 0) -> None:
        self.score, self.fail, self.input_tokens = score, fail, input_tokens

    async def judge(self, scenario: Scenario, transcript: Transcript, repeat: int = 0) -> Judgments:
        if self.fail:
            raise JudgeError("reply did not match the schema twice")
        dims = DimensionScores(**{name: self.score for name in DimensionScores.model_fields})
        return Judgments(
            judge_model=self.judge_model,
            turns=[TurnJudgment(turn=t.turn, scores=dims, reasoning="ok") for t in transcript.turns],
            usage=JudgeUsage(input_tokens=self.input_tokens),
        )


def make_engine(tmp_path: Path, conversations: Conversations, judge: Judge | None = None,
                writer: RunWriter | None = None, **settings: object) -> Engine:
    run_settings = RunSettings(run_id="20261130-100000-abcd", suite_paths=[SUITE / "scenarios"],
                               corpus_root=SUITE / "corpus", results_root=tmp_path, **settings)
    suite = scenarios()
    writer = writer or RunWriter(run_settings.run_dir, run_id=run_settings.run_id, config=RunConfig(),
                                 order=declared_order([s.id for s in suite]))
    return Engine(run_settings, suite, conversations, judge, writer, say=lambda line: None)


def statuses(card: object) -> dict[str, Status]:
    return {r.key: r.status for r in card.scenarios}  # type: ignore[attr-defined]


def test_a_judged_run_passes_and_lists_scenarios_in_declared_order(tmp_path: Path) -> None:
    card = asyncio.run(make_engine(tmp_path, Conversations(), Judge(8.0)).run())
    assert [r.id for r in card.scenarios] == [s.id for s in scenarios()]
    assert set(statuses(card).values()) == {Status.PASS}
    assert exit_code(card, None) == EXIT_OK


class ReverseFinishing(Conversations):
    """Later scenarios finish first: the first one waits until every other one has finished."""

    def __init__(self, total: int) -> None:
        super().__init__()
        self.total = total
        self.finished: list[str] = []

    async def converse(self, job: Job) -> Outcome:
        position = len(self.started)
        self.started.append(job.key)
        while len(self.finished) < self.total - 1 - position:
            await asyncio.sleep(0)
        self.finished.append(job.key)
        return self.outcome(job)


def test_scenarios_finishing_out_of_order_are_listed_in_declared_order(tmp_path: Path) -> None:
    declared = [s.id for s in scenarios()]
    source = ReverseFinishing(len(declared))
    engine = make_engine(tmp_path, source, concurrency=len(declared))
    card = asyncio.run(engine.run())
    assert source.finished == list(reversed(source.started))  # each started one finished last
    assert [r.id for r in card.scenarios] == declared
    on_disk = json.loads((engine.settings.run_dir / "scorecard.json").read_text())
    assert [r["id"] for r in on_disk["scenarios"]] == declared


def test_judge_failure_is_errored_not_a_score(tmp_path: Path) -> None:
    card = asyncio.run(make_engine(tmp_path, Conversations(), Judge(fail=True)).run())
    assert set(statuses(card).values()) == {Status.ERRORED}
    assert all("judge reply rejected" in (r.error or "") for r in card.scenarios)


def test_judge_spend_over_the_budget_is_budget_exceeded(tmp_path: Path) -> None:
    # 1M input tokens of Sonnet cost $3: far above a $0.01 budget.
    engine = make_engine(tmp_path, Conversations(), Judge(input_tokens=1_000_000), budget_usd=0.01)
    card = asyncio.run(engine.run())
    assert set(statuses(card).values()) == {Status.BUDGET_EXCEEDED}
    assert "exceeded the $0.0100 budget" in (card.scenarios[0].error or "")


def test_three_identical_infrastructure_errors_stop_the_run(tmp_path: Path) -> None:
    # The causes differ only by the scenario's own network name: the rule must still fire.
    def broken(job: Job) -> Outcome:
        return Outcome(infra=Status.INFRA_ERROR,
                       error=f"APIError: network trialbox-{job.key}-net not found")

    conversations = Conversations(broken)
    engine = make_engine(tmp_path, conversations, trials=2)
    card = asyncio.run(engine.run())
    found = list(statuses(card).values())
    assert found.count(Status.INFRA_ERROR) == 3
    assert found.count(Status.NOT_RUN) == len(found) - 3
    assert len(conversations.started) == 3
    # The source heard the whole plan first, and was closed although the run stopped early.
    assert conversations.planned == [f"{s.id}__trial{t}" for s in scenarios() for t in (1, 2)]
    assert conversations.closed == 1
    assert exit_code(card, None) == EXIT_INFRA
    assert any("identical infrastructure errors" in w for w in card.warnings)


def test_cause_of_drops_names_ids_addresses_and_durations() -> None:
    one = cause_of("ConnectError: trialbox-a1b2-orchard-ui at 172.19.0.3:4200 after 91.2 s")
    two = cause_of("ConnectError: trialbox-ff00-lighthouse-ui at 172.21.0.2:4200 after 1.3 s")
    assert one == two


def test_a_dead_llm_server_ends_the_run_before_the_next_sandbox(tmp_path: Path) -> None:
    answers = iter([None, "http://llm/api/v1/health: ConnectError"])

    async def health() -> str | None:
        return next(answers, "http://llm/api/v1/health: ConnectError")

    conversations = Conversations()
    engine = make_engine(tmp_path, conversations)
    engine.llm_health = health
    card = asyncio.run(engine.run())
    assert len(conversations.started) == 1
    assert list(statuses(card).values()).count(Status.NOT_RUN) == len(scenarios()) - 1
    assert exit_code(card, None) == EXIT_INFRA
    assert any("LLM server stopped answering" in w for w in card.warnings)


def test_skips_are_recorded_and_are_not_failures(tmp_path: Path) -> None:
    def skip(job: Job) -> Outcome:
        return Outcome(infra=Status.SKIPPED_NO_DOCUMENT, error="document(s) not in the corpus: x.pdf")

    card = asyncio.run(make_engine(tmp_path, Conversations(skip)).run())
    assert set(statuses(card).values()) == {Status.SKIPPED_NO_DOCUMENT}
    assert exit_code(card, None) == EXIT_OK


def test_cancel_records_unfinished_jobs_not_run_and_resume_runs_only_them(tmp_path: Path) -> None:
    async def cancel_after_first() -> Engine:
        conversations = Conversations()
        engine = make_engine(tmp_path, conversations)
        task = asyncio.create_task(engine.run())
        while not engine.writer.results or all(r.status is Status.NOT_RUN for r in engine.writer.results):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert conversations.closed == 1, "a cancelled run must release what it prepared"
        return engine

    first = asyncio.run(cancel_after_first())
    run_dir = first.settings.run_dir
    saved = json.loads((run_dir / "scorecard.json").read_text())
    not_run = [r["id"] for r in saved["scenarios"] if r["status"] == "NOT_RUN"]
    assert not_run, "the cancelled run must record what it did not finish"

    again = Conversations()
    resumed = make_engine(tmp_path, again, writer=RunWriter.resume(run_dir))
    card = asyncio.run(resumed.run())
    assert sorted(again.started) == sorted(not_run)
    assert again.planned == not_run  # resume prepares only what it will run
    assert Status.NOT_RUN not in statuses(card).values()
    assert exit_code(card, None) == EXIT_OK


def test_resume_reruns_infrastructure_errors_only_when_asked(tmp_path: Path) -> None:
    flaky = Conversations(lambda job: Outcome(infra=Status.TIMEOUT, error="no result within 1 s"))
    first = make_engine(tmp_path, flaky, max_identical_infra_errors=99)
    asyncio.run(first.run())
    run_dir = first.settings.run_dir

    untouched = Conversations()
    asyncio.run(make_engine(tmp_path, untouched, writer=RunWriter.resume(run_dir)).run())
    assert untouched.started == []

    retried = Conversations()
    card = asyncio.run(make_engine(tmp_path, retried, writer=RunWriter.resume(run_dir),
                                   retry_errors=True).run())
    assert len(retried.started) == len(scenarios())
    assert Status.TIMEOUT not in statuses(card).values()


def test_collect_warning_keeps_the_conversation(tmp_path: Path) -> None:
    def collected_badly(job: Job) -> Outcome:
        return Outcome(transcript=transcript_for(job.scenario),
                       warning="artifacts not collected: APIError: 409 container is not running")

    card = asyncio.run(make_engine(tmp_path, Conversations(collected_badly), Judge(8.0)).run())
    assert set(statuses(card).values()) == {Status.PASS}
    assert any("artifacts not collected" in w for w in card.warnings)


def test_rejudging_k_times_costs_k_judgings_in_the_scorecard_and_the_budget(tmp_path: Path) -> None:
    # 100k input tokens of claude-sonnet-4-6 at $3 per million = $0.30 per judging.
    engine = make_engine(tmp_path, Conversations(), Judge(input_tokens=100_000), rejudge=3)
    card = asyncio.run(engine.run())
    assert all(r.cost_usd == pytest.approx(0.90) for r in card.scenarios)
    over = make_engine(tmp_path / "b", Conversations(), Judge(input_tokens=100_000), rejudge=3,
                       budget_usd=0.5)
    assert set(statuses(asyncio.run(over.run())).values()) == {Status.BUDGET_EXCEEDED}


def test_the_progress_eta_is_the_model_of_the_plan_and_a_skipped_job_leaves_it(tmp_path: Path) -> None:
    import io

    from runner.run.engine import work_of

    first = scenarios()[0].id

    def outcome(job: Job) -> Outcome:
        if job.scenario.id == first:
            return Outcome(infra=Status.SKIPPED_NO_DOCUMENT, error="document(s) not in the corpus")
        return Outcome(transcript=transcript_for(job.scenario))

    engine = make_engine(tmp_path, Conversations(outcome))
    engine.progress_stream = io.StringIO()
    jobs = engine.plan()
    asyncio.run(engine.run())
    assert engine._eta is not None
    # Every job was planned with its turns and documents' bytes; the skipped one was dropped.
    assert [work.key for work in engine._eta.plan] == [job.key for job in jobs if job.key != first]
    planned = {job.key: work_of(job, engine.settings.corpus_root) for job in jobs}
    assert all(work.turns == len(job.scenario.turns) for job, work in zip(jobs, planned.values()))
    assert any(work.document_bytes > 0 for work in planned.values())
    assert engine._eta.remaining_s(0.0) == pytest.approx(0.0, abs=1e-9)  # nothing left at the end


def test_several_at_once_start_the_longest_expected_first_and_rows_keep_declared_order(
        tmp_path: Path) -> None:
    """A long job started last runs on alone after the rest: at --concurrency 2 the plan is
    ordered by the work the ETA's prior expects (turns, documents' bytes), most first."""
    declared = [s.id for s in scenarios()]
    assert declared == ["orchard_followup", "lighthouse_fuel", "orchard_apples"]
    one, two = Conversations(), Conversations()
    asyncio.run(make_engine(tmp_path / "one", one).run())
    card = asyncio.run(make_engine(tmp_path / "two", two, concurrency=2).run())
    assert one.planned == declared  # one at a time: the order changes no wall time
    # Equal turns; lighthouse_fuel's document is the largest (221 bytes against 191 each).
    assert two.planned == ["lighthouse_fuel", "orchard_followup", "orchard_apples"]
    assert two.started[:2] == ["lighthouse_fuel", "orchard_followup"]
    assert [r.id for r in card.scenarios] == declared


def test_a_job_whose_document_is_not_in_the_corpus_is_planned_at_no_cost(tmp_path: Path) -> None:
    """The run skips it before a sandbox (SKIPPED_NO_DOCUMENT), so the ETA knows from the start
    that it costs nothing, and the longest-first order puts it last."""
    from runner.run.engine import longest_first, work_of
    from runner.run.eta import Prior

    corpus = tmp_path / "corpus"
    shutil.copytree(SUITE / "corpus", corpus)
    followup, lighthouse, apples = scenarios()
    for document in lighthouse.setup_documents:
        (corpus / document.relative_path).unlink()
    gone = work_of(Job(lighthouse, None), corpus)
    assert gone.documents_missing and Prior().seconds(gone) == 0.0
    kept = work_of(Job(apples, None), corpus)
    assert not kept.documents_missing and Prior().seconds(kept) > 0
    ordered = longest_first([Job(lighthouse, None), Job(followup, None), Job(apples, None)], corpus)
    assert ordered[-1].key == "lighthouse_fuel"


def test_longest_first_weighs_turns_and_documents_and_keeps_ties_in_order() -> None:
    from runner.run.engine import longest_first

    followup, lighthouse, apples = scenarios()
    talkative = apples.model_copy(update={"turns": apples.turns * 4})  # 8 turns, small document
    jobs = [Job(followup, 1), Job(followup, 2), Job(lighthouse, None), Job(talkative, None)]
    ordered = longest_first(jobs, SUITE / "corpus")
    assert [job.key for job in ordered] == [
        "orchard_apples", "lighthouse_fuel", "orchard_followup__trial1", "orchard_followup__trial2"]
