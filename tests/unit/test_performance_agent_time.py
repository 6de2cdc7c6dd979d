"""The run's wall ÷ agent time counts the agent's own indexing as the agent's, not the harness's.

A null run (the scenario wall is exactly the agent's turns plus its indexing of a large
document: the harness took no time) must read 1.00 and report the indexing as a figure of its
own; a planted 2 s of harness per scenario must come out as 2 s per scenario. Before, the
indexing counted as harness time: a 6,110-chunk PDF made a run read 1.40.
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape

import pytest

from runner.records.transcript import SetupTimings, Transcript, TurnPerformance, TurnRecord
from runner.report import (
    RunConfig,
    ScenarioResult,
    Scorecard,
    build_scorecard,
    render_html,
    render_summary_md,
    scenario_result,
)
from runner.report._performance import indexing_text, overhead_parts

WHEN = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
INDEXING_S = 600.0  # a large PDF embedded by the Agent UI before the first turn
PLANTED_S = 2.0  # harness time added to each scenario's wall


def row(scenario_id: str, turn_walls: list[float], indexing_s: float | None,
        harness_s: float) -> ScenarioResult:
    """A scenario whose wall is its turns + its indexing + `harness_s` of harness time."""
    transcript = Transcript(
        scenario_id=scenario_id,
        setup=SetupTimings(pool_hit=True, waited_s=0.0, session_s=0.0, indexing_s=indexing_s),
        turns=[
            TurnRecord(turn=n, user_message="q", answer="a",
                       performance=TurnPerformance(wall_s=wall))
            for n, wall in enumerate(turn_walls, 1)
        ],
    )
    wall = sum(turn_walls) + (indexing_s or 0.0) + harness_s
    return scenario_result(scenario_id=scenario_id, transcript=transcript, wall_s=wall)


def card(rows: list[ScenarioResult]) -> Scorecard:
    return build_scorecard(run_id="20261201-090000-aa11", timestamp=WHEN,
                           config=RunConfig(agent_model="SmolLM2-135M-Instruct"), results=rows,
                           finished=True)


def suite(harness_s: float) -> list[ScenarioResult]:
    return [
        row("large_pdf", [12.0, 8.0], INDEXING_S, harness_s),
        row("small_doc", [5.0], 0.4, harness_s),
        row("no_documents", [7.0, 3.0], 0.0, harness_s),  # indexed nothing: 0.0 s timed
    ]


def test_null_no_harness_time_and_long_indexing_reads_one_and_reports_the_indexing():
    scorecard = card(suite(harness_s=0.0))
    perf = scorecard.performance
    assert perf.scenarios["large_pdf"].overhead_ratio == pytest.approx(1.0)
    assert perf.totals.overhead_ratio == pytest.approx(1.0)
    assert perf.totals.agent_indexing_s == pytest.approx(INDEXING_S + 0.4)
    # What the old formula (wall ÷ turns) said of the same run: the indexing as harness time.
    assert perf.totals.wall_s / perf.totals.agent_turn_s == pytest.approx(635.4 / 35)
    summary = render_summary_md(scorecard)
    assert "= 1.00 (635.4 s ÷ (35.0 s + 600.4 s) over 3 scenarios)" in summary
    indexing = ("the agent's own document indexing (in the Agent UI, agent time) = 600.4 s over "
                "2 of 3 scenarios (longest 600.0 s)")
    assert indexing == indexing_text(scorecard)
    assert f"- **{indexing}**" in summary
    assert escape(indexing) in render_html(scorecard)
    large = next(line for line in summary.splitlines() if line.startswith("| large_pdf |"))
    assert large.endswith("| 600.0 s | – | 1.00 |")


def test_planted_two_seconds_of_harness_per_scenario_is_found():
    parts = overhead_parts(card(suite(harness_s=PLANTED_S)).performance.scenarios.values())
    assert (parts.wall_s - parts.agent_s) / parts.scenarios == pytest.approx(PLANTED_S)
    assert parts.agent_indexing_s == pytest.approx(INDEXING_S + 0.4)
    null = overhead_parts(card(suite(harness_s=0.0)).performance.scenarios.values())
    assert (null.wall_s - null.agent_s) / null.scenarios == pytest.approx(0.0)
    # In the ratio: (635.4 + 6) ÷ 635.4; the small scenario alone shows it plainly.
    planted = card(suite(harness_s=PLANTED_S)).performance
    assert planted.totals.overhead_ratio == pytest.approx(641.4 / 635.4)
    assert planted.scenarios["small_doc"].overhead_ratio == pytest.approx(7.4 / 5.4)


def test_indexing_never_timed_or_never_needed_is_said_so():
    untimed = card([scenario_result(
        scenario_id="old_trace", wall_s=10.0,
        transcript=Transcript(scenario_id="old_trace", turns=[TurnRecord(
            turn=1, user_message="q", answer="a", performance=TurnPerformance(wall_s=4.0))]),
    )])
    assert indexing_text(untimed).endswith("= n/a (no scenario timed its indexing)")
    assert untimed.performance.totals.agent_indexing_s is None
    assert untimed.performance.totals.overhead_ratio == pytest.approx(2.5)  # unmeasured = none
    nothing = card([row("no_documents", [5.0], 0.0, harness_s=1.0)])
    assert indexing_text(nothing).endswith("= 0.0 s (no scenario indexed a document)")
    assert nothing.performance.totals.overhead_ratio == pytest.approx(6.0 / 5.0)


def test_the_turns_own_embedding_is_shown_apart_from_the_indexing():
    """GAIA 0.25.1's agent embeds its session documents again on its first turn: the front
    door's records of that turn say how long and how many texts; the head says it beside the
    indexing, and says n/a where no turn was measured at the front door."""
    from runner.conversation import turn_performance_from_meter
    from runner.report._performance import turn_embedding_text

    records = [
        {"route": "/api/v1/embeddings", "status": 200, "inputs": 25, "wall_s": 28.0, "started_at": 1.0},
        {"route": "/api/v1/embeddings", "status": 200, "inputs": 2, "wall_s": 2.5, "started_at": 2.0},
        {"route": "/api/v1/embeddings", "status": 502, "inputs": 9, "wall_s": 0.1, "started_at": 3.0},
        {"route": "/api/v1/chat/completions", "status": 200, "started_at": 4.0, "wall_s": 3.0,
         "time_to_first_token_s": 0.5, "decode_s": 2.0, "completion_tokens": 41, "prompt_tokens": 900},
    ]  # fmt: skip
    first = turn_performance_from_meter(records, wall_s=34.0)
    assert (first.embedded_inputs, first.embedding_s, first.llm_calls) == (27, 30.5, 1)
    later = turn_performance_from_meter(records[3:], wall_s=3.5)
    assert (later.embedded_inputs, later.embedding_s) == (0, 0.0)

    def scenario(scenario_id: str, turns: list[TurnPerformance]) -> ScenarioResult:
        transcript = Transcript(scenario_id=scenario_id, turns=[
            TurnRecord(turn=n, user_message="q", answer="a", performance=p)
            for n, p in enumerate(turns, 1)])
        return scenario_result(scenario_id=scenario_id, transcript=transcript, wall_s=40.0)

    measured = card([scenario("licence", [first, later]), scenario("no_docs", [later])])
    assert measured.performance.totals.turn_embedding_s == pytest.approx(30.5)
    assert measured.performance.totals.turn_embedded_inputs == 27
    line = turn_embedding_text(measured)
    assert line == ("the agent's embedding inside its turns (front door, agent time) = 30.5 s of "
                    "41.0 s of turns, 27 texts, over 1 of 2 scenarios (longest 30.5 s)")
    summary = render_summary_md(measured)
    assert f"- **{line}**" in summary
    row_of = next(r for r in summary.splitlines() if r.startswith("| licence |"))
    assert row_of.split(" | ")[-4] == "30.5 s", row_of  # the Embedding in turns column
    assert escape(line) in render_html(measured)
    unmeasured = card(suite(harness_s=0.0))  # GAIA's own figures only: nothing to read
    assert turn_embedding_text(unmeasured).endswith("= n/a (no turn was measured at the front door)")


def test_what_the_embeddings_cache_answered_is_on_the_record_and_only_when_one_was_on():
    """A server with the embeddings cache answers repeated texts without the model: each turn
    and each scenario's indexing say how many (`cached_inputs` at the front door), and the head
    says it, with what it means for the times; a run without the cache has no such line."""
    from runner.conversation import turn_performance_from_meter
    from runner.report._performance import embedding_cache_text

    records = [  # the agent's first turn: its session document again, then the answer
        {"route": "/api/v1/embeddings", "status": 200, "inputs": 25, "cached_inputs": 25,
         "wall_s": 0.4, "started_at": 1.0},
        {"route": "/api/v1/embeddings", "status": 200, "inputs": 2, "cached_inputs": 1,
         "wall_s": 0.3, "started_at": 2.0},
        {"route": "/api/v1/embeddings", "status": 502, "inputs": 9, "cached_inputs": 0,
         "wall_s": 0.1, "started_at": 3.0},  # refused: neither embedded nor served
    ]  # fmt: skip
    turn = turn_performance_from_meter(records, wall_s=5.0)
    assert (turn.embedded_inputs, turn.embedded_cached) == (27, 26)
    uncached = turn_performance_from_meter(
        [{k: v for k, v in r.items() if k != "cached_inputs"} for r in records], wall_s=5.0)
    assert (uncached.embedded_inputs, uncached.embedded_cached) == (27, None)

    def scenario(scenario_id: str, performance: TurnPerformance, inputs: int,
                 cached: int | None) -> ScenarioResult:
        transcript = Transcript(
            scenario_id=scenario_id,
            setup=SetupTimings(indexing_s=3.0, indexing_embedded_inputs=inputs,
                               indexing_embedded_cached=cached),
            turns=[TurnRecord(turn=1, user_message="q", answer="a", performance=performance)])
        return scenario_result(scenario_id=scenario_id, transcript=transcript, wall_s=10.0)

    with_cache = card([scenario("first", turn, 25, 0), scenario("second", turn, 25, 25)])
    totals = with_cache.performance.totals
    assert (totals.indexing_embedded_inputs, totals.indexing_embedded_cached) == (50, 25)
    assert (totals.turn_embedded_inputs, totals.turn_embedded_cached) == (54, 52)
    line = embedding_cache_text(with_cache)
    assert line == ("the LLM server's embeddings cache answered 77 of 104 texts without the model "
                    "(indexing 25 of 50, turns 52 of 54) — the vectors it computed before for the "
                    "same texts; the indexing and turn times above are shorter than on a server "
                    "without it")
    assert f"- **{line}**" in render_summary_md(with_cache)
    assert escape(line) in render_html(with_cache)
    without = card([scenario("first", uncached, 25, None)])
    assert embedding_cache_text(without) is None
    assert "embeddings cache" not in render_summary_md(without)
    assert "embeddings cache" not in render_html(without)


def test_simulated_turns_and_the_simulators_time_have_their_own_column():
    # The simulator's model writes the user message before the turn's clock starts: its time
    # is in the scenario's wall, outside agent time, and the phase table shows it apart.
    simulated = TurnPerformance(wall_s=12.0, simulator_s=3.25)
    verbatim = TurnPerformance(wall_s=8.0)

    def scenario(scenario_id: str, turns: list[TurnPerformance]) -> ScenarioResult:
        transcript = Transcript(scenario_id=scenario_id, turns=[
            TurnRecord(turn=n, user_message="q", answer="a", performance=p)
            for n, p in enumerate(turns, 1)])
        return scenario_result(scenario_id=scenario_id, transcript=transcript, wall_s=30.0)

    measured = card([scenario("talky", [simulated, simulated, verbatim]),
                     scenario("plain", [verbatim])])
    stats = measured.performance.scenarios
    assert (stats["talky"].simulated_turns, stats["talky"].simulator_s) == (2, 6.5)
    assert (stats["plain"].simulated_turns, stats["plain"].simulator_s) == (0, None)
    totals = measured.performance.totals
    assert (totals.simulated_turns, totals.simulator_s) == (2, 6.5)
    assert totals.agent_turn_s == pytest.approx(12.0 + 12.0 + 8.0 + 8.0)  # not the simulator's
    summary = render_summary_md(measured)
    rows = {r.split(" | ")[0]: r.split(" | ") for r in summary.splitlines() if r.startswith("| ")}
    assert rows["| talky"][-2] == "2 · 6.5 s" and rows["| plain"][-2] == "–"
    assert "Simulated turns |" in summary


def timed(rows: list[ScenarioResult], starts_s: list[float]) -> list[ScenarioResult]:
    """Each row started `starts_s[i]` after WHEN and ran for its own wall."""
    from datetime import timedelta

    return [r.model_copy(update={"started_at": WHEN + timedelta(seconds=start),
                                 "ended_at": WHEN + timedelta(seconds=start + (r.wall_s or 0.0))})
            for r, start in zip(rows, starts_s, strict=True)]


def test_the_runs_own_clock_is_beside_the_sum_of_its_scenarios_walls():
    from runner.report._performance import run_wall_text

    rows = suite(0.0)  # walls 620.0, 5.4 and 10.0 s
    # Null: one at a time, back to back — the run's clock is the scenarios' walls added up.
    one = card(timed(rows, [0.0, 620.0, 625.4]))
    assert run_wall_text(one) == ("the run's wall clock = 10:35 (first scenario's start to the "
                                  "last one's end) at concurrency 1")
    # Planted: at concurrency 2 the two short ones ran beside the long one — the clock is the
    # long one's 620 s, and 635.4 s of scenario walls over it are 1.02 at once.
    two = card(timed(rows, [0.0, 1.0, 6.4]))
    two = two.model_copy(update={"config": two.config.model_copy(update={"concurrency": 2})})
    assert run_wall_text(two) == (
        "the run's wall clock = 10:20 (first scenario's start to the last one's end) at "
        "concurrency 2; its scenarios' walls add up to 10:35, 1.02 at once on average")
    assert run_wall_text(two) in render_summary_md(two)
    assert escape(run_wall_text(two), quote=True) in render_html(two)
    assert run_wall_text(card(rows)).endswith("= n/a (no scenario recorded when it started and ended)")
