"""GAIA's scorecard in ours: its rows become ScenarioResults, its summary is recounted by ours.

The summary is recomputed by our own scoring (pure), so a GAIA run and ours are counted by one
rule. GAIA has no exact checks, claims or per-turn wall times; those stay empty, never guessed.
A file we wrote (runner/report/_to_gaia.py) carries our settings under `config.trialbox` and
gives them back exactly.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from runner.records.judgments import DIMENSIONS, DimensionScores
from runner.records.status import JUDGED, Status
from runner.records.transcript import ToolCall, TurnPerformance
from runner.report._assemble import build_scorecard
from runner.report._gaia import (
    TRIALBOX_CONFIG_KEY,
    BaselineMeta,
    GaiaScenario,
    GaiaScorecard,
    GaiaTurn,
    GaiaTurnPerformance,
)
from runner.report._models import RunConfig, ScenarioResult, Scorecard, TurnResult
from runner.report._performance_models import PerformanceStats
from runner.verdict import QualityGates, turn_passes, turn_score

GAIA_JUDGE_PROVIDER = "claude-code"  # GAIA drives and judges with `claude -p`


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
