"""A scenario whose setup document is not in the corpus (a real-world document fetched at build
time, absent on this machine) is SKIPPED_NO_DOCUMENT before any sandbox opens: no failure, no
infrastructure error, and a run of such scenarios completes (exit 0).

The conversation source is the real `LiveConversations` over a real `LocalBackend` whose "GAIA"
is /bin/false: had it tried to open a sandbox, the result would be an INFRA_ERROR (no Agent UI
starts), not the skip.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from runner.conversation.simulate import ScriptedSimulator
from runner.records.status import Status
from runner.report import RunConfig, RunWriter, declared_order
from runner.run.conversations import LiveConversations
from runner.run.engine import Engine
from runner.run.errors import EXIT_OK
from runner.run.gate import exit_code
from runner.run.jobs import Job
from runner.run.settings import RunSettings
from runner.sandbox.local import LocalBackend
from runner.scenarios import Scenario

SUITE = Path(__file__).resolve().parents[1] / "fixtures" / "engine_suite"


def scenario(path: str) -> Scenario:
    return Scenario.model_validate({
        "id": "annual_report_revenue", "category": "rag_quality", "persona": "casual_user",
        "description": "Revenue from a published annual report.",
        "setup": {"index_documents": [{"path": path}]},
        "turns": [{"turn": 1, "objective": "Ask for the 2025 revenue.",
                   "user_message": "What was the revenue in 2025?"}],
    })


def live(tmp_path: Path) -> tuple[RunSettings, LiveConversations]:
    settings = RunSettings(run_id="20261130-130000-d0c5", suite_paths=[SUITE / "scenarios"],
                           corpus_root=SUITE / "corpus", results_root=tmp_path, judge_provider="none")
    # /bin/false in place of GAIA's interpreter: a sandbox it starts exits at once.
    backend = LocalBackend("http://127.0.0.1:9", SUITE / "corpus", gaia_python="/bin/false")
    return settings, LiveConversations(settings, backend, ScriptedSimulator())


def test_a_missing_document_skips_the_scenario_naming_the_document(tmp_path: Path) -> None:
    _, conversations = live(tmp_path)
    outcome = asyncio.run(conversations.converse(Job(scenario("real_world/annual_report_2025.pdf"), None)))
    assert outcome.infra is Status.SKIPPED_NO_DOCUMENT
    assert outcome.error == "document(s) not in the corpus: real_world/annual_report_2025.pdf"
    assert outcome.transcript is None


def test_a_document_that_is_there_is_not_skipped(tmp_path: Path) -> None:
    """The same source with the document present goes on to open a sandbox (and fails here, as
    nothing can run): the skip above was the document's absence, nothing else."""
    _, conversations = live(tmp_path)
    outcome = asyncio.run(conversations.converse(Job(scenario("documents/orchard_report.md"), None)))
    assert outcome.infra is Status.INFRA_ERROR


def test_a_run_of_skipped_scenarios_records_them_and_completes(tmp_path: Path) -> None:
    settings, conversations = live(tmp_path)
    skipped = scenario("real_world/annual_report_2025.pdf")
    writer = RunWriter(settings.run_dir, run_id=settings.run_id, config=RunConfig(),
                       order=declared_order([skipped.id]))
    card = asyncio.run(Engine(settings, [skipped], conversations, None, writer, say=lambda line: None).run())
    [result] = card.scenarios
    assert result.status is Status.SKIPPED_NO_DOCUMENT
    assert card.summary.infrastructure == 1 and card.summary.failed == 0
    assert exit_code(card, None) == EXIT_OK
