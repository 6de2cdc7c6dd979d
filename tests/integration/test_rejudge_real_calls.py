"""`--rejudge K` asks the judge K times, and the calibration gate is asked live every run.

The judge is an OpenAI-compatible HTTP server on loopback (the stand-in of
test_judge_cache_servers.py): it labels every calibration example correctly, so it passes the
gate, and grades the scenarios' own turns either from a seeded coin (a judge that answers at
random) or from a fixed table (a deterministic judge). The conversations are saved transcripts
rejudged by `trialbox rescore` through the real engine, ModelJudge, OpenAIBackend and cache.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_judge_cache_servers import QUESTIONS, RUBRIC_BY_SCENARIO, WEIGHTS_A, honest_reply, serving
from typer.testing import CliRunner

from runner.cli.app import app
from runner.records.judgments import DIMENSIONS
from runner.records.status import Status
from runner.records.transcript import IndexedDocument, Transcript, TurnPerformance, TurnRecord
from runner.report import (
    RunConfig,
    RunWriter,
    ScenarioResult,
    Trace,
    declared_order,
    read_scorecard,
)
from runner.report._models import Scorecard
from runner.run.settings import RunSettings, new_run_id
from runner.scenarios import load_suite

pytestmark = pytest.mark.integration

SUITE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "engine_suite"
SCENARIO_ID = re.compile(r"SCENARIO: (\S+)")
REPEATS = 3


def saved_run(tmp_path: Path) -> Path:
    """Every fixture scenario answered once, as `trialbox run --judge-provider none` saves it."""
    suite = load_suite([SUITE / "scenarios"], SUITE / "corpus")
    assert not suite.errors, suite.errors
    run = RunSettings(run_id=new_run_id(), suite_paths=[SUITE / "scenarios"], corpus_root=SUITE / "corpus",
                      results_root=tmp_path / "results", judge_provider="none", concurrency=1)
    run.run_dir.mkdir(parents=True)
    run.save(run.run_dir)
    ids = [s.id for s in suite.scenarios]
    writer = RunWriter(run.run_dir, run_id=run.run_id, config=RunConfig(), order=declared_order(ids))
    for scenario in suite.scenarios:
        transcript = Transcript(
            scenario_id=scenario.id,
            indexed=[IndexedDocument(corpus_doc=d.corpus_doc, path=d.path, chunks=3)
                     for d in scenario.setup_documents],
            turns=[TurnRecord(turn=t.turn, user_message=t.user_message or t.objective, answer="An answer.",
                              performance=TurnPerformance(wall_s=1.0)) for t in scenario.turns])
        writer.add(Trace(run_id=run.run_id, result=ScenarioResult(id=scenario.id, status=Status.NOT_JUDGED),
                         transcript=transcript))
    writer.close()
    return run.run_dir


class Grader:
    """Calibration honestly; each scenario turn PASS-grade or FAIL-grade from `passes(id)`.
    Counts the scenario judgings it was asked (one verdict request per judging)."""

    def __init__(self, passes: Callable[[str], bool]) -> None:
        self.passes = passes
        self.verdicts: Counter[str] = Counter()
        self.calibration_requests = 0

    def __call__(self, schema_name: str, case: str) -> dict[str, Any]:
        found = SCENARIO_ID.match(case)
        scenario = found.group(1) if found else None
        if scenario is None or scenario in RUBRIC_BY_SCENARIO:
            self.calibration_requests += 1
            return honest_reply(schema_name, case)
        if schema_name == "scenario_verdict":
            self.verdicts[scenario] += 1
            return {"verdict": "PASS", "root_cause": None, "recommended_fix": None}
        value = 9.0 if self.passes(scenario) else 1.0
        return {**dict.fromkeys(DIMENSIONS, value), "overall_score": value, "failure_category": "none",
                "reasoning": "Graded."}


def rescored(run_dir: Path, judge_url: str, before: set[Path]) -> Scorecard:
    result = CliRunner().invoke(app, ["rescore", str(run_dir), "--judge-url", judge_url,
                                      "--rejudge", str(REPEATS)])
    assert result.exit_code == 0, result.output
    [new] = set(run_dir.parent.iterdir()) - before - {run_dir}
    return read_scorecard(new / "scorecard.json")


@pytest.fixture
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("TRIALBOX_JUDGE_URL", raising=False)


@pytest.mark.usefixtures("isolated_cache")
def test_a_judge_that_grades_at_random_is_asked_k_times_and_its_agreement_reads_low(tmp_path: Path) -> None:
    coin = random.Random(1)  # seeded: the same "random" judge on every run of the test
    grader = Grader(lambda scenario: coin.random() < 0.5)
    run_dir = saved_run(tmp_path)
    with serving(grader, WEIGHTS_A) as server:
        card = rescored(run_dir, server.url, {run_dir})
        # Every scenario judged K times, each a real call (the cache was empty, and repeat i is
        # never served repeat j's reply).
        assert set(grader.verdicts.values()) == {REPEATS} and len(grader.verdicts) == len(card.scenarios)
        agreement = card.judge_agreement
        assert agreement is not None and agreement.repeats == REPEATS
        assert agreement.kappa is not None and agreement.kappa < 0.5, agreement
        assert agreement.flipped_fraction > 0 and agreement.unstable_scenarios
        assert agreement.temperature == 0.0 and agreement.seed is None  # what every request carried
        assert agreement.replies > 0 and agreement.cached_replies == 0
        first = agreement

        # A second run: calibration is asked again (the gate is never served from disk); the
        # scenario judgings are served, each from its own repeat's stored reply.
        asked, verdicts = grader.calibration_requests, sum(grader.verdicts.values())
        assert asked == QUESTIONS
        again = rescored(run_dir, server.url, set(run_dir.parent.iterdir()))
        assert grader.calibration_requests == 2 * QUESTIONS
        assert sum(grader.verdicts.values()) == verdicts
        assert again.judge_agreement is not None
        assert again.judge_agreement.pairwise == first.pairwise
        # ...and the summary says so: this κ is a replay, not a measurement.
        assert again.judge_agreement.cached_replies == again.judge_agreement.replies == first.replies
        summary = (run_dir.parent / again.run_id / "summary.md").read_text()
        assert (f"- **Replies from the judge cache:** {first.replies} of {first.replies} — "
                "replayed from an earlier run") in summary


@pytest.mark.usefixtures("isolated_cache")
def test_a_deterministic_judge_reads_perfect_agreement(tmp_path: Path) -> None:
    grader = Grader(lambda scenario: scenario == "orchard_apples")
    run_dir = saved_run(tmp_path)
    with serving(grader, WEIGHTS_A) as server:
        card = rescored(run_dir, server.url, {run_dir})
    assert set(grader.verdicts.values()) == {REPEATS}
    agreement = card.judge_agreement
    assert agreement is not None and agreement.kappa == 1.0
    assert agreement.flipped_fraction == 0.0 and agreement.unstable_scenarios == []
