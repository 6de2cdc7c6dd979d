"""A turn's speed stands for its build only when every request was forced and answered by its
own side: the front door's records say so (forced_calls, served_by), the report leaves the
rest out and counts them."""

from __future__ import annotations

from runner.conversation import turn_performance_from_meter
from runner.report._driver_samples import OTHER_SIDE, UNFORCED, incomparable_turns, not_comparable
from runner.report._models import Scorecard


def _record(seq: int, decoding: str | None, upstream: str | None) -> dict[str, object]:
    return {"seq": seq, "route": "/api/v1/chat/completions", "status": 200, "started_at": seq,
            "time_to_first_token_s": 0.5, "decode_s": 1.0, "completion_tokens": 11,
            "prompt_tokens": 5, "queue_wait_s": 0.0, "decoding": decoding, "upstream": upstream}


def test_the_meter_records_say_how_many_calls_were_forced_and_who_answered() -> None:
    perf = turn_performance_from_meter(
        [_record(1, "repeatable", "A"), _record(2, None, "B")], wall_s=3.0)
    assert (perf.llm_calls, perf.forced_calls, perf.served_by) == (2, 1, ["A", "B"])


def _card(side: str | None, decoding: str, turns: list[tuple[int, int, list[str]]]) -> Scorecard:
    extra: dict[str, object] = {"decoding": decoding}
    if side:
        extra["ab"] = {"side": side}
    return Scorecard.model_validate({
        "run_id": "r", "timestamp": "2026-12-02T20:00:00Z", "config": {"extra": extra},
        "scenarios": [{"id": "s", "status": "PASS", "turns": [
            {"turn": i + 1, "performance": {"wall_s": 1.0, "llm_calls": calls,
                                            "forced_calls": forced, "served_by": served}}
            for i, (calls, forced, served) in enumerate(turns)]}]})


def test_an_unforced_or_other_side_turn_is_left_out_and_counted() -> None:
    card = _card("B", "repeatable (greedy, seed 7, forced at the LLM's front door)",
                 [(2, 2, ["B"]), (2, 1, ["B"]), (1, 1, ["A"])])
    reasons = [not_comparable(card, t) for t in card.scenarios[0].turns]
    assert reasons == [None, UNFORCED, OTHER_SIDE]
    assert incomparable_turns(card) == {UNFORCED: 1, OTHER_SIDE: 1}


def test_a_sampled_run_outside_an_ab_keeps_every_turn() -> None:
    card = _card(None, "sampled (the agent's own settings)", [(2, 0, []), (1, 0, ["A"])])
    assert incomparable_turns(card) == {}
