"""summary.md's head says, for a run that asked for repeatable decoding, how many turns had a
request the front door did not force (a lease lapsed): until now only the driver report said so,
and a run read on its own looked repeatable."""

from __future__ import annotations

from runner.report import render_summary_md
from runner.report._driver_samples import UNFORCED, incomparable_turns
from runner.report._models import Scorecard

REPEATABLE = "repeatable (greedy, seed 7, forced at the LLM's front door)"
SAMPLED = "sampled (the agent's own settings)"


def _card(decoding: str, turns: list[tuple[int, int]]) -> Scorecard:
    """One scenario whose turns made (calls, forced) requests."""
    return Scorecard.model_validate({
        "run_id": "r", "timestamp": "2026-12-02T20:00:00Z",
        "config": {"extra": {"decoding": decoding}},
        "scenarios": [{"id": "s", "status": "PASS", "turns": [
            {"turn": i + 1, "performance": {"wall_s": 1.0, "llm_calls": calls,
                                            "forced_calls": forced, "served_by": ["A"]}}
            for i, (calls, forced) in enumerate(turns)]}]})


def _head(card: Scorecard) -> str:
    text = render_summary_md(card)
    return text[:text.index("## Scenarios")] if "## Scenarios" in text else text


def test_a_lapsed_lease_is_counted_in_the_head_of_summary_md() -> None:
    card = _card(REPEATABLE, [(2, 2), (2, 1), (1, 0), (0, 0)])
    head = _head(card)
    assert f"- **⚠️ Repeatable decoding lapsed:** 2 of 3 turn(s) with {UNFORCED}" in head
    # One definition: the driver report leaves out the very turns the summary counts.
    assert incomparable_turns(card) == {UNFORCED: 2}


def test_a_repeatable_run_with_every_request_forced_says_so() -> None:
    head = _head(_card(REPEATABLE, [(2, 2), (1, 1)]))
    assert "- **Repeatable decoding:** forced on every request of 2 turn(s)" in head
    assert "lapsed" not in head


def test_a_sampled_run_says_nothing_of_forcing() -> None:
    head = _head(_card(SAMPLED, [(2, 0)]))
    assert "Repeatable decoding" not in head
