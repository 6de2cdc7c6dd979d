"""Turn what a scenario run produced (transcript, checks, judgments) into report records.

The engine calls `scenario_result` once per finished scenario and hands the result and its
`trace_of` to the RunWriter. Scoring decides; this only arranges its decisions for the files.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from runner.records.judgments import Judgments, TurnJudgment
from runner.records.outcomes import CheckResult
from runner.records.status import Status
from runner.records.transcript import SetupTimings, Transcript, TurnRecord
from runner.report._models import Cost, RunConfig, ScenarioResult, Scorecard, Trace, TurnResult
from runner.report._performance import RESCORED_FROM, performance_of
from runner.verdict import ScenarioOutcome, judgings_cost_usd, scenario_status, summarize
from runner.verdict.trials import JudgeAgreement, TrialStats, trial_stats


def trace_name(scenario_id: str, trial: int | None) -> str:
    """traces/<id>.json, or traces/<id>__trial<k>.json for the k-th of several trials."""
    suffix = "" if trial is None else f"__trial{trial}"
    return f"traces/{scenario_id}{suffix}.json"


def scenario_result(
    *,
    scenario_id: str,
    name: str = "",
    category: str = "uncategorized",
    severity: str = "standard",
    transcript: Transcript | None,
    checks: Sequence[CheckResult] = (),
    judgments: Judgments | None = None,
    infra: Status | None = None,
    error: str | None = None,
    wall_s: float | None = None,
    trial: int | None = None,
    judgings: Sequence[Judgments] = (),
    setup: SetupTimings | None = None,
) -> ScenarioResult:
    """Score one scenario run and lay it out as a scorecard row. `judgings` are every judging
    of the transcript (--rejudge K): the row is scored on the first, but costs all of them.
    `setup` is where set-up time went when no transcript carries it (a set-up that failed);
    otherwise the transcript's own `setup` is used."""
    turn_numbers = [t.turn for t in transcript.turns] if transcript else None
    outcome = scenario_status(judgments, checks, infra=infra, conversation_turns=turn_numbers)
    usage = judgments.usage if judgments else None
    every = list(judgings) or ([judgments] if judgments is not None else [])
    cost = judgings_cost_usd(every)
    verdict = judgments.verdict if judgments else None
    return ScenarioResult(
        id=scenario_id,
        name=name,
        category=category,
        severity=severity,
        agent_id=transcript.agent_id if transcript else None,
        gaia_version=transcript.gaia_version if transcript else None,
        status=outcome.status,
        score=outcome.score,
        gates=outcome.gates,
        turns=_turn_results(transcript, checks, judgments, outcome),
        checks=[c for c in checks if c.turn is None],
        claims=[c for c in judgments.claims if c.turn is None] if judgments else [],
        notes=outcome.notes,
        decided_by=outcome.decided_by,
        root_cause=verdict.root_cause if verdict else None,
        recommended_fix=verdict.recommended_fix if verdict else None,
        error=error,
        wall_s=wall_s,
        setup=transcript.setup if transcript and transcript.setup else setup,
        trace=trace_name(scenario_id, trial),
        trial=trial,
        judge_model=judgments.judge_model if judgments else None,
        judge_usage=usage,
        cost_usd=cost,
    )


def _turn_results(
    transcript: Transcript | None,
    checks: Sequence[CheckResult],
    judgments: Judgments | None,
    outcome: ScenarioOutcome,
) -> list[TurnResult]:
    records: dict[int, TurnRecord] = {t.turn: t for t in transcript.turns} if transcript else {}
    judged: dict[int, TurnJudgment] = {j.turn: j for j in judgments.turns} if judgments else {}
    scored = {t.turn: t for t in outcome.turns}
    rows = []
    for number in sorted(set(records) | set(judged)):
        record, judgment, score = records.get(number), judged.get(number), scored.get(number)
        rows.append(
            TurnResult(
                turn=number,
                user_message=record.user_message if record else "",
                user_message_source=record.user_message_source if record else None,
                simulator_model=record.simulator_model if record else None,
                answer=record.answer if record else "",
                tool_calls=record.tool_calls if record else [],
                score=score.score if score else None,
                passed=score.passed if score else None,
                dims=judgment.scores if judgment else None,
                reasoning=judgment.reasoning if judgment else "",
                checks=[c for c in checks if c.turn == number],
                claims=[c for c in judgments.claims if c.turn == number] if judgments else [],
                performance=record.performance if record else None,
                error=record.error if record else None,
            )
        )
    return rows


def trace_of(
    run_id: str,
    result: ScenarioResult,
    *,
    transcript: Transcript | None,
    checks: Sequence[CheckResult] = (),
    judgments: Judgments | None = None,
    judge_error: str | None = None,
    evidence: dict[str, Any] | None = None,
    artifacts: Sequence[str] = (),
) -> Trace:
    return Trace(
        run_id=run_id,
        result=result,
        transcript=transcript,
        evidence=evidence or {},
        judgments=judgments,
        judge_error=judge_error,
        checks=list(checks),
        artifacts=list(artifacts),
    )


def cost_of(results: Sequence[ScenarioResult]) -> Cost:
    usages = [r.judge_usage for r in results if r.judge_usage is not None]
    return Cost(
        estimated_total_usd=round(sum(r.cost_usd for r in results), 4),
        judge_requests=sum(u.requests for u in usages),
        judge_input_tokens=sum(u.input_tokens for u in usages),
        judge_output_tokens=sum(u.output_tokens for u in usages),
        judge_cache_read_tokens=sum(u.cache_read_tokens for u in usages),
        judge_cache_write_tokens=sum(u.cache_write_tokens for u in usages),
    )


def trials_of(results: Sequence[ScenarioResult]) -> dict[str, TrialStats]:
    """Per scenario id, statistics over its trials (in trial order)."""
    by_id: dict[str, list[ScenarioResult]] = {}
    for result in results:
        by_id.setdefault(result.id, []).append(result)
    stats = {}
    for scenario_id, runs in sorted(by_id.items()):
        runs.sort(key=lambda r: r.trial or 0)
        stats[scenario_id] = trial_stats(
            scenario_id, [r.status for r in runs], [r.score for r in runs]
        )
    return stats


def build_scorecard(
    *,
    run_id: str,
    timestamp: datetime,
    config: RunConfig,
    results: Sequence[ScenarioResult],
    finished: bool = False,
    judge_agreement: JudgeAgreement | None = None,
    warnings: Sequence[str] = (),
) -> Scorecard:
    """The whole scorecard from the results so far (a partial run gives a partial scorecard)."""
    return Scorecard(
        run_id=run_id,
        timestamp=timestamp,
        finished=finished,
        config=config,
        summary=summarize(results),
        scenarios=list(results),
        cost=cost_of(results),
        # A rescore replays saved transcripts: its wall clock is not the agent's.
        performance=performance_of(results, replayed=RESCORED_FROM in config.extra),
        trials=trials_of(results) if config.trials > 1 else None,
        judge_agreement=judge_agreement,
        warnings=list(warnings),
    )
