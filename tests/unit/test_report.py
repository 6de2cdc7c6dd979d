"""Report records and renderers: scorecard, summary.md, junit.xml, report.html, schemas."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import pytest

from runner.records.judgments import (
    DIMENSIONS,
    ClaimJudgment,
    ClaimLabel,
    DimensionScores,
    JudgeUsage,
    Judgments,
    ScenarioVerdict,
    TurnJudgment,
)
from runner.records.outcomes import CheckResult
from runner.records.status import Status
from runner.records.transcript import ToolCall, Transcript, TurnPerformance, TurnRecord
from runner.report import (
    ReferenceDecode,
    RunConfig,
    ScenarioResult,
    Scorecard,
    build_scorecard,
    percentile,
    render_html,
    render_junit,
    render_summary_md,
    scenario_result,
)
from runner.report._charts import nice_step
from runner.report._identity import served_model_of
from runner.run.schemas import stale_schemas

WHEN = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
JUDGE = RunConfig(
    judge_provider="anthropic", judge_model="claude-sonnet-4-6", agent_model="SmolLM2"
)
NO_JUDGE = RunConfig(agent_model="SmolLM2")


def transcript(
    scenario_id: str, turns: int = 2, answer: str = "The total is $412,000."
) -> Transcript:
    return Transcript(
        scenario_id=scenario_id,
        turns=[
            TurnRecord(
                turn=i,
                user_message=f"question {i}",
                answer=answer,
                tool_calls=[ToolCall(name="query_documents", arguments={"query": "travel"})],
                performance=TurnPerformance(
                    wall_s=float(i),
                    time_to_first_token_s=0.1,
                    tokens_per_s=100.0,
                    input_tokens=200,
                    output_tokens=50,
                ),
            )
            for i in range(1, turns + 1)
        ],
    )


def judgments(turns: int = 2, correctness: float = 9.0, verdict: str = "PASS") -> Judgments:
    scores = DimensionScores(**(dict.fromkeys(DIMENSIONS, 8.0) | {"correctness": correctness}))
    return Judgments(
        judge_model="claude-sonnet-4-6",
        turns=[
            TurnJudgment(turn=i, scores=scores, reasoning=f"turn {i} ok")
            for i in range(1, turns + 1)
        ],
        claims=[
            ClaimJudgment(
                turn=1,
                name="total",
                claim="Total is $412,000",
                label=ClaimLabel.ENTAILED,
                rationale="said so",
            ),
            ClaimJudgment(
                name="cited", claim="Cites the doc", label=ClaimLabel.ENTAILED, rationale="yes"
            ),
        ],
        verdict=ScenarioVerdict(verdict=verdict, root_cause="none", recommended_fix="none"),
        usage=JudgeUsage(input_tokens=10_000, output_tokens=1_000, requests=2),
    )


CHECKS = [
    CheckResult(type="tool_called", turn=1, passed=True),
    CheckResult(type="documents_indexed", turn=None, passed=True),
]


def passing(
    scenario_id: str = "budget_lookup", category: str = "rag_quality", **kw
) -> ScenarioResult:
    return scenario_result(
        scenario_id=scenario_id,
        name="Budget lookup",
        category=category,
        severity="high",
        transcript=transcript(scenario_id),
        checks=CHECKS,
        judgments=judgments(),
        wall_s=12.5,
        **kw,
    )


def failing(scenario_id: str = "budget_wrong", category: str = "rag_quality") -> ScenarioResult:
    return scenario_result(
        scenario_id=scenario_id,
        category=category,
        transcript=transcript(scenario_id),
        checks=[
            CheckResult(
                type="answer_contains", turn=2, passed=False, diagnostic="missing <412,000> & more"
            )
        ],
        judgments=judgments(correctness=2.0, verdict="FAIL"),
        wall_s=20.0,
    )


def infra(scenario_id: str, status: Status, category: str = "memory") -> ScenarioResult:
    return scenario_result(
        scenario_id=scenario_id,
        category=category,
        transcript=None,
        infra=status,
        error=f"{status.value}: the agent UI went away",
        wall_s=3.0,
    )


def unjudged(scenario_id: str, checks_pass: bool = True) -> ScenarioResult:
    check = CheckResult(
        type="tool_called",
        turn=1,
        passed=checks_pass,
        diagnostic="" if checks_pass else "never called",
    )
    return scenario_result(
        scenario_id=scenario_id,
        category="tool_selection",
        transcript=transcript(scenario_id, 1),
        checks=[check],
    )


def card(results: list[ScenarioResult], config: RunConfig = JUDGE, **kw) -> Scorecard:
    return build_scorecard(run_id="run-1", timestamp=WHEN, config=config, results=results, **kw)


# --- assembling a scenario result ---------------------------------------------------------


def test_scenario_result_lays_out_turns_checks_claims_and_cost():
    r = passing()
    assert r.status is Status.PASS and r.score == pytest.approx(8.25)
    assert [t.turn for t in r.turns] == [1, 2]
    assert (
        r.turns[0].answer == "The total is $412,000."
        and r.turns[0].tool_calls[0].name == "query_documents"
    )
    assert r.turns[0].dims is not None and r.turns[0].passed is True
    assert [c.type for c in r.turns[0].checks] == ["tool_called"] and r.turns[1].checks == []
    assert [c.type for c in r.checks] == ["documents_indexed"]
    assert [c.name for c in r.turns[0].claims] == ["total"] and [c.name for c in r.claims] == [
        "cited"
    ]
    assert r.cost_usd == pytest.approx((10_000 * 3 + 1_000 * 15) / 1e6)
    assert r.trace == "traces/budget_lookup.json"
    assert passing(trial=2).trace == "traces/budget_lookup__trial2.json"


def test_unjudged_result_with_a_failed_check_is_a_checks_decided_fail_without_a_score():
    r = unjudged("t1", checks_pass=False)
    assert r.status is Status.FAIL and r.decided_by == "checks" and r.score is None
    assert r.turns[0].performance is not None and r.turns[0].score is None
    assert r.gates.failed() == ["checks"]
    assert r.notes[0].startswith("failed: checks")
    assert "check tool_called (turn 1) failed: never called" in r.notes


def test_unjudged_result_whose_checks_passed_stays_not_judged():
    r = unjudged("t1")
    assert r.status is Status.NOT_JUDGED and r.decided_by is None and r.gates.checks_run == 1


def test_scorecard_sums_cost_performance_and_summary():
    c = card([passing(), failing(), infra("m1", Status.TIMEOUT)])
    assert c.summary.total_scenarios == 3 and c.summary.passed == 1 and c.summary.timeout == 1
    assert c.summary.avg_score == pytest.approx((8.25 + min(6.0, 5.99)) / 2, abs=0.005)
    assert c.cost.judge_input_tokens == 20_000 and c.cost.judge_requests == 4
    assert c.performance.totals.turns == 4
    assert c.performance.totals.input_tokens == 800
    assert c.performance.totals.wall_s == pytest.approx(35.5)
    assert c.performance.scenarios["budget_lookup"].turn_wall_s_p50 == pytest.approx(1.5)
    assert c.performance.scenarios["m1"].turn_wall_s_mean is None  # not measured, not 0
    assert c.trials is None


def test_scorecard_round_trips_through_json():
    c = card([passing(), failing(), infra("m1", Status.TIMEOUT), unjudged("u")])
    again = Scorecard.model_validate_json(c.model_dump_json())
    assert again == c


def test_scorecard_rejects_unknown_fields_with_the_field_name():
    data = json.loads(card([passing()]).model_dump_json())
    data["summary"]["pased"] = 1
    with pytest.raises(ValueError, match="pased"):
        Scorecard.model_validate(data)


def test_trials_section_when_k_above_one():
    results = [passing(trial=1), failing("budget_lookup"), passing(trial=3)]
    results[1].trial = 2
    c = card(results, JUDGE.model_copy(update={"trials": 3}))
    assert c.trials is not None
    stats = c.trials["budget_lookup"]
    assert (stats.trials, stats.passes, stats.label.value) == (3, 2, "flaky")
    assert set(c.performance.scenarios) == {f"budget_lookup__trial{k}" for k in (1, 2, 3)}


def test_percentile_interpolates_like_numpy():
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == pytest.approx(2.5)
    assert percentile([1.0, 2.0, 3.0, 4.0], 90) == pytest.approx(3.7)
    assert percentile([5.0], 90) == 5.0
    assert percentile([], 50) is None


# --- summary.md ---------------------------------------------------------------------------


def test_summary_md_has_every_section_and_status_icons():
    text = render_summary_md(card([passing(), failing(), infra("m1", Status.TIMEOUT)]))
    for heading in ("## Summary", "## By Category", "## Scenarios", "## Performance", "## Cost"):
        assert heading in text
    assert "✅ **budget_lookup**" in text and "❌ **budget_wrong**" in text and "⏱️ **m1**" in text
    assert "| rag_quality | 2 | 1 | 1 |" in text
    assert "failed: rubric, checks" in text
    assert "No judge was configured" not in text  # a judge was configured


def test_summary_md_says_how_to_turn_judging_on_when_there_is_no_judge():
    text = render_summary_md(card([unjudged("u1"), unjudged("u2")], NO_JUDGE))
    assert "No judge was configured: exact checks decided what they could" in text
    assert "export ANTHROPIC_API_KEY=" in text and "--judge-provider openai --judge-url" in text


def test_summary_md_lists_flaky_scenarios_with_trials():
    results = [
        passing(trial=1),
        failing("budget_lookup"),
        passing("steady", trial=1),
        passing("steady", trial=2),
    ]
    results[1].trial = 2
    text = render_summary_md(card(results, JUDGE.model_copy(update={"trials": 2})))
    assert "## Trials (2 per scenario)" in text
    assert "**Flaky scenarios:** budget_lookup" in text


def test_the_category_tables_count_skipped_rows_as_unmeasured_not_as_infrastructure_errors():
    """A category whose scenarios were all skipped reads "Unmeasured", as the gate counts them;
    it once read "Infra" beside a head that said 0 infrastructure errors."""
    results = [infra("s1", Status.SKIPPED_NO_DOCUMENT, category="real_world"),
               infra("s2", Status.SKIPPED_NO_MODEL, category="real_world"), passing()]
    markdown = render_summary_md(card(results))
    assert "| Not judged | Unmeasured | Checks pass rate |" in markdown
    assert "| real_world | 2 | 0 | 0 | 0 | 0 | 0 | 0 | 2 |" in markdown
    assert "**Infra error:** 0" in markdown and "| Infra |" not in markdown
    html = render_html(card(results))
    assert "<th class=n>Unmeasured</th>" in html and ">Infra<" not in html
    assert "<td>real_world</td><td class=n>2</td>" in html


def test_summary_md_puts_the_servers_reference_decode_beside_the_wall_clock():
    """Two runs' wall clocks compare only beside the machine's speed on the day: the head says
    what the server decoded on the fixed request before the first scenario, when it was
    measured, and says nothing of one that was not (an older scorecard, a server without
    llama.cpp's timings)."""
    reference = ReferenceDecode(model="Gemma-4-E4B-it-GGUF", tokens=64, tokens_per_s=41.26,
                                prompt_tokens_per_s=175.0)
    text = render_summary_md(card([passing()], NO_JUDGE.model_copy(update={"reference_decode": reference})))
    head = text.split("## By Category")[0]
    line = ("- **the LLM server's reference decode before the first scenario = 41.3 tokens/s (64 "
            "greedy tokens of one fixed prompt by Gemma-4-E4B-it-GGUF, llama.cpp's own timing): "
            "compare two runs' wall clocks only beside theirs**")
    assert line in head
    assert head.index("the run's wall clock") < head.index(line)
    assert "reference decode" not in render_summary_md(card([passing()], NO_JUDGE))
    reloaded = RunConfig.model_validate(NO_JUDGE.model_dump(exclude={"reference_decode"}))
    assert reloaded.reference_decode is None  # a scorecard from before the field still loads


def test_summary_md_table_cells_cannot_break_rows():
    r = infra("m1", Status.INFRA_ERROR, category="a|b")
    text = render_summary_md(card([r]))
    assert "| a\\|b |" in text


# --- junit.xml ----------------------------------------------------------------------------


def test_junit_one_suite_per_category_and_status_mapping():
    results = [
        passing(),
        failing(),
        scenario_result(
            scenario_id="blocked",
            category="rag_quality",
            transcript=transcript("blocked"),
            judgments=judgments(verdict="BLOCKED_BY_ARCHITECTURE"),
        ),
        infra("m1", Status.TIMEOUT),
        infra("m2", Status.SKIPPED_NO_DOCUMENT),
        infra("m3", Status.NOT_RUN),
        unjudged("u_ok"),
        unjudged("u_bad", checks_pass=False),
    ]
    root = ET.fromstring(render_junit(card(results)))
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {"rag_quality", "memory", "tool_selection"}
    kinds = {}
    for case in root.iter("testcase"):
        children = [child.tag for child in case]
        kinds[case.get("name")] = children[0] if children else "pass"
    assert kinds == {
        "budget_lookup": "pass",
        "budget_wrong": "failure",
        "blocked": "failure",
        "m1": "error",
        "m2": "skipped",
        "m3": "skipped",
        "u_ok": "skipped",
        "u_bad": "failure",
    }
    rag = suites["rag_quality"]
    assert (rag.get("tests"), rag.get("failures"), rag.get("errors"), rag.get("skipped")) == (
        "3",
        "2",
        "0",
        "0",
    )
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == (
        "8",
        "3",
        "1",
        "3",
    )


def test_junit_escapes_markup_and_control_characters():
    r = infra("m1", Status.INFRA_ERROR)
    r.error = 'boom <tag> & "quote" \x1b[31mred\x1b[0m \x00'
    r.notes = ["]]> end of cdata"]
    xml = render_junit(card([r]))
    error = ET.fromstring(xml).find(".//error")
    assert error is not None
    assert '<tag> & "quote"' in error.get("message")
    assert "\\x1b[31mred" in error.get("message")
    assert "]]> end of cdata" in error.text


# --- report.html (static checks; tests/browser renders it in Chromium) ---------------------


def test_html_is_self_contained_and_escapes_run_text():
    r = passing()
    r.turns[0].answer = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    html = render_html(card([r, failing(), unjudged("u")]))
    assert html.startswith("<!DOCTYPE html>")
    assert "<script" not in html and "&lt;script&gt;" in html
    assert (
        "http://" not in html and "https://" not in html and "src=" not in html.replace("src=x", "")
    )
    assert html.count('<details class="scenario"') == 3
    assert "query_documents" in html and "Rubric" in html


def test_html_says_not_judged_when_there_is_no_judge():
    html = render_html(card([unjudged("u")], NO_JUDGE))
    assert "No judge was configured" in html and "export ANTHROPIC_API_KEY" in html


# --- schemas ------------------------------------------------------------------------------


def test_committed_json_schemas_match_the_models():
    stale = stale_schemas()
    assert stale == [], f"stale schemas {stale}: run `trialbox schema`"


def test_stale_schema_is_detected(tmp_path):
    from runner.run.schemas import export_schemas

    export_schemas(tmp_path)
    assert stale_schemas(tmp_path) == []
    (tmp_path / "trace.schema.json").write_text("{}")
    assert stale_schemas(tmp_path) == ["trace.schema.json"]


# --- a run without a judge: checks decide, reports say so ---------------------------------

LLM_CPU_HEALTH = {
    # The shape trialbox's llm-cpu answers on /api/v1/health (images/llm-cpu/trialbox_llm/schemas.py).
    "status": "ok",
    "version": "9.1.0+trialbox-llm-cpu.0.1.0",
    "model_loaded": "Gemma-4-E4B-it-GGUF",
    "all_models_loaded": [
        {
            "model_name": "user.embeddinggemma-300m-GGUF",
            "checkpoint": "all-MiniLM-L6-v2.f16.gguf",
            "type": "embedding",
            "served_model": "all-MiniLM-L6-v2-GGUF",
        },
        {
            "model_name": "Gemma-4-E4B-it-GGUF",
            "checkpoint": "SmolLM2-135M-Instruct.Q4_1.gguf",
            "type": "llm",
            "served_model": "SmolLM2-135M-Instruct-GGUF",
        },
    ],
    "server": {"name": "trialbox-llm-cpu", "version": "0.1.0"},
    "aliases": {"Gemma-4-E4B-it-GGUF": "SmolLM2-135M-Instruct-GGUF"},
}
LEMONADE_HEALTH = {
    # Real Lemonade (DESIGN 2.4): no `server` block, a Hugging Face checkpoint.
    "status": "ok",
    "version": "9.1.4",
    "model_loaded": "Gemma-4-E4B-it-GGUF",
    "all_models_loaded": [
        {
            "model_name": "Gemma-4-E4B-it-GGUF",
            "checkpoint": "unsloth/gemma-4-E4B-it-GGUF:Q4_K_M",
            "type": "llm",
            "recipe": "llamacpp",
        }
    ],
}
FRESH_MACHINE = RunConfig(
    agent_model="Gemma-4-E4B-it-GGUF", device="cpu", llm_server=LLM_CPU_HEALTH
)
SERVED = "SmolLM2-135M-Instruct Q4_1 by trialbox llm-cpu"


def derived_fail(scenario_id: str, category: str = "rag_quality", extra: int = 0) -> ScenarioResult:
    checks = [
        CheckResult(type="tool_called", turn=1, passed=True),
        CheckResult(
            type="answer_number",
            turn=1,
            passed=False,
            derived=True,
            diagnostic="derived from ground_truth.expected_answer '$412,000': expected 412,000 "
            "(±5.00%); got no number in the answer 'I am not sure.'",
        ),
    ] + [
        CheckResult(type="answer_contains", turn=1, passed=False, diagnostic=f"missing {i}")
        for i in range(extra)
    ]
    return scenario_result(
        scenario_id=scenario_id,
        category=category,
        transcript=transcript(scenario_id, 1, answer="I am not sure."),
        checks=checks,
    )


def no_check(scenario_id: str) -> ScenarioResult:
    return scenario_result(
        scenario_id=scenario_id, category="memory", transcript=transcript(scenario_id, 1)
    )


def fresh_run() -> Scorecard:
    results = [derived_fail("f1"), derived_fail("f2", extra=3), unjudged("ok1"), no_check("n1")]
    return card(results, FRESH_MACHINE, finished=True)


def test_scorecard_summary_of_a_run_without_a_judge():
    s = fresh_run().summary
    assert (s.failed, s.checks_failed, s.judged, s.passed) == (2, 2, 0, 0)
    assert (s.not_judged, s.checks_passed_not_judged) == (2, 1)
    assert (s.checked, s.checks_all_passed, s.checks_pass_rate) == (3, 1, pytest.approx(1 / 3))
    assert s.judged_pass_rate is None and s.avg_score is None


@pytest.mark.parametrize(
    ("health", "served"),
    [
        (LLM_CPU_HEALTH, SERVED),
        (
            LEMONADE_HEALTH,
            "Gemma-4-E4B-it-GGUF (unsloth/gemma-4-E4B-it-GGUF:Q4_K_M) by Lemonade Server 9.1.4",
        ),
        ({"error": "ConnectError: connection refused"}, None),
        ({}, None),
        ({"status": "ok", "model_loaded": None, "all_models_loaded": []}, None),
        (
            {"status": "ok", "version": "9.0", "model_loaded": "Qwen3-8B-GGUF"},
            "Qwen3-8B-GGUF by Lemonade Server 9.0",
        ),
    ],
)
def test_served_model_of_a_recorded_health_reply(health, served):
    assert served_model_of(health) == served


def test_served_model_of_picks_the_loaded_chat_model_among_several():
    health = dict(LLM_CPU_HEALTH)
    health["all_models_loaded"] = [
        {"model_name": "Other-GGUF", "checkpoint": "Other.Q8_0.gguf", "type": "llm"},
        *LLM_CPU_HEALTH["all_models_loaded"],
    ]
    assert served_model_of(health) == SERVED


def test_summary_md_first_lines_say_what_checks_decided_and_what_really_answered():
    text = render_summary_md(fresh_run())
    first = text.split("## Summary\n\n", 1)[1].splitlines()[:3]
    assert first[0] == (
        "- **Checks-decided FAIL:** 2 · **Checks passed, not judged:** 1 · "
        "**NOT_JUDGED:** 2 (1 without any exact check)"
    )
    assert first[1] == (f"- **Agent model:** Gemma-4-E4B-it-GGUF → served as {SERVED} · device cpu")
    assert first[2].startswith("- **Checks pass rate:** 33% (1 of 3 scenarios whose checks ran)")
    assert "**Judged pass rate:** n/a (0 judged)" in first[2]
    assert "**Quality gate (--min-pass-rate) applies to:** checks pass rate = 33%" in text


def test_summary_md_prefers_the_recorded_served_model():
    config = FRESH_MACHINE.model_copy(update={"served_model": "Llama-3.2-1B Q4_K_M by Lemonade"})
    text = render_summary_md(card([unjudged("u")], config))
    assert "Gemma-4-E4B-it-GGUF → served as Llama-3.2-1B Q4_K_M by Lemonade · device cpu" in text


def test_summary_md_says_when_the_served_model_is_unknown():
    text = render_summary_md(card([unjudged("u")], NO_JUDGE))
    assert "**Agent model:** SmolLM2 (the LLM server did not report which model serves it)" in text


def test_summary_md_lists_which_checks_failed_marking_derived_ones():
    text = render_summary_md(fresh_run())
    assert "❌ **f1** `FAIL` n/a · n/a — failed: checks (decided by checks, no judge)" in text
    assert "  - check answer_number (derived, turn 1) failed: derived from ground_truth." in text
    assert "  - … 1 more in `traces/f2.json`" in text  # 4 failed, 3 listed
    assert "⚪ **ok1** `NOT_JUDGED` n/a · n/a — checks passed, not judged (1 check)" in text
    assert "| rag_quality | 2 | 0 | 2 | 0 | 2 | 0 | 0 | 0 | 0% | n/a |" in text


def test_junit_checks_decided_fail_is_a_failure_naming_the_check():
    root = ET.fromstring(render_junit(fresh_run()))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    failure = cases["f1"].find("failure")
    assert failure is not None and failure.get("type") == "FAIL"
    message = failure.get("message")
    assert "decided by exact checks, no judge ran" in message
    assert "check answer_number (derived, turn 1) failed" in message
    assert "failed: checks" in failure.text
    skipped = cases["ok1"].find("skipped")
    assert skipped is not None and "checks passed, not judged (1 exact check)" in skipped.get(
        "message"
    )
    assert "no judge configured and no exact check" in cases["n1"].find("skipped").get("message")
    assert (root.get("failures"), root.get("skipped")) == ("2", "2")


def test_junit_suites_carry_checks_counts_and_rates_as_properties():
    root = ET.fromstring(render_junit(fresh_run()))
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    props = {p.get("name"): p.get("value") for p in suites["rag_quality"].iter("property")}
    assert props == {
        "checks_failed": "2",
        "checks_passed_not_judged": "0",
        "not_judged": "0",
        "checks_pass_rate": "0.0000",
        "judged_pass_rate": "n/a",
    }
    tools = {p.get("name"): p.get("value") for p in suites["tool_selection"].iter("property")}
    assert tools["checks_pass_rate"] == "1.0000" and tools["checks_passed_not_judged"] == "1"


def test_html_headline_cards_and_derived_marker():
    html = render_html(fresh_run())
    assert (
        f'<p class="headline" id="agent-model"><b>Agent model:</b> Gemma-4-E4B-it-GGUF → served '
        f"as {SERVED} · device cpu</p>"
    ) in html
    for label in ("checks-decided FAIL", "checks passed, not judged", "checks pass rate (1/3)"):
        assert label in html, label
    assert "quality gate: checks pass rate" in html
    assert '<span class="derived"' in html and "decided by exact checks" in html


def test_html_has_the_four_charts_with_titles_and_axis_labels():
    html = render_html(fresh_run())
    for chart_id in (
        "chart-status-by-category",
        "chart-turn-latency",
        "chart-ttft",
        "chart-tokens-per-s",
    ):
        assert f'<svg id="{chart_id}"' in html, chart_id
        assert f'<title id="{chart_id}-title">' in html
    for axis in (
        "scenarios",
        "turn wall time (s)",
        "turns",
        "time to first token, mean over turns (s)",
        "generated tokens per second, mean over turns",
    ):
        assert f">{axis}</text>" in html, axis
    assert "<title>rag_quality: 2 FAIL (checks)</title>" in html
    assert "<title>tool_selection: 1 checks passed, not judged</title>" in html
    assert "<title>4 turn(s) took 1–1.1 s</title>" in html  # four 1.0 s turns, 0.1 s bins


def test_charts_escape_names_and_say_not_measured():
    r = infra("m1", Status.INFRA_ERROR, category='<b onmouseover="x">')
    html = render_html(card([r]))
    assert '<b onmouseover="x">' not in html and "&lt;b onmouseover=&quot;x&quot;&gt;" in html
    assert "No turn was measured." in html
    assert ">not measured</text>" in html  # the scenario has no TTFT: no zero-length bar


def test_charts_of_an_empty_run():
    html = render_html(card([]))
    assert html.count("No scenario finished yet.") == 4  # three charts and the scenario list


@pytest.mark.parametrize(
    ("top", "ticks", "step"), [(7, 5, 2), (59, 5, 20), (0.37, 10, 0.05), (1.0, 10, 0.1), (0, 5, 1)]
)
def test_nice_step_gives_round_ticks(top, ticks, step):
    assert nice_step(top, ticks) == pytest.approx(step)


def test_reports_say_whether_checks_were_derived():
    off = FRESH_MACHINE.model_copy(update={"derived_checks": False})
    assert "**Derived checks:** off" in render_summary_md(card([unjudged("u")], off))
    assert "**Derived checks:** on" in render_summary_md(card([unjudged("u")], FRESH_MACHINE))
    assert "off (--no-derived-checks)" in render_html(card([unjudged("u")], off))
