"""Evidence read from a transcript: causal order, positions across turns, JSON, helpers."""

from __future__ import annotations

import json

from runner.records.evidence import (
    Evidence,
    first_difference,
    in_order_matches,
    is_exact,
    is_in_order_subsequence,
)
from runner.records.transcript import (
    IndexedDocument,
    ToolCall,
    Transcript,
    TurnPerformance,
    TurnRecord,
)


def _transcript() -> Transcript:
    perf = TurnPerformance(wall_s=2.0)
    return Transcript(
        scenario_id="bakery_flour_stock",
        indexed=[IndexedDocument(corpus_doc="inv", path="/corpus/documents/inv.md", chunks=4)],
        turns=[
            TurnRecord(turn=1, user_message="How much flour?", answer="1,240 kg.",
                       performance=perf, tool_calls=[
                           ToolCall(name="index_document", arguments={"filepath": "inv.md"},
                                    result_summary="4 chunks"),
                           ToolCall(name="query_documents", arguments={"query": "flour"},
                                    result_summary="bread flour 1,240 kg")]),
            TurnRecord(turn=2, user_message="And sugar?", answer="", performance=perf,
                       error="agent UI returned 502", tool_calls=[
                           ToolCall(name="query_documents", arguments={"query": "sugar"},
                                    error="RAG store unavailable")]),
        ])


def test_calls_are_in_causal_order_with_positions_across_turns() -> None:
    evidence = Evidence.from_transcript(_transcript())
    assert [(c.position, c.turn, c.name) for c in evidence.trajectory] == [
        (1, 1, "index_document"), (2, 1, "query_documents"), (3, 2, "query_documents")]
    assert evidence.turn(1) is not None and evidence.turn(1).tool_names == [  # type: ignore[union-attr]
        "index_document", "query_documents"]
    assert evidence.turn(3) is None


def test_failures_answers_and_turn_errors_are_kept() -> None:
    evidence = Evidence.from_transcript(_transcript())
    failed = evidence.trajectory[2]
    assert failed.failed and failed.error == "RAG store unavailable"
    assert not evidence.trajectory[0].failed
    assert evidence.trajectory[1].result_summary == "bread flour 1,240 kg"
    assert evidence.final_answers == {1: "1,240 kg.", 2: ""}
    assert evidence.turns[1].error == "agent UI returned 502"


def test_evidence_round_trips_through_json() -> None:
    evidence = Evidence.from_transcript(_transcript())
    text = json.dumps(evidence.model_dump(mode="json"))
    assert Evidence.model_validate_json(text) == evidence


def test_call_description_is_short() -> None:
    evidence = Evidence.from_transcript(_transcript())
    assert evidence.trajectory[1].describe() == 'query_documents(query="flour")'
    long = evidence.trajectory[1].model_copy(update={"arguments": {"query": "x" * 200}})
    assert len(long.describe(width=40)) == 40 and long.describe(width=40).endswith("…)")


def test_in_order_subsequence_versus_exact() -> None:
    actual = ["a", "x", "b", "y", "c"]
    assert is_in_order_subsequence(["a", "b", "c"], actual)
    assert not is_exact(["a", "b", "c"], actual)
    assert is_exact(actual, list(actual))
    assert not is_in_order_subsequence(["b", "a"], actual)
    assert is_in_order_subsequence([], actual)
    assert not is_in_order_subsequence(["a", "a"], actual)  # one call cannot match two steps


def test_in_order_matching_picks_earliest_calls() -> None:
    # Greedy earliest matching must not miss a later possible match.
    assert in_order_matches(["a", "b"], ["a", "a", "b"]) == [0, 2]
    assert in_order_matches(["a", "b", "c"], ["b", "a", "c"]) == [1]


def test_first_difference() -> None:
    assert first_difference(["a", "b"], ["a", "b"]) is None
    assert first_difference(["a", "b"], ["a", "c"]) == 1
    assert first_difference(["a"], ["a", "b"]) == 1
    assert first_difference([], []) is None


def test_helpers_accept_a_matcher() -> None:
    def same_initial(step: str, call: str) -> bool:
        return step[0] == call[0]

    assert is_exact(["alpha", "beta"], ["apple", "banana"], same_initial)
    assert not is_exact(["alpha", "beta"], ["apple", "cherry"], same_initial)


def test_the_agent_uis_own_indexing_step_is_not_the_agents_choice() -> None:
    from runner.records.evidence import UI_INDEXING_STEP, Evidence
    from runner.records.transcript import ToolCall, Transcript, TurnPerformance, TurnRecord

    record = TurnRecord(turn=1, user_message="q", answer="a", performance=TurnPerformance(wall_s=1.0),
                        tool_calls=[ToolCall(name=UI_INDEXING_STEP), ToolCall(name="query_documents")])
    evidence = Evidence.from_transcript(Transcript(scenario_id="s", turns=[record]))
    assert [call.name for call in evidence.trajectory] == ["query_documents"]
    assert evidence.trajectory[0].position == 1
