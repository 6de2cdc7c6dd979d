"""What a judge said, validated. A malformed judge reply never becomes one of these."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field

DIMENSIONS = (
    "correctness",
    "tool_selection",
    "context_retention",
    "completeness",
    "efficiency",
    "personality",
    "error_recovery",
)


class DimensionScores(BaseModel):
    """GAIA's seven rubric dimensions, each 0–10 as the judge gave them."""

    correctness: float
    tool_selection: float
    context_retention: float
    completeness: float
    efficiency: float
    personality: float
    error_recovery: float


class TurnJudgment(BaseModel):
    turn: int
    scores: DimensionScores
    reasoning: str
    failure_category: str | None = None  # e.g. hallucination, wrong_tool, none
    reported_score: float | None = None  # the judge's own total; we recompute and compare


class ClaimLabel(str, Enum):
    ENTAILED = "entailed"  # the only passing label
    CONTRADICTED = "contradicted"
    NOT_ADDRESSED = "not_addressed"
    INDETERMINATE = "indeterminate"


class ClaimJudgment(BaseModel):
    turn: int | None = None  # None for a scenario-level claim
    name: str
    claim: str
    label: ClaimLabel
    rationale: str


class ScenarioVerdict(BaseModel):
    """The judge's whole-scenario view, against the scenario's expected_outcome."""

    verdict: str  # PASS | FAIL | BLOCKED_BY_ARCHITECTURE as the judge sees it
    root_cause: str | None = None
    recommended_fix: str | None = None


class JudgeUsage(BaseModel):
    """Tokens and cost spent on judging one scenario (for budgets and the cost section)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    requests: int = 0
    cost_usd: float = 0.0


class Judgments(BaseModel):
    """Everything the judge said about one scenario run."""

    judge_model: str
    turns: list[TurnJudgment] = Field(default_factory=list)
    claims: list[ClaimJudgment] = Field(default_factory=list)
    verdict: ScenarioVerdict | None = None
    usage: JudgeUsage = Field(default_factory=JudgeUsage)
