"""Our scorecard in GAIA's format: scorecard.gaia.json, for `gaia eval agent --compare`.

Every field GAIA's compare reads (`scenario_id`, `status`, `overall_score`, `elapsed_s`,
`summary.pass_rate/judged_pass_rate/avg_score`, `config.model`, `config.agent_model`,
`config.scenario_filter`) is written with a value GAIA can do arithmetic on, so
`gaia eval agent --compare` reads a trialbox run as it reads its own. Trials fold into one row
per scenario, as GAIA's `--iterations` does (runner/report/_fold.py), with a `stability` block.
Our run settings ride along under `config.trialbox`, and each turn's wall time under
`performance.wall_s`, so reading the file back (runner/report/_from_gaia.py) loses as little as
possible.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from typing import Any

from runner.records.status import JUDGED, Status
from runner.report._fold import group_trials, representative
from runner.report._gaia import (
    TRIALBOX_CONFIG_KEY,
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
from runner.report._models import RunConfig, ScenarioResult, Scorecard, TurnResult
from runner.verdict import StatusCounts, summarize

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
