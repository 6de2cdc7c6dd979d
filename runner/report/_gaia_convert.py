"""Translate scorecards between GAIA's format and ours, both ways.

Ours → GAIA (`scorecard.gaia.json`): every field GAIA's compare reads (`scenario_id`, `status`,
`overall_score`, `elapsed_s`, `summary.pass_rate/judged_pass_rate/avg_score`, `config.model`,
`config.agent_model`, `config.scenario_filter`) is written with a value GAIA can do arithmetic
on, so `gaia eval agent --compare` reads a trialbox run as it reads its own. Trials fold into
one row per scenario, as GAIA's `--iterations` does (runner/report/_fold.py), with a
`stability` block. Our run settings ride along under `config.trialbox`, and each turn's wall
time under `performance.wall_s`, so reading the file back loses as little as possible.

GAIA → ours: rows become ScenarioResults and the summary is recomputed by our own scoring
(pure), so a GAIA run and ours are counted by one rule. GAIA has no exact checks, claims or
per-turn wall times; those stay empty, never guessed.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from runner.records.judgments import DIMENSIONS, DimensionScores
from runner.records.status import JUDGED, Status
from runner.records.transcript import ToolCall, TurnPerformance
from runner.report._assemble import build_scorecard
from runner.report._fold import group_trials, representative
from runner.report._gaia import (
    BaselineMeta,
    GaiaCategory,
    GaiaConfig,
    GaiaCost,
    GaiaCostEstimate,
    GaiaPerformanceSummary,
    GaiaScenario,
    GaiaScorecard,
    GaiaSummary,
    GaiaTurn,
    GaiaTurnPerformance,
)
from runner.report._models import (
    PerformanceStats,
    RunConfig,
    ScenarioResult,
    Scorecard,
    TurnResult,
)
from runner.verdict.scoring import QualityGates, StatusCounts, summarize, turn_passes, turn_score

GAIA_JUDGE_PROVIDER = "claude-code"  # GAIA drives and judges with `claude -p`
TRIALBOX_CONFIG_KEY = "trialbox"  # where our RunConfig rides inside GAIA's config


SERVER_SEPARATOR = " by "  # served_model reads "<model> by <server>" (runner/report/_identity)


def agent_model_of(config: RunConfig) -> str | None:
    """The model that actually answered, without the server that served it.

    The served model when recorded ("SmolLM2-135M-Instruct Q4_1 by trialbox llm-cpu" →
    "SmolLM2-135M-Instruct Q4_1"), else the name the agent asked for. The server is left out on
    purpose: two Lemonade builds serving one model are the same model (that is what a
    driver-build comparison compares), and meta.json keeps the server's version apart.
    """
    served = config.served_model
    if served:
        return served.rsplit(SERVER_SEPARATOR, 1)[0].strip() or served
    return config.agent_model


# --- ours → GAIA ---------------------------------------------------------------------------


def _gaia_turn(turn: TurnResult) -> GaiaTurn:
    perf = turn.performance
    performance = None
    if perf is not None:
        performance = GaiaTurnPerformance.model_validate(
            {
                "tokens_per_second": perf.tokens_per_s,
                "time_to_first_token": perf.time_to_first_token_s,
                "input_tokens": perf.input_tokens,
                "output_tokens": perf.output_tokens,
                "flags": [],
                "wall_s": perf.wall_s,  # ours: GAIA has no per-turn wall time
            }
        )
    return GaiaTurn.model_validate(
        {
            "turn": turn.turn,
            "user_message": turn.user_message,
            "agent_response": turn.answer,
            "agent_tools": [call.name for call in turn.tool_calls],
            "scores": turn.dims.model_dump() if turn.dims else {},
            "overall_score": turn.score,
            "pass": turn.passed,
            "reasoning": turn.reasoning,
            "performance": performance,
        }
    )


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _performance_summary(result: ScenarioResult) -> GaiaPerformanceSummary | None:
    perfs = [t.performance for t in result.turns if t.performance is not None]
    tps = [p.tokens_per_s for p in perfs if p.tokens_per_s]
    ttft = [p.time_to_first_token_s for p in perfs if p.time_to_first_token_s]
    tokens_in = sum(p.input_tokens or 0 for p in perfs)
    tokens_out = sum(p.output_tokens or 0 for p in perfs)
    # Like GAIA: no stats at all → None, so `scenarios_with_data` is not overstated.
    if not (tps or ttft or tokens_in or tokens_out):
        return None
    return GaiaPerformanceSummary(
        avg_tokens_per_second=_mean(tps),
        avg_time_to_first_token=_mean(ttft),
        total_input_tokens=tokens_in,
        total_output_tokens=tokens_out,
        turns_measured=len(tps),
    )


def _stability(runs: Sequence[ScenarioResult]) -> dict[str, Any]:
    judged = [r for r in runs if r.status in JUDGED]
    passes = sum(1 for r in judged if r.status is Status.PASS)
    scores = [r.score for r in judged if r.score is not None]
    label = None
    if judged:
        label = "stable-pass" if passes == len(judged) else "stable-fail" if not passes else "flaky"
    return {
        "runs": len(runs),
        "judged": len(judged),
        "pass_count": passes,
        "pass_rate": passes / len(judged) if judged else None,
        "stability": label,
        "score_avg": _mean(scores),
        "score_min": min(scores) if scores else None,
        "score_max": max(scores) if scores else None,
        "score_stdev": statistics.stdev(scores) if len(scores) > 1 else None,
        "statuses": [r.status.value for r in runs],
    }


def _gaia_row(runs: Sequence[ScenarioResult]) -> GaiaScenario:
    row = representative(runs)
    data: dict[str, Any] = {
        "scenario_id": row.id,
        "status": row.status.value,
        "overall_score": row.score,
        "turns": [_gaia_turn(t) for t in row.turns],
        "root_cause": row.root_cause,
        "recommended_fix": row.recommended_fix,
        "cost_estimate": GaiaCostEstimate(
            turns=len(row.turns), estimated_usd=sum(r.cost_usd for r in runs)
        ),
        "elapsed_s": row.wall_s,
        "category": row.category,
        "name": row.name,
        "severity": row.severity,
        "error": row.error,
        "performance_summary": _performance_summary(row),
        # trialbox resolves --agent/--agent-map before creating the session and asks for that
        # id, so what was requested is what ran (GAIA fails a row when the two differ).
        "agent_type_requested": row.agent_id,
        "agent_type_observed": row.agent_id,
        "gaia_version": row.gaia_version,  # ours: the Agent UI's amd-gaia version
        "notes": row.notes,  # ours: why the status is what it is
    }
    if len(runs) > 1:
        data["stability"] = _stability(runs)
    return GaiaScenario.model_validate(data)


def _counts(counts: StatusCounts) -> dict[str, int]:
    # GAIA counts a status it does not know (our NOT_JUDGED) as errored.
    return {
        "passed": counts.passed,
        "failed": counts.failed,
        "blocked": counts.blocked,
        "timeout": counts.timeout,
        "budget_exceeded": counts.budget_exceeded,
        "infra_error": counts.infra_error,
        "skipped": counts.skipped,
        "not_run": counts.not_run,
        "errored": counts.errored + counts.not_judged,
    }


def _gaia_summary(rows: Sequence[ScenarioResult]) -> GaiaSummary:
    summary = summarize(rows)
    # GAIA's compare multiplies these: they must be numbers, never null.
    return GaiaSummary.model_validate(
        {
            **_counts(summary),
            "total_scenarios": summary.total_scenarios,
            "pass_rate": summary.pass_rate,
            "judged_pass_rate": summary.judged_pass_rate or 0.0,
            "avg_score": summary.avg_score or 0.0,
            "not_judged": summary.not_judged,  # ours
            "by_category": {
                name: GaiaCategory(**_counts(cat), avg_score=cat.avg_score or 0.0)
                for name, cat in summary.by_category.items()
            },
        }
    )


def _gaia_performance(rows: Sequence[GaiaScenario]) -> dict[str, Any]:
    summaries = [r.performance_summary for r in rows if r.performance_summary is not None]
    tps = [s.avg_tokens_per_second for s in summaries if s.avg_tokens_per_second]
    ttft = [s.avg_time_to_first_token for s in summaries if s.avg_time_to_first_token]
    return {
        "avg_tokens_per_second": _mean(tps),
        "avg_time_to_first_token": _mean(ttft),
        "total_input_tokens": sum(s.total_input_tokens for s in summaries),
        "total_output_tokens": sum(s.total_output_tokens for s in summaries),
        "scenarios_with_data": len(summaries),
        "flags": [],
    }


def _run_agent(results: Sequence[ScenarioResult]) -> str | None:
    """GAIA's run-level `agent_type`: the one agent every scenario ran, else None (mixed
    agents are named per row)."""
    agents = {r.agent_id for r in results if r.agent_id}
    return agents.pop() if len(agents) == 1 else None


def scorecard_to_gaia(card: Scorecard) -> GaiaScorecard:
    """Our scorecard in GAIA's field names (one row per scenario id)."""
    groups = list(group_trials(card.scenarios).values())
    rows = [_gaia_row(runs) for runs in groups]
    extra = card.config.extra
    config = GaiaConfig.model_validate(
        {
            "backend_url": extra.get("backend_url"),
            "model": card.config.judge_model,
            "budget_per_scenario_usd": extra.get("budget_usd"),
            "agent_type": _run_agent(card.scenarios) or extra.get("agent_type"),
            "agent_model": agent_model_of(card.config),
            "commit": extra.get("commit"),
            # GAIA reads this as "a targeted run of these ids"; ours means the same.
            "scenario_filter": card.config.scenario_filter or None,
            TRIALBOX_CONFIG_KEY: card.config.model_dump(mode="json"),
        }
    )
    return GaiaScorecard(
        run_id=card.run_id,
        timestamp=card.timestamp.isoformat(),
        config=config,
        summary=_gaia_summary([representative(runs) for runs in groups]),
        scenarios=rows,
        cost=GaiaCost(estimated_total_usd=card.cost.estimated_total_usd),
        performance=_gaia_performance(rows),
        warnings=list(card.warnings),
    )


def gaia_json(card: Scorecard) -> str:
    """scorecard.gaia.json's text."""
    data = scorecard_to_gaia(card).model_dump(mode="json", by_alias=True)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


# --- GAIA → ours ---------------------------------------------------------------------------


def _status(raw: str, scenario_id: str, notes: list[str]) -> Status:
    try:
        return Status(raw.strip().upper())
    except ValueError:
        notes.append(
            f"{scenario_id}: GAIA status {raw!r} is unknown; counted as ERRORED, as GAIA does"
        )
        return Status.ERRORED


def _tool_name(tool: Any) -> str:
    if isinstance(tool, dict):
        return str(tool.get("name") or tool.get("tool") or json.dumps(tool, sort_keys=True))
    return str(tool)


def _dims(scores: dict[str, Any]) -> DimensionScores | None:
    values = {name: scores.get(name) for name in DIMENSIONS}
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values.values()):
        return None  # GAIA cannot recompute either; its own overall_score stands
    return DimensionScores.model_validate(values)


def _turn_performance(perf: GaiaTurnPerformance | None) -> TurnPerformance | None:
    wall = (perf.model_extra or {}).get("wall_s") if perf else None
    if perf is None or not isinstance(wall, (int, float)):
        return None  # GAIA records no per-turn wall time, and it is never guessed
    return TurnPerformance(
        wall_s=float(wall),
        time_to_first_token_s=perf.time_to_first_token,
        tokens_per_s=perf.tokens_per_second,
        input_tokens=None if perf.input_tokens is None else int(perf.input_tokens),
        output_tokens=None if perf.output_tokens is None else int(perf.output_tokens),
    )


def _turn(index: int, turn: GaiaTurn) -> TurnResult:
    dims = _dims(turn.scores)
    score = turn_score(dims) if dims else turn.overall_score
    passed = turn.passed if turn.passed is not None else (turn_passes(dims) if dims else None)
    return TurnResult(
        turn=turn.turn if turn.turn is not None else index,
        user_message=turn.user_message or "",
        answer=turn.agent_response or "",
        tool_calls=[ToolCall(name=_tool_name(t)) for t in turn.agent_tools],
        score=score,
        passed=passed,
        dims=dims,
        reasoning=turn.reasoning or "",
        performance=_turn_performance(turn.performance),
    )


def _text(value: Any) -> str | None:
    if value is None or value == "" or value == {}:
        return None
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _result(
    row: GaiaScenario, judge_model: str | None, run_agent: str | None, notes: list[str]
) -> ScenarioResult:
    status = _status(row.status, row.scenario_id, notes)
    version = (row.model_extra or {}).get("gaia_version")
    passed = status is Status.PASS
    rubric = True if passed else False if status is Status.FAIL else None
    cost = row.cost_estimate.estimated_usd if row.cost_estimate else None
    row_notes = (row.model_extra or {}).get("notes")
    return ScenarioResult(
        id=row.scenario_id,
        name=row.name or "",
        category=row.category or "uncategorized",
        severity=row.severity or "standard",
        agent_id=row.agent_type_observed or row.agent_type_requested or run_agent,
        gaia_version=version if isinstance(version, str) else None,
        status=status,
        score=row.overall_score if status in JUDGED else None,
        # GAIA's only gate is its rubric; no checks and no claims = vacuously met on a PASS.
        gates=QualityGates(rubric_ok=rubric, checks_ok=True, claims_ok=True if passed else None),
        turns=[_turn(i, t) for i, t in enumerate(row.turns, start=1)],
        notes=[str(n) for n in row_notes] if isinstance(row_notes, list) else [],
        root_cause=_text(row.root_cause),
        recommended_fix=_text(row.recommended_fix),
        error=_text(row.error),
        wall_s=row.elapsed_s,
        judge_model=judge_model if status in JUDGED else None,
        cost_usd=cost or 0.0,
    )


def _hardware(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    return {} if value in (None, "") else {"description": str(value)}


def _llm_server(meta: BaselineMeta | None) -> dict[str, Any]:
    if meta is None:
        return {}
    found = {"version": meta.lemonade_version, "ctx_size": meta.ctx_size}
    return {**meta.llm_server, **{k: v for k, v in found.items() if v is not None}}


def _config(gaia: GaiaScorecard, meta: BaselineMeta | None, notes: list[str]) -> RunConfig:
    cfg = gaia.config
    carried = (cfg.model_extra or {}).get(TRIALBOX_CONFIG_KEY)
    if isinstance(carried, dict):
        try:
            return RunConfig.model_validate(carried)  # a file we wrote: our settings, exact
        except ValidationError:
            notes.append("config.trialbox is from another trialbox version; settings rebuilt")
    extra = {
        "source_format": "gaia",
        "backend_url": cfg.backend_url,
        "budget_per_scenario_usd": cfg.budget_per_scenario_usd,
        "agent_type": cfg.agent_type,
        "commit": cfg.commit or (meta.commit if meta else None),
    }
    return RunConfig(
        judge_provider=GAIA_JUDGE_PROVIDER if cfg.model else None,
        judge_model=cfg.model or (meta.eval_model if meta else None),
        # meta.json outranks the scorecard, as in GAIA's compare.
        agent_model=(meta.model if meta and meta.model else None) or cfg.agent_model,
        device=meta.device if meta else None,
        images=meta.images if meta else {},
        llm_server=_llm_server(meta),
        hardware=_hardware(meta.hardware if meta else None),
        scenario_filter=list(cfg.scenario_filter or []),
        extra={k: v for k, v in extra.items() if v is not None},
    )


def _scenario_performance(row: GaiaScenario, current: PerformanceStats) -> PerformanceStats:
    summary = row.performance_summary
    if summary is None or current.turns:
        return current  # per-turn figures (from a file we wrote) are better than averages
    return current.model_copy(
        update={
            "ttft_s_mean": summary.avg_time_to_first_token,
            "tokens_per_s_mean": summary.avg_tokens_per_second,
            "input_tokens": summary.total_input_tokens,
            "output_tokens": summary.total_output_tokens,
        }
    )


def gaia_to_scorecard(
    gaia: GaiaScorecard,
    *,
    meta: BaselineMeta | None = None,
    run_id: str,
    timestamp: datetime,
) -> Scorecard:
    """Our scorecard from GAIA's; `run_id`/`timestamp` are used when GAIA's file lacks them."""
    notes: list[str] = []
    config = _config(gaia, meta, notes)
    results = [
        _result(row, config.judge_model, gaia.config.agent_type, notes) for row in gaia.scenarios
    ]
    when = timestamp
    if gaia.timestamp:
        try:
            when = datetime.fromisoformat(gaia.timestamp)
        except ValueError:
            notes.append(f"timestamp {gaia.timestamp!r} is not ISO 8601; the file's time is used")
    card = build_scorecard(
        run_id=gaia.run_id or run_id,
        timestamp=when,
        config=config,
        results=results,
        finished=True,
        warnings=[*gaia.warnings, *notes],
    )
    scenarios = {
        r.scenario_id: _scenario_performance(r, card.performance.scenarios[r.scenario_id])
        for r in gaia.scenarios
        if r.scenario_id in card.performance.scenarios
    }
    performance = card.performance.model_copy(update={"scenarios": scenarios})
    return card.model_copy(update={"performance": performance})
