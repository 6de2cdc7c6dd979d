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

    correctness: float = Field(description="the answer is right for the documents (weight 0.25)")
    tool_selection: float = Field(description="the right tools, well used (weight 0.20)")
    context_retention: float = Field(
        description="earlier turns and documents remembered (weight 0.20)")
    completeness: float = Field(description="every part of the request answered (weight 0.15)")
    efficiency: float = Field(description="no needless steps or tool calls (weight 0.10)")
    personality: float = Field(description="tone fits the persona (weight 0.05)")
    error_recovery: float = Field(description="recovers from tool errors (weight 0.05)")


class TurnJudgment(BaseModel):
    """The judge's scores for one turn."""

    turn: int = Field(description="1-based turn number")
    scores: DimensionScores = Field(description="the seven rubric dimensions, 0-10")
    reasoning: str = Field(description="why the judge scored it so")
    failure_category: str | None = Field(
        default=None, description="e.g. hallucination, wrong_tool, none")
    reported_score: float | None = Field(
        default=None, description="the judge's own total; trialbox recomputes and compares")


class ClaimLabel(str, Enum):
    ENTAILED = "entailed"  # the only passing label
    CONTRADICTED = "contradicted"
    NOT_ADDRESSED = "not_addressed"
    INDETERMINATE = "indeterminate"


class ClaimJudgment(BaseModel):
    """How the judge labelled one claim the scenario expects the agent to make."""

    turn: int | None = Field(default=None, description="the turn; None for a scenario-level claim")
    name: str = Field(description="the claim's name in the scenario")
    claim: str = Field(description="the claim's text")
    label: ClaimLabel = Field(description="entailed (the only passing label), contradicted, "
                              "not_addressed or indeterminate")
    rationale: str = Field(description="why the judge chose the label")


class ScenarioVerdict(BaseModel):
    """The judge's whole-scenario view, against the scenario's expected_outcome."""

    verdict: str = Field(description="PASS | FAIL | BLOCKED_BY_ARCHITECTURE as the judge sees it")
    root_cause: str | None = Field(default=None, description="what went wrong, when something did")
    recommended_fix: str | None = Field(default=None, description="what would fix it")


class JudgeUsage(BaseModel):
    """Tokens and cost spent on judging one scenario (for budgets and the cost section)."""

    input_tokens: int = Field(default=0, description="prompt tokens")
    output_tokens: int = Field(default=0, description="generated tokens")
    cache_read_tokens: int = Field(default=0, description="prompt tokens read from cache")
    cache_write_tokens: int = Field(default=0, description="prompt tokens written to cache")
    requests: int = Field(default=0, description="requests sent to the judge")
    cached_replies: int = Field(
        default=0, description="replies served from trialbox's on-disk judge cache (no request "
        "sent): a repeat judging served from it replays an earlier one")
    cost_usd: float = Field(
        default=0.0, description="cost the provider reported (0 = estimate from the price table)")


class Judgments(BaseModel):
    """Everything the judge said about one scenario run."""

    judge_model: str = Field(description="the model that judged")
    turns: list[TurnJudgment] = Field(default_factory=list, description="one per judged turn")
    claims: list[ClaimJudgment] = Field(default_factory=list, description="every claim, labelled")
    verdict: ScenarioVerdict | None = Field(
        default=None, description="the whole-scenario verdict against expected_outcome")
    usage: JudgeUsage = Field(default_factory=JudgeUsage, description="tokens and cost spent")
