"""Where a run's time went: the run's wall ÷ agent time and the set-up phases, worked by hand.

Three scenarios ran with the warm pool's set-up timings, one from an older trace without them,
and one never got a turn. Every expected number below is computed in the comment beside it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

import pytest

from runner.records.status import Status
from runner.records.transcript import SetupTimings, Transcript, TurnPerformance, TurnRecord
from runner.report import (
    RunConfig,
    RunWriter,
    ScenarioResult,
    Scorecard,
    Trace,
    build_scorecard,
    read_scorecard,
    render_html,
    render_summary_md,
    scenario_result,
    trace_of,
)

WHEN = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
NO_JUDGE = RunConfig(agent_model="SmolLM2-135M-Instruct")
JUDGED = RunConfig(judge_provider="anthropic", judge_model="claude-sonnet-4-6")

# A warm-pool hit: the sandbox was ready before the scenario asked for it.
HIT = SetupTimings(
    pool_hit=True, waited_s=0.1, container_create_s=1.0, gaia_import_s=2.0, ui_ready_s=2.5,
    mcp_ready_s=2.0, session_s=0.3, indexing_s=1.0,
)
HIT_NO_DOCUMENTS = SetupTimings(
    pool_hit=True, waited_s=0.3, container_create_s=1.4, gaia_import_s=2.4, ui_ready_s=3.0,
    mcp_ready_s=2.6, session_s=0.4,
)
# The pool was empty: the scenario waited for the whole cold start.
MISS = SetupTimings(
    pool_hit=False, waited_s=2.1, container_create_s=1.2, gaia_import_s=2.2, ui_ready_s=2.9,
    mcp_ready_s=2.4, session_s=0.5,
)


def conversation(scenario_id: str, turn_walls: list[float], setup: SetupTimings | None) -> Transcript:
    return Transcript(
        scenario_id=scenario_id,
        setup=setup,
        turns=[
            TurnRecord(
                turn=n, user_message=f"question {n}", answer="ok",
                performance=TurnPerformance(wall_s=wall, input_tokens=100, output_tokens=20),
            )
            for n, wall in enumerate(turn_walls, 1)
        ],
    )


def ran(scenario_id: str, wall_s: float, turn_walls: list[float],
        setup: SetupTimings | None) -> ScenarioResult:
    return scenario_result(
        scenario_id=scenario_id, transcript=conversation(scenario_id, turn_walls, setup),
        wall_s=wall_s,
    )


def results() -> list[ScenarioResult]:
    return [
        ran("invoice_total", 12.0, [2.0, 4.0], HIT),  # 12 ÷ (6 + 1.0 indexing) = 1.71
        ran("policy_lookup", 9.0, [3.0, 3.0], MISS),  # 9 ÷ 6 = 1.5
        ran("chart_reading", 5.5, [5.0], HIT_NO_DOCUMENTS),  # 5.5 ÷ 5 = 1.1
        ran("old_trace", 10.0, [4.0], None),  # 10 ÷ 4 = 2.5, no set-up recorded
        scenario_result(  # no turn ran: a wall clock but no agent time, left out of the ratio
            scenario_id="no_sandbox", transcript=None, infra=Status.SETUP_ERROR,
            error="SETUP_ERROR: the Agent UI never answered", wall_s=30.0,
        ),
    ]


def card(rows: list[ScenarioResult], config: RunConfig = NO_JUDGE) -> Scorecard:
    return build_scorecard(run_id="20261130-090000-ab12", timestamp=WHEN, config=config,
                           results=rows, finished=True)


# --- the overhead ratio ---------------------------------------------------------------------


def test_overhead_ratio_is_scenario_wall_over_agent_time_per_scenario():
    perf = card(results()).performance.scenarios
    assert perf["invoice_total"].agent_turn_s == pytest.approx(6.0)
    assert perf["invoice_total"].agent_indexing_s == pytest.approx(1.0)
    assert perf["invoice_total"].overhead_ratio == pytest.approx(12 / 7)
    assert perf["policy_lookup"].overhead_ratio == pytest.approx(1.5)
    assert perf["chart_reading"].overhead_ratio == pytest.approx(1.1)
    assert perf["old_trace"].overhead_ratio == pytest.approx(2.5)
    assert perf["no_sandbox"].agent_turn_s is None and perf["no_sandbox"].overhead_ratio is None
    assert perf["chart_reading"].agent_indexing_s is None  # no document: not timed


def test_run_overhead_sums_walls_over_agent_times_of_scenarios_with_both():
    totals = card(results()).performance.totals
    # (12 + 9 + 5.5 + 10) ÷ (6 + 6 + 5 + 4 turns + 1.0 indexing) = 36.5 ÷ 22; no_sandbox's
    # 30 s is not counted.
    assert totals.overhead_ratio == pytest.approx(36.5 / 22)
    assert totals.wall_s == pytest.approx(66.5)  # every scenario's wall, as before
    assert totals.agent_turn_s == pytest.approx(21.0)
    assert totals.agent_indexing_s == pytest.approx(1.0)


def test_summary_head_and_report_say_what_the_ratio_is():
    scorecard = card(results())
    head = render_summary_md(scorecard).split("## By Category")[0]
    expected = ("this run's wall ÷ agent time: scenario wall ÷ (agent turns + its own indexing) "
                "= 1.66 (36.5 s ÷ (21.0 s + 1.0 s) over 4 scenarios)")
    assert f"- **{expected}**" in head
    assert escape(expected) in render_html(scorecard)
    assert "harness overhead" not in head  # that is the benchmark's figure, not this run's


def test_a_judged_run_says_its_wall_clock_includes_judging():
    text = render_summary_md(card(results(), JUDGED))
    assert "= 1.66 (36.5 s ÷ (21.0 s + 1.0 s) over 4 scenarios); the scenario wall includes judging" in text


def test_overhead_is_na_when_no_scenario_has_both_a_wall_and_a_turn():
    scorecard = card([results()[-1]])
    assert scorecard.performance.totals.overhead_ratio is None
    assert ("this run's wall ÷ agent time: scenario wall ÷ (agent turns + its own indexing) = n/a "
            "(no scenario has both a wall clock and a timed turn)") in render_summary_md(scorecard)


def test_a_rescore_has_no_overhead_ratio_since_its_wall_clock_is_the_replays():
    config = RunConfig(extra={"rescored_from": "20261129-120000-cd34"})
    scorecard = card(results(), config)
    assert scorecard.performance.totals.overhead_ratio is None
    assert all(s.overhead_ratio is None for s in scorecard.performance.scenarios.values())
    assert "= n/a (a rescore: its wall clock is the replay's" in render_summary_md(scorecard)
    # The set-up the original run recorded still shows: the transcripts carry it.
    assert scorecard.performance.setup.scenarios == 3


def test_per_scenario_overhead_column_in_the_performance_table():
    text = render_summary_md(card(results()))
    row = next(line for line in text.splitlines() if line.startswith("| invoice_total |"))
    assert row.endswith("| 1.0 s | – | 1.71 |")  # the agent's indexing, no simulated turn, then 12 ÷ 7
    total = next(line for line in text.splitlines() if line.startswith("| **total** |"))
    assert total.endswith("| 1.0 s | – | 1.66 |")


# --- the set-up phases ------------------------------------------------------------------------


def test_each_scenarios_setup_is_kept_in_the_scorecard():
    scorecard = card(results())
    assert scorecard.scenarios[0].setup == HIT
    assert scorecard.performance.scenarios["policy_lookup"].setup == MISS
    assert scorecard.performance.scenarios["old_trace"].setup is None
    assert scorecard.performance.totals.setup is None


def test_setup_phases_median_and_p90_over_the_scenarios_that_timed_them():
    setup = card(results()).performance.setup
    assert (setup.scenarios, setup.pool_hits, setup.pool_known) == (3, 2, 3)
    # waited 0.1, 0.3, 2.1: median 0.3; p90 at rank 1.8 = 0.3 + 0.8 × (2.1 − 0.3) = 1.74
    assert setup.waited_s.measured == 3
    assert setup.waited_s.median_s == pytest.approx(0.3)
    assert setup.waited_s.p90_s == pytest.approx(1.74)
    # container create 1.0, 1.2, 1.4: median 1.2; p90 = 1.2 + 0.8 × 0.2 = 1.36
    assert setup.container_create_s.median_s == pytest.approx(1.2)
    assert setup.container_create_s.p90_s == pytest.approx(1.36)
    # Agent UI ready 2.5, 2.9, 3.0: median 2.9; p90 = 2.9 + 0.8 × 0.1 = 2.98
    assert setup.ui_ready_s.p90_s == pytest.approx(2.98)
    # Only invoice_total indexed documents: one value is its own median and p90.
    assert (setup.indexing_s.measured, setup.indexing_s.median_s, setup.indexing_s.p90_s) == (
        1, pytest.approx(1.0), pytest.approx(1.0))


def test_summary_md_has_the_setup_table():
    text = render_summary_md(card(results()))
    section = text.split("### Set-up")[1]
    assert "- **Recorded for:** 3 of 5 scenarios · **Warm pool hits:** 2 of 3 scenarios" in section
    assert "| visible set-up (waited) | 0.30 s | 1.74 s | 3 |" in section
    assert "| container create | 1.20 s | 1.36 s | 3 |" in section
    assert "| Agent UI ready | 2.90 s | 2.98 s | 3 |" in section
    assert "| indexing (the agent's own work) | 1.00 s | 1.00 s | 1 |" in section


def test_report_html_has_the_setup_table_and_each_scenarios_phases():
    html = render_html(card(results()))
    assert "Recorded for 3 of 5 scenarios · warm pool hits: 2 of 3 scenarios" in html
    assert "<td>visible set-up (waited)</td><td class=n>0.30</td><td class=n>1.74</td>" in html
    assert "<tr><td>policy_lookup</td><td><span class=\"bad\">✘ no</span></td><td class=n>2.10</td>" in html


def test_a_phase_nobody_measured_is_na_not_zero():
    only_miss = card([ran("policy_lookup", 9.0, [3.0, 3.0], MISS)])
    assert only_miss.performance.setup.indexing_s.measured == 0
    assert only_miss.performance.setup.indexing_s.median_s is None
    assert "| indexing (the agent's own work) | n/a | n/a | 0 |" in render_summary_md(only_miss)


# --- runs from before set-up was timed --------------------------------------------------------

NEW_KEYS = {"setup", "agent_turn_s", "agent_indexing_s", "overhead_ratio"}


def without_new_fields(data: Any) -> Any:
    """The JSON as trialbox wrote it before set-up timing and the overhead ratio existed."""
    if isinstance(data, dict):
        return {k: without_new_fields(v) for k, v in data.items() if k not in NEW_KEYS}
    if isinstance(data, list):
        return [without_new_fields(v) for v in data]
    return data


def test_old_traces_render_setup_as_na():
    old = card([ran("old_trace", 10.0, [4.0], None)])
    assert old.performance.setup.scenarios == 0
    text = render_summary_md(old)
    assert "Set-up timings: n/a (no scenario of this run recorded them" in text
    assert "| visible set-up" not in text
    assert "Set-up timings: n/a" in render_html(old)
    assert old.performance.totals.overhead_ratio == pytest.approx(2.5)  # turns were timed


def test_an_old_run_folder_loads_and_renders(tmp_path: Path):
    run_dir = tmp_path / "20261128-100000-ef56"
    (run_dir / "traces").mkdir(parents=True)
    rows = results()
    for row in rows:
        trace = trace_of(run_dir.name, row, transcript=conversation(row.id, [4.0], None))
        old_trace = without_new_fields(trace.model_dump(mode="json"))
        (run_dir / f"traces/{row.id}.json").write_text(json.dumps(old_trace))
    old_card = without_new_fields(card(rows).model_dump(mode="json"))
    assert "setup" not in old_card["performance"]
    (run_dir / "scorecard.json").write_text(json.dumps(old_card))

    # What rescore reads (runner/run/launch.py): every trace, then a scorecard row from each.
    for path in sorted((run_dir / "traces").glob("*.json")):
        trace = Trace.model_validate_json(path.read_text())
        assert trace.transcript is not None and trace.transcript.setup is None
        assert scenario_result(scenario_id=trace.result.id, transcript=trace.transcript).setup is None
    # What resume does: the old scorecard is read, rebuilt and every file rewritten.
    writer = RunWriter.resume(run_dir)
    writer.close()
    reread = read_scorecard(run_dir / "scorecard.json")
    assert reread.performance.setup.scenarios == 0
    assert reread.performance.totals.overhead_ratio == pytest.approx(36.5 / 21)
    summary = (run_dir / "summary.md").read_text()
    assert "Set-up timings: n/a" in summary and "= 1.74 (36.5 s ÷ (21.0 s + 0.0 s)" in summary
    assert "Set-up timings: n/a" in (run_dir / "report.html").read_text()


def test_every_timed_phase_of_the_transcript_is_reported():
    """A phase added to runner.records.transcript.SetupTimings must get a row (and a SetupStats field)."""
    from runner.report._performance import SETUP_PHASES
    from runner.report._performance_models import SetupStats

    # Not phases: whether the pool had it ready, and what the embedder did while it indexed.
    timed = set(SetupTimings.model_fields) - {"pool_hit", "indexing_embedded_inputs",
                                              "indexing_embedded_cached"}
    assert set(SETUP_PHASES) == timed
    assert timed <= set(SetupStats.model_fields)
    with pytest.raises(KeyError):
        SetupStats().phase("pool_hits")


def test_a_failed_set_up_can_still_say_where_its_time_went():
    """No transcript (the Agent UI never answered), but the sandbox phases were timed."""
    cold = SetupTimings(pool_hit=False, waited_s=61.0, container_create_s=1.3)
    row = scenario_result(scenario_id="ui_never_ready", transcript=None,
                          infra=Status.SETUP_ERROR, wall_s=61.2, setup=cold)
    scorecard = card([row])
    assert scorecard.performance.setup.waited_s.median_s == pytest.approx(61.0)
    assert scorecard.performance.setup.ui_ready_s.measured == 0
    assert scorecard.performance.totals.overhead_ratio is None  # no turn: no ratio
