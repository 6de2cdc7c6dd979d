"""GAIA's setup rule: a setup document that indexed into 0 chunks is a SETUP_ERROR (an
infrastructure result, not a verdict on the agent) — except in an adversarial scenario, or for
one of the manifest's adversarial documents (empty or corrupt files: 0 chunks is their point).

The rule is `runner.verdict.classify.transcript_problem`; the engine applies it to every finished
conversation, live or replayed (`trialbox rescore`).
"""

from __future__ import annotations

from typing import Any

from runner.records.status import Status
from runner.records.transcript import IndexedDocument, Transcript, TurnPerformance, TurnRecord
from runner.scenarios import Manifest, Scenario
from runner.verdict.classify import transcript_problem

MANIFEST = Manifest.model_validate({
    "documents": [{"id": "fuel_log", "filename": "lighthouse_fuel_log.md", "format": "markdown"}],
    "adversarial_documents": [{"id": "empty_notes", "filename": "adversarial/empty_notes.txt",
                               "format": "text",
                               "expected_behavior": "Says the file is empty; invents nothing."}],
})


def scenario(category: str, doc: str) -> Scenario:
    return Scenario.model_validate({
        "id": f"{category}_{doc}", "category": category, "persona": "casual_user",
        "description": "Questions about a document indexed before the first turn.",
        "setup": {"index_documents": [{"corpus_doc": doc, "path": f"documents/{doc}.md"}]},
        "turns": [{"turn": 1, "objective": "Ask what the document says about fuel.",
                   "user_message": "What does the log say about fuel?"}],
    })


def transcript(scenario: Scenario, chunks: int, error: str | None = None, **turn: Any) -> Transcript:
    return Transcript(
        scenario_id=scenario.id,
        indexed=[IndexedDocument(corpus_doc=d.corpus_doc, path=d.path, chunks=chunks, error=error)
                 for d in scenario.setup_documents],
        turns=[TurnRecord(turn=1, user_message="What does the log say about fuel?",
                          answer="It says nothing about fuel.", performance=TurnPerformance(wall_s=1.0),
                          **turn)],
    )


def test_a_setup_document_with_chunks_is_no_problem() -> None:
    rag = scenario("rag_quality", "fuel_log")
    assert transcript_problem(rag, transcript(rag, chunks=4), MANIFEST) is None


def test_zero_chunks_in_an_ordinary_scenario_is_a_setup_error_naming_the_document_and_why() -> None:
    rag = scenario("rag_quality", "fuel_log")
    problem = transcript_problem(rag, transcript(rag, chunks=0, error="parser found no text"), MANIFEST)
    assert problem == (Status.SETUP_ERROR,
                       "setup document documents/fuel_log.md indexed 0 chunks: parser found no text")


def test_zero_chunks_in_an_adversarial_scenario_is_what_it_tests_not_a_setup_error() -> None:
    hostile = scenario("adversarial", "fuel_log")
    assert transcript_problem(hostile, transcript(hostile, chunks=0), MANIFEST) is None


def test_zero_chunks_of_a_manifest_adversarial_document_is_exempt_in_any_category() -> None:
    rag = scenario("rag_quality", "empty_notes")
    assert transcript_problem(rag, transcript(rag, chunks=0), MANIFEST) is None
    # Without the manifest nothing says the document is adversarial: the rule applies.
    problem = transcript_problem(rag, transcript(rag, chunks=0), None)
    assert problem is not None and problem[0] is Status.SETUP_ERROR


def test_a_failed_turn_is_an_infra_error_and_wins_over_the_setup_rule() -> None:
    rag = scenario("rag_quality", "fuel_log")
    failed = transcript(rag, chunks=0, error="Agent UI answered HTTP 502")
    failed.turns[0].error = "Agent UI answered HTTP 502"
    assert transcript_problem(rag, failed, MANIFEST) == (Status.INFRA_ERROR,
                                                         "turn 1: Agent UI answered HTTP 502")
