"""Who wrote each user turn and which agent answered: scorecard rows, summary, the three renderers
and scorecard.gaia.json (GAIA's `agent_type_*` fields), both ways."""

from __future__ import annotations

import json

from test_report import NO_JUDGE, WHEN, card

from runner.records.status import Status
from runner.records.transcript import Transcript, TurnPerformance, TurnRecord
from runner.report import (
    GaiaScorecard,
    gaia_json,
    gaia_to_scorecard,
    render_html,
    render_summary_md,
    scenario_result,
)

SIMULATOR = "SmolLM2-135M-Instruct Q4_1"


def sourced(scenario_id: str, agent: str | None, sources: list[tuple[str, str | None]]):
    """A finished, unjudged scenario whose turns came from the given (source, model) pairs."""
    transcript = Transcript(
        scenario_id=scenario_id,
        agent_id=agent,
        gaia_version="0.25.1" if agent else None,
        turns=[
            TurnRecord(
                turn=i,
                user_message=f"question {i}",
                answer="an answer",
                performance=TurnPerformance(wall_s=1.0),
                user_message_source=source,
                simulator_model=model,
            )
            for i, (source, model) in enumerate(sources, start=1)
        ],
    )
    return scenario_result(scenario_id=scenario_id, category="rag", transcript=transcript)


def mixed_run():
    return card(
        [
            sourced("budget", "doc_reader", [("verbatim", None), ("extracted", None)]),
            sourced("travel", "no_tools", [("simulated", SIMULATOR), ("simulated", SIMULATOR)]),
            scenario_result(  # never reached the agent: no session, no agent
                scenario_id="broken", transcript=None, infra=Status.INFRA_ERROR, error="boom"
            ),
        ],
        NO_JUDGE,
    )


def test_rows_carry_the_agent_the_gaia_version_and_each_turns_source():
    row = sourced("travel", "no_tools", [("verbatim", None), ("simulated", SIMULATOR)])
    assert (row.agent_id, row.gaia_version) == ("no_tools", "0.25.1")
    assert [(t.user_message_source, t.simulator_model) for t in row.turns] == [
        ("verbatim", None),
        ("simulated", SIMULATOR),
    ]
    broken = mixed_run().scenarios[2]
    assert (broken.agent_id, broken.gaia_version) == (None, None)


def test_scorecard_summary_counts_user_turns_by_source():
    counts = mixed_run().summary.user_messages
    assert (counts.verbatim, counts.extracted, counts.simulated, counts.not_recorded) == (1, 1, 2, 0)
    assert counts.simulated_by == {SIMULATOR: 2}
    data = json.loads(mixed_run().model_dump_json())
    assert data["summary"]["user_messages"]["simulated_by"] == {SIMULATOR: 2}


def test_summary_md_shows_user_turn_sources_and_the_agent_per_scenario():
    md = render_summary_md(mixed_run())
    assert (
        f"**User turns (4):** 1 verbatim · 1 extracted from the objective · "
        f"2 simulated (by {SIMULATOR} ×2)"
    ) in md
    lines = {line.split("**")[1]: line for line in md.splitlines() if line.startswith("- ") and
             "`" in line and "**" in line}
    assert "agent doc_reader, GAIA 0.25.1" in lines["budget"]
    assert "agent no_tools, GAIA 0.25.1" in lines["travel"]
    assert "agent " not in lines["broken"]


def test_html_shows_user_turn_sources_per_run_and_per_turn_and_the_agent():
    html = render_html(mixed_run())
    assert '<p id="user-messages"><b>User turns (4):</b> 1 verbatim' in html
    assert f'<span class="derived">simulated by {SIMULATOR}</span>' in html
    assert '<span class="derived">extracted</span>' in html
    assert '<span class="agent">agent doc_reader, GAIA 0.25.1</span>' in html


def test_gaia_scorecard_rows_name_the_agent_and_the_run_agent_when_only_one_ran():
    data = json.loads(gaia_json(mixed_run()))
    rows = {r["scenario_id"]: r for r in data["scenarios"]}
    assert rows["budget"]["agent_type_observed"] == "doc_reader"
    assert rows["budget"]["agent_type_requested"] == "doc_reader"
    assert rows["travel"]["gaia_version"] == "0.25.1"
    assert rows["broken"]["agent_type_observed"] is None
    assert data["config"]["agent_type"] is None  # two agents ran: named per row only

    one = card([sourced("budget", "doc_reader", [("verbatim", None)])], NO_JUDGE)
    assert json.loads(gaia_json(one))["config"]["agent_type"] == "doc_reader"


def test_agent_and_gaia_version_survive_the_round_trip_through_gaias_format():
    gaia = GaiaScorecard.model_validate_json(gaia_json(mixed_run()))
    back = gaia_to_scorecard(gaia, run_id="x", timestamp=WHEN)
    assert {r.id: (r.agent_id, r.gaia_version) for r in back.scenarios} == {
        "budget": ("doc_reader", "0.25.1"),
        "travel": ("no_tools", "0.25.1"),
        "broken": (None, None),
    }


def test_a_gaia_scorecard_gets_the_run_agent_and_unrecorded_sources():
    gaia = GaiaScorecard.model_validate(
        {
            "config": {"agent_type": "doc", "model": "claude-sonnet-4-6"},
            "scenarios": [
                {"scenario_id": "a", "status": "PASS", "overall_score": 8.0,
                 "turns": [{"turn": 1, "user_message": "hi", "agent_response": "hello"}]},
                {"scenario_id": "b", "status": "FAIL", "agent_type_observed": "chat"},
            ],
        }
    )
    back = gaia_to_scorecard(gaia, run_id="g", timestamp=WHEN)
    assert [r.agent_id for r in back.scenarios] == ["doc", "chat"]
    assert back.summary.user_messages.not_recorded == 1
    assert "1 source not recorded" in render_summary_md(back)


def test_html_configuration_lists_the_agents_and_gaia_versions_of_the_run():
    html = render_html(mixed_run())
    assert "<th>agents</th><td>doc_reader, no_tools</td>" in html
    assert "<th>GAIA version (Agent UI)</th><td>0.25.1</td>" in html
    empty = render_html(card([], NO_JUDGE))
    assert "<th>agents</th><td>not recorded</td>" in empty
