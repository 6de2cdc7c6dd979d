"""The files of a results folder, as pydantic models (their JSON Schemas are exported).

`ScenarioResult` is one row of the scorecard: enough to read, compare and render a run without
opening traces. `Trace` is everything about one scenario run, for an engineer chasing a failure.
A scenario is named here only by id/name/category/severity strings, so this package does not
depend on how scenarios are loaded.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runner.judgments import ClaimJudgment, DimensionScores, JudgeUsage, Judgments
from runner.outcomes import CheckResult
from runner.scoring import Decider, QualityGates, Summary
from runner.status import Status
from runner.transcript import ToolCall, Transcript, TurnPerformance
from runner.trials import JudgeAgreement, TrialStats

SCHEMA_VERSION = 1


class _Model(BaseModel):
    # Files written by one version must be read back exactly; a typo'd field is an error.
    model_config = ConfigDict(extra="forbid")


class TurnResult(_Model):
    turn: int
    user_message: str = ""
    answer: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    score: float | None = None  # recomputed from dims; None when not judged
    passed: bool | None = None  # GAIA's turn rule; None when not judged
    dims: DimensionScores | None = None
    reasoning: str = ""
    checks: list[CheckResult] = Field(default_factory=list)
    claims: list[ClaimJudgment] = Field(default_factory=list)
    performance: TurnPerformance | None = None
    error: str | None = None


class ScenarioResult(_Model):
    id: str
    name: str = ""
    category: str = "uncategorized"
    severity: str = "standard"
    status: Status
    score: float | None = None  # mean of recomputed turn scores; None when not judged
    gates: QualityGates = Field(default_factory=QualityGates)
    turns: list[TurnResult] = Field(default_factory=list)
    checks: list[CheckResult] = Field(default_factory=list)  # scenario-level checks
    claims: list[ClaimJudgment] = Field(default_factory=list)  # scenario-level claims
    notes: list[str] = Field(default_factory=list)  # why the status is what it is
    decided_by: Decider | None = Field(
        default=None,
        description="what decided PASS/FAIL/BLOCKED: judge, or checks (a failed exact check "
        "without a judge); None for every other status",
    )
    root_cause: str | None = None
    recommended_fix: str | None = None
    error: str | None = None
    wall_s: float | None = None
    trace: str | None = None  # path of the trace, relative to the run folder
    trial: int | None = None  # 1-based trial index when the run has trials > 1
    judge_model: str | None = None
    judge_usage: JudgeUsage | None = None
    cost_usd: float = 0.0

    @property
    def key(self) -> str:
        """Unique within a run: the id, plus the trial when there are several."""
        return self.id if self.trial is None else f"{self.id}__trial{self.trial}"

    def all_checks(self) -> list[CheckResult]:
        return [c for t in self.turns for c in t.checks] + self.checks

    def failed_checks(self) -> list[CheckResult]:
        return [c for c in self.all_checks() if not c.passed]

    def all_claims(self) -> list[ClaimJudgment]:
        return [c for t in self.turns for c in t.claims] + self.claims


class RunConfig(_Model):
    """Every choice that shaped a run, including the ones made automatically."""

    judge_provider: str | None = None  # anthropic | openai | None (not judged)
    judge_model: str | None = None
    judge_url: str | None = None
    simulator_mode: str = "scripted"  # scripted | llm
    simulator_model: str | None = None
    device: str | None = None  # cpu | rocm | npu
    device_reason: str | None = None  # why --device auto picked it
    backend: str | None = None  # docker | local
    trialbox_version: str | None = None
    images: dict[str, str] = Field(default_factory=dict)  # image name → id
    agent_model: str | None = Field(
        default=None, description="the chat model name the Agent UI asked the LLM server for"
    )
    served_model: str | None = Field(
        default=None,
        description='what really answered under agent_model, e.g. "SmolLM2-135M-Instruct Q4_1 '
        'by trialbox llm-cpu" (see runner.report.served_model_of); None when unknown',
    )
    derived_checks: bool = Field(
        default=True,
        description="whether answer checks were derived from ground_truth.expected_answer "
        "(off with --no-derived-checks)",
    )
    llm_server: dict[str, Any] = Field(default_factory=dict)  # what the server says it is
    hardware: dict[str, Any] = Field(default_factory=dict)  # fingerprint: cpu, gpu, driver...
    concurrency: int = 1
    trials: int = 1
    rejudge: int = 1
    forced_tool: str | None = None  # the llm server's forced-first-tool switch, when on
    scenario_filter: list[str] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)

    @property
    def judged(self) -> bool:
        return self.judge_provider not in (None, "", "none")


class Cost(_Model):
    estimated_total_usd: float = 0.0
    judge_requests: int = 0
    judge_input_tokens: int = 0
    judge_output_tokens: int = 0
    judge_cache_read_tokens: int = 0
    judge_cache_write_tokens: int = 0


class PerformanceStats(_Model):
    """Speed over a set of turns. None = not measured (never a guess)."""

    wall_s: float | None = None  # scenario wall clock (sum over scenarios in totals)
    turns: int = 0
    turn_wall_s_mean: float | None = None
    turn_wall_s_p50: float | None = None
    turn_wall_s_p90: float | None = None
    ttft_s_mean: float | None = None
    tokens_per_s_mean: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0


class Performance(_Model):
    totals: PerformanceStats = Field(default_factory=PerformanceStats)
    scenarios: dict[str, PerformanceStats] = Field(default_factory=dict)  # by result key


class Scorecard(_Model):
    schema_version: int = SCHEMA_VERSION
    run_id: str
    timestamp: datetime
    finished: bool = False  # False while the run is still writing results
    config: RunConfig = Field(default_factory=RunConfig)
    summary: Summary = Field(default_factory=Summary)
    scenarios: list[ScenarioResult] = Field(default_factory=list)
    cost: Cost = Field(default_factory=Cost)
    performance: Performance = Field(default_factory=Performance)
    trials: dict[str, TrialStats] | None = None  # by scenario id, when trials > 1
    judge_agreement: JudgeAgreement | None = None  # when --rejudge K > 1
    warnings: list[str] = Field(default_factory=list)


class Trace(_Model):
    """Everything about one scenario run: traces/<id>.json (or <id>__trial<k>.json)."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    result: ScenarioResult
    transcript: Transcript | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)  # runner.evidence, as JSON
    judgments: Judgments | None = None
    judge_error: str | None = None
    checks: list[CheckResult] = Field(default_factory=list)  # every check, turn and scenario
    artifacts: list[str] = Field(default_factory=list)  # paths relative to the run folder
