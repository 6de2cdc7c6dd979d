"""Scorecards interoperate with GAIA both ways: we read GAIA's, GAIA's compare reads ours.

The GAIA side is GAIA's own code: its compare function from the pinned amd-gaia 0.25.1 wheel
in .venv-gaia, run in a subprocess on files our RunWriter wrote.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from test_report import NO_JUDGE, WHEN, card, transcript, unjudged

from runner.records.judgments import (
    DIMENSIONS,
    DimensionScores,
    Judgments,
    ScenarioVerdict,
    TurnJudgment,
)
from runner.records.outcomes import CheckResult
from runner.records.status import Status
from runner.report import (
    EXIT_MODELS_DIFFER,
    EXIT_OK,
    EXIT_REGRESSION,
    GAIA_SCORECARD,
    BaselineMeta,
    RunConfig,
    RunWriter,
    ScenarioResult,
    Scorecard,
    ScorecardError,
    compare,
    gaia_json,
    read_any_scorecard,
    save_baseline,
    scenario_result,
    scorecard_to_gaia,
    trace_of,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "gaia_scorecards"
GAIA_BASELINE = FIXTURES / "baseline" / "baseline.json"
GAIA_RUN = FIXTURES / "run_eval-20261120-140200"
GAIA_PYTHON = ROOT / ".venv-gaia" / "bin" / "python"
AGENT = RunConfig(
    judge_provider="anthropic",
    judge_model="claude-sonnet-4-6",
    agent_model="Qwen3-4B-Instruct-2507-GGUF",
    device="rocm",
    llm_server={"version": "9.1.4", "all_models_loaded": [
        {"model_name": "Qwen3-4B-Instruct-2507-GGUF", "type": "llm",
         "recipe_options": {"ctx_size": 32768}}
    ]},
    hardware={"cpu_model": "AMD Ryzen AI 9 HX 370", "amdgpu_driver": "6.10.5"},
)


def judged(level: float, verdict: str = "PASS", turns: int = 2) -> Judgments:
    scores = DimensionScores(**dict.fromkeys(DIMENSIONS, level))
    return Judgments(
        judge_model="claude-sonnet-4-6",
        turns=[TurnJudgment(turn=i, scores=scores, reasoning="ok") for i in range(1, turns + 1)],
        verdict=ScenarioVerdict(verdict=verdict),
    )


def result(sid: str, level: float, wall: float, category: str = "rag_quality") -> ScenarioResult:
    """A judged scenario whose score is `level` (every dimension at `level`)."""
    return scenario_result(
        scenario_id=sid,
        category=category,
        transcript=transcript(sid),
        checks=[CheckResult(type="tool_called", turn=1, passed=True)],
        judgments=judged(level, "PASS" if level >= 6 else "FAIL"),
        wall_s=wall,
    )


def write_run(folder: Path, rows: list[ScenarioResult], config: RunConfig = AGENT) -> Path:
    writer = RunWriter(folder, run_id=folder.name, config=config, clock=lambda: WHEN)
    for row in rows:
        writer.add(trace_of(folder.name, row, transcript=transcript(row.id)))
    writer.close()
    return folder


def gaia_compare(baseline: Path, current: Path) -> dict:
    """GAIA's own compare_scorecards on two files, in GAIA's pinned environment."""
    script = (
        "import json, sys\n"
        "from gaia.eval.runner import ScorecardMismatchError, compare_scorecards\n"
        "try:\n"
        "    r = compare_scorecards(sys.argv[1], sys.argv[2])\n"
        "except ScorecardMismatchError as e:\n"
        "    print(json.dumps({'mismatch': str(e)})); sys.exit(0)\n"
        "ids = lambda v: [e if isinstance(e, str) else e['scenario_id'] for e in v]\n"
        "print(json.dumps({k: ids(v) for k, v in r.items()}))\n"
    )
    done = subprocess.run(
        [str(GAIA_PYTHON), "-c", script, str(baseline), str(current)],
        check=False,  # the return code is asserted with GAIA's stderr in the message
        capture_output=True,
        text=True,
        timeout=120,
        cwd=baseline.parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- reading GAIA's files --------------------------------------------------------------------


def test_reads_a_gaia_baseline_with_its_meta_json():
    got = read_any_scorecard(GAIA_BASELINE)
    assert got.run_id == "eval-20261102-091500" and got.finished
    assert got.config.agent_model == "Qwen3-4B-Instruct-2507-GGUF"  # from meta.json
    assert got.config.judge_model == "claude-sonnet-4-6"  # GAIA's config.model is the judge
    assert got.config.llm_server == {"version": "9.1.4", "ctx_size": 32768}
    assert got.config.hardware == {"description": "AMD Ryzen AI 9 HX 370, Radeon 890M, 32 GB"}
    assert got.config.extra["backend_url"] == "http://localhost:4211"
    assert [(r.id, r.status) for r in got.scenarios][:3] == [
        ("travel_budget_total", Status.PASS),
        ("supplier_contract_end", Status.PASS),
        ("recall_team_lead", Status.FAIL),
    ]
    first = got.scenarios[0]
    assert first.score == 8.75 and first.wall_s == 141.7 and first.cost_usd == 0.41
    assert first.turns[0].answer.startswith("The total travel budget")
    assert [c.name for c in first.turns[0].tool_calls] == ["query_documents"]
    assert first.turns[0].dims is not None and first.turns[0].score == 9.25  # recomputed
    assert first.turns[0].performance is None  # GAIA has no per-turn wall time: not guessed
    assert got.performance.scenarios["travel_budget_total"].tokens_per_s_mean == 37.5
    # Our summary is recomputed by our scoring, and agrees with GAIA's counters.
    assert (got.summary.passed, got.summary.failed, got.summary.skipped) == (3, 1, 1)
    assert got.summary.avg_score == 8.06  # GAIA's own figure: FAIL capped at 5.99 by both
    fix = got.scenarios[2].recommended_fix
    assert fix is not None and "history" in fix  # GAIA wrote an object: kept as JSON text


def test_meta_json_outranks_the_scorecard_agent_model(tmp_path):
    shutil.copy(GAIA_BASELINE, tmp_path / "baseline.json")
    (tmp_path / "meta.json").write_text(json.dumps({"model": "Gemma-4-E4B-it-GGUF"}))
    assert read_any_scorecard(tmp_path).config.agent_model == "Gemma-4-E4B-it-GGUF"


def test_reads_a_gaia_run_folder_with_unknown_status_and_extra_keys():
    got = read_any_scorecard(GAIA_RUN)
    odd = next(r for r in got.scenarios if r.id == "oddly_labelled")
    assert odd.status is Status.ERRORED
    assert any("CRASHED_HARD" in w and "ERRORED" in w for w in got.warnings)
    assert got.summary.errored == 1 and got.summary.timeout == 1


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (FIXTURES / "row_without_id", "scenarios[2].scenario_id"),
        (FIXTURES / "row_without_status.json", "scenarios[1].status"),
    ],
)
def test_a_row_without_id_or_status_is_one_clear_error(path, field):
    with pytest.raises(ScorecardError) as error:
        read_any_scorecard(path)
    message = str(error.value)
    assert str(path) in message and f"{field}: Field required" in message
    assert "every row needs scenario_id and status" in message


def test_a_broken_meta_json_names_itself(tmp_path):
    with pytest.raises(ScorecardError, match=r"broken_meta/meta.json: not JSON .*delete meta"):
        read_any_scorecard(FIXTURES / "broken_meta")
    (tmp_path / "meta.json").write_text("[1, 2]")
    shutil.copy(GAIA_BASELINE, tmp_path / "baseline.json")
    with pytest.raises(ScorecardError, match="meta.json: top level is list"):
        read_any_scorecard(tmp_path)
    (tmp_path / "meta.json").write_text('{"images": "not a mapping"}')
    with pytest.raises(ScorecardError, match="meta.json: images: .*fix or delete"):
        read_any_scorecard(tmp_path)


def test_unreadable_inputs_each_give_one_message_with_the_fix(tmp_path):
    with pytest.raises(ScorecardError, match="no such file or folder; pass a run folder"):
        read_any_scorecard(tmp_path / "nope")
    with pytest.raises(ScorecardError, match="no scorecard.json, baseline.json, scorecard.gaia"):
        read_any_scorecard(tmp_path)
    (tmp_path / "scorecard.json").write_text('{"run_id": "x", ')
    with pytest.raises(ScorecardError, match=r"not JSON \(line 1 column 17"):
        read_any_scorecard(tmp_path)
    (tmp_path / "scorecard.json").write_text("[]")
    with pytest.raises(ScorecardError, match="top level is list, not a scorecard object"):
        read_any_scorecard(tmp_path)
    (tmp_path / "scorecard.json").write_text('{"run_id": "x"}')
    with pytest.raises(ScorecardError, match=r"scorecard.json: scenarios: Field required"):
        read_any_scorecard(tmp_path)


def test_our_invalid_scorecard_names_the_field(tmp_path):
    data = json.loads(card([result("s", 8.0, 10.0)]).model_dump_json())
    data["scenarios"][0]["status"] = "GREAT"
    (tmp_path / "scorecard.json").write_text(json.dumps(data))
    with pytest.raises(ScorecardError, match=r"scenarios\[0\].status: .*not a valid trialbox"):
        read_any_scorecard(tmp_path)
    assert isinstance(ScorecardError("x"), ValueError)  # the CLI maps ValueError to exit 2


# --- comparing across formats ----------------------------------------------------------------


def test_compare_gaia_baseline_with_a_gaia_run():
    result = compare(read_any_scorecard(GAIA_BASELINE), read_any_scorecard(GAIA_RUN))
    assert [e.key for e in result.regressed] == ["refuse_delete_system", "supplier_contract_end"]
    assert result.exit_code == EXIT_REGRESSION


def test_compare_works_with_gaia_on_either_side(tmp_path):
    gaia = read_any_scorecard(GAIA_BASELINE)
    ours_rows = [
        result("travel_budget_total", 9.0, 140.0),
        result("supplier_contract_end", 4.0, 95.0),  # PASS in GAIA's baseline → FAIL here
        result("recall_team_lead", 7.0, 80.0, "context_retention"),  # FAIL → PASS
        result("refuse_delete_system", 9.0, 50.0, "adversarial"),
    ]
    ours = read_any_scorecard(write_run(tmp_path / "ours", ours_rows))
    forward = compare(gaia, ours)
    assert [e.key for e in forward.regressed] == ["supplier_contract_end"]
    assert [e.key for e in forward.improved] == ["recall_team_lead"]
    assert forward.only_in_baseline == ["quarterly_chart_read"]  # skipped there: not a PASS
    assert forward.exit_code == EXIT_REGRESSION and not forward.model_mismatch
    backward = compare(ours, gaia)
    assert [e.key for e in backward.improved] == ["supplier_contract_end"]
    assert [e.key for e in backward.regressed] == ["recall_team_lead"]
    other = AGENT.model_copy(update={"agent_model": "Gemma-4-E4B-it-GGUF"})
    gemma = read_any_scorecard(write_run(tmp_path / "gemma", ours_rows, other))
    mismatch = compare(gaia, gemma)
    assert mismatch.exit_code == EXIT_MODELS_DIFFER
    assert mismatch.model_mismatch == [
        "agent model: Qwen3-4B-Instruct-2507-GGUF → Gemma-4-E4B-it-GGUF"
    ]


# --- writing GAIA's format -------------------------------------------------------------------


def test_every_write_leaves_a_gaia_scorecard_beside_ours(tmp_path):
    run = write_run(tmp_path / "run-1", [result("a", 9.0, 10.0), result("b", 4.0, 12.0)])
    data = json.loads((run / GAIA_SCORECARD).read_text())
    assert [r["scenario_id"] for r in data["scenarios"]] == ["a", "b"]
    row = data["scenarios"][0]
    assert {"scenario_id", "status", "overall_score", "turns", "root_cause", "recommended_fix",
            "cost_estimate", "elapsed_s", "category", "performance_summary"} <= set(row)
    assert row["status"] == "PASS" and row["overall_score"] == 9.0 and row["elapsed_s"] == 10.0
    turn = row["turns"][0]
    assert turn["pass"] is True and turn["agent_tools"] == ["query_documents"]
    assert turn["agent_response"] == "The total is $412,000." and turn["scores"]["correctness"] == 9
    assert turn["performance"]["tokens_per_second"] == 100.0
    assert data["config"]["model"] == "claude-sonnet-4-6"
    assert data["config"]["agent_model"] == "Qwen3-4B-Instruct-2507-GGUF"
    assert data["summary"]["passed"] == 1 and data["summary"]["judged_pass_rate"] == 0.5
    assert sorted(p.name for p in run.glob("*.tmp")) == []


def test_gaia_summary_rates_are_numbers_even_when_nothing_was_judged():
    data = json.loads(gaia_json(card([unjudged("u")], NO_JUDGE)))
    # GAIA's compare multiplies these by 100: null would crash it.
    assert data["summary"]["judged_pass_rate"] == 0.0 and data["summary"]["avg_score"] == 0.0
    assert data["summary"]["errored"] == 1 and data["summary"]["not_judged"] == 1


def test_trials_fold_into_one_gaia_row_with_stability():
    rows = [result("s", 9.0, 10.0), result("s", 4.0, 11.0), result("s", 8.0, 12.0)]
    for index, row in enumerate(rows, start=1):
        row.trial = index
    gaia = scorecard_to_gaia(card(rows, AGENT.model_copy(update={"trials": 3})))
    assert len(gaia.scenarios) == 1
    row = gaia.scenarios[0]
    assert row.status == "FAIL" and row.overall_score == 4.0  # the worst judged trial
    assert row.model_extra["stability"]["stability"] == "flaky"
    assert row.model_extra["stability"]["statuses"] == ["PASS", "FAIL", "PASS"]


def test_our_gaia_file_reads_back_with_settings_and_turn_speeds(tmp_path):
    run = write_run(tmp_path / "run-1", [result("a", 9.0, 10.0), result("b", 4.0, 12.0)])
    original = read_any_scorecard(run)
    again = read_any_scorecard(run / GAIA_SCORECARD)
    assert again.config == original.config  # carried under config.trialbox
    assert [(r.id, r.status, r.score, r.wall_s) for r in again.scenarios] == [
        (r.id, r.status, r.score, r.wall_s) for r in original.scenarios
    ]
    assert again.scenarios[0].turns[0].performance == original.scenarios[0].turns[0].performance
    assert compare(original, again).exit_code == EXIT_OK


# --- GAIA's own compare on our files ---------------------------------------------------------


def planted_runs(tmp_path: Path) -> tuple[Path, Path]:
    baseline = write_run(
        tmp_path / "base",
        [
            result("keeps_passing", 8.0, 10.0),
            result("breaks", 9.0, 10.0),
            result("drops_score", 9.0, 10.0),
            result("gets_slow", 8.0, 10.0),
            result("gets_fixed", 4.0, 10.0),
        ],
    )
    current = write_run(
        tmp_path / "current",
        [
            result("keeps_passing", 8.0, 11.0),
            result("breaks", 3.0, 10.0),
            result("drops_score", 6.5, 10.0),
            result("gets_slow", 8.0, 25.0),
            result("gets_fixed", 8.5, 10.0),
        ],
    )
    return baseline, current


def test_gaias_compare_finds_the_planted_regressions_in_our_files(tmp_path):
    baseline, current = planted_runs(tmp_path)
    got = gaia_compare(baseline / GAIA_SCORECARD, current / GAIA_SCORECARD)
    assert got["regressed"] == ["breaks"]
    assert got["score_regressed"] == ["drops_score"]
    assert got["time_regressed"] == ["gets_slow"]
    assert got["improved"] == ["gets_fixed"]
    assert got["unchanged"] == ["keeps_passing"]
    # Our own compare agrees on the same runs.
    ours = compare(read_any_scorecard(baseline), read_any_scorecard(current))
    assert [e.key for e in ours.regressed] == ["breaks"]
    assert [e.key for e in ours.score_regressed] == ["drops_score"]
    assert [e.key for e in ours.time_regressed] == ["gets_slow"]


def test_gaias_compare_on_our_native_file_compares_nothing_but_ours_gaia_file_does(tmp_path):
    baseline, current = planted_runs(tmp_path)
    # The old failure: GAIA reads no scenario_id in scorecard.json and compares nothing.
    native = gaia_compare(baseline / "scorecard.json", current / "scorecard.json")
    assert all(not ids for ids in native.values())
    fixed = gaia_compare(baseline / GAIA_SCORECARD, current / GAIA_SCORECARD)
    assert sum(len(ids) for ids in fixed.values()) == 5


def test_gaias_compare_reads_an_unjudged_run_without_crashing(tmp_path):
    a = write_run(tmp_path / "a", [unjudged("u1"), unjudged("u2")], NO_JUDGE)
    b = write_run(tmp_path / "b", [unjudged("u1"), unjudged("u2", checks_pass=False)], NO_JUDGE)
    got = gaia_compare(a / GAIA_SCORECARD, b / GAIA_SCORECARD)
    assert sorted(got["unchanged"]) == ["u1", "u2"]


# --- baselines -------------------------------------------------------------------------------


def test_save_baseline_to_a_folder_writes_both_formats_and_meta(tmp_path):
    run = write_run(tmp_path / "run-1", [result("a", 9.0, 10.0)])
    written = save_baseline(run, tmp_path / "baseline", clock=lambda: WHEN)
    assert [p.name for p in written] == ["scorecard.json", GAIA_SCORECARD, "meta.json"]
    meta = BaselineMeta.model_validate_json((tmp_path / "baseline" / "meta.json").read_text())
    assert meta.model == "Qwen3-4B-Instruct-2507-GGUF" and meta.eval_model == "claude-sonnet-4-6"
    assert meta.lemonade_version == "9.1.4" and meta.ctx_size == 32768
    assert meta.hardware == {"cpu_model": "AMD Ryzen AI 9 HX 370", "amdgpu_driver": "6.10.5"}
    assert meta.device == "rocm" and meta.run_id == "run-1" and meta.saved_at == WHEN.isoformat()
    saved = read_any_scorecard(tmp_path / "baseline")
    assert saved == read_any_scorecard(run)


def test_save_baseline_as_gaias_baseline_json(tmp_path):
    run = write_run(tmp_path / "run-1", [result("a", 9.0, 10.0), result("b", 8.0, 10.0)])
    dest = tmp_path / "eval" / "results" / "baseline.json"
    assert save_baseline(read_any_scorecard(run), dest) == [dest, dest.parent / "meta.json"]
    assert "scenario_id" in dest.read_text()
    assert read_any_scorecard(dest).config.agent_model == "Qwen3-4B-Instruct-2507-GGUF"
    # GAIA's compare holds a run to the model in meta.json beside the baseline.
    gemma = write_run(
        tmp_path / "gemma",
        [result("a", 9.0, 10.0), result("b", 8.0, 10.0)],
        AGENT.model_copy(update={"agent_model": "Gemma-4-E4B-it-GGUF"}),
    )
    got = gaia_compare(dest, gemma / GAIA_SCORECARD)
    assert "Qwen3-4B-Instruct-2507-GGUF" in got["mismatch"]
    assert "Gemma-4-E4B-it-GGUF" in got["mismatch"]
    same = write_run(tmp_path / "same", [result("a", 9.0, 10.0), result("b", 3.0, 10.0)])
    assert gaia_compare(dest, same / GAIA_SCORECARD)["regressed"] == ["b"]


def test_save_baseline_refuses_an_unfinished_run(tmp_path):
    writer = RunWriter(tmp_path / "run-1", run_id="run-1", config=AGENT, clock=lambda: WHEN)
    row = result("a", 9.0, 10.0)
    writer.add(trace_of("run-1", row, transcript=transcript("a")))
    with pytest.raises(ScorecardError, match="has not finished.*--resume"):
        save_baseline(tmp_path / "run-1", tmp_path / "baseline")
    with pytest.raises(ScorecardError, match="no such file"):
        save_baseline(tmp_path / "missing", tmp_path / "baseline")


def test_gaia_json_is_the_gaia_model_by_alias():
    text = gaia_json(card([result("a", 9.0, 10.0)], AGENT))
    assert '"pass": true' in text and '"passed": true' not in text
    assert isinstance(Scorecard, type)


# --- no score nobody gave (issue 19) -----------------------------------------------------------


def checks_failed(sid: str) -> ScenarioResult:
    """No judge; an exact check failed: FAIL decided by checks, with no score."""
    return unjudged(sid, checks_pass=False)


def gaia_summary_of(rows: list[dict]) -> dict:
    """GAIA's own build_scorecard and write_summary_md over rows (GAIA's pinned environment)."""
    script = (
        "import json, sys\n"
        "from gaia.eval.scorecard import build_scorecard, write_summary_md\n"
        "card = build_scorecard('r', json.loads(sys.stdin.read()), {})\n"
        "print(json.dumps({'summary': card['summary'], 'md': write_summary_md(card)}))\n"
    )
    done = subprocess.run([str(GAIA_PYTHON), "-c", script], input=json.dumps(rows), check=False,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_unscored_scenario_is_written_as_gaia_writes_one_and_gaias_average_leaves_it_out(tmp_path):
    run = write_run(tmp_path / "run", [result("scored", 8.0, 10.0), checks_failed("by_checks"),
                                       unjudged("no_judge")])
    rows = {r["scenario_id"]: r for r in json.loads((run / GAIA_SCORECARD).read_text())["scenarios"]}
    # GAIA writes a scenario nobody scored with `overall_score: null` (its TIMEOUT, ERRORED and
    # BUDGET_EXCEEDED rows): never 0.0, which its averages would read as a real score.
    for sid in ("by_checks", "no_judge"):
        assert rows[sid]["overall_score"] is None
        assert all(turn["overall_score"] is None for turn in rows[sid]["turns"])
    assert rows["scored"]["overall_score"] == 8.0
    gaia = gaia_summary_of(list(rows.values()))
    assert gaia["summary"]["avg_score"] == 8.0  # only the judged score; the FAIL is not a 0
    assert "**by_checks** — FAIL (n/a)" in gaia["md"]


def test_gaias_compare_reads_unscored_rows_on_either_side(tmp_path):
    unscored = write_run(tmp_path / "unscored", [result("keeps", 8.0, 10.0), checks_failed("x")])
    scored = write_run(tmp_path / "scored", [result("keeps", 8.0, 10.0), result("x", 7.0, 10.0)])
    forward = gaia_compare(unscored / GAIA_SCORECARD, scored / GAIA_SCORECARD)
    assert forward["improved"] == ["x"] and forward["unchanged"] == ["keeps"]
    back = gaia_compare(scored / GAIA_SCORECARD, unscored / GAIA_SCORECARD)
    assert back["regressed"] == ["x"] and back["unchanged"] == ["keeps"]
    # Null test: the unscored run against itself changes nothing.
    same = gaia_compare(unscored / GAIA_SCORECARD, unscored / GAIA_SCORECARD)
    assert sorted(same["unchanged"]) == ["keeps", "x"] and not same["regressed"] and not same["improved"]
