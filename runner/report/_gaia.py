"""GAIA's own files, as pydantic models: its scorecard.json and a baseline's meta.json.

Why lenient: GAIA's scorecards are dicts its runner grows release by release (a row may carry
`stability`, `driver_usage`, `tool_usage`, `claude_usage` ...), and GAIA itself reads them with
`.get()`. So unknown keys are kept, and a number GAIA would treat as missing (a string, null)
reads as None. Why strict on two fields: GAIA's compare keys every row by `scenario_id` and
decides by `status`; a row without them is silently skipped there ("compares nothing, exit 0"),
so here it is one error naming the file, the row and the field.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field


def _number_or_none(value: Any) -> float | None:
    # GAIA's compare treats any non-number score as absent; bool is not a score.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _int_or_zero(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return int(value)


Number = Annotated[float | None, BeforeValidator(_number_or_none)]
Count = Annotated[int, BeforeValidator(_int_or_zero)]


def _score_range(value: float | None) -> float | None:
    # Lax about type as GAIA's compare is, but a score past the rubric's 0–10 is a damaged file.
    if value is not None and not 0.0 <= value <= 10.0:
        raise ValueError("a score must be between 0 and 10")
    return value


def _not_negative(value: float | None) -> float | None:
    if value is not None and value < 0:
        raise ValueError("a time cannot be negative")
    return value


Score = Annotated[Number, AfterValidator(_score_range)]
Seconds = Annotated[Number, AfterValidator(_not_negative)]


class _Gaia(BaseModel):
    # Keep every key GAIA wrote (extra="allow") so a round trip loses nothing; "pass" is a
    # Python keyword, hence aliases and populate_by_name.
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class GaiaTurnPerformance(_Gaia):
    """Inference stats of one turn as GAIA's driver recorded them."""

    tokens_per_second: Number = Field(default=None, description="decode speed, tokens/s")
    time_to_first_token: Number = Field(default=None, description="seconds to the first token")
    input_tokens: Number = Field(default=None, description="prompt tokens")
    output_tokens: Number = Field(default=None, description="generated tokens")
    flags: list[str] = Field(default_factory=list, description="e.g. no_stats")


class GaiaTurn(_Gaia):
    """One judged turn of a GAIA scenario row."""

    turn: int | None = Field(default=None, description="1-based turn number")
    user_message: str | None = Field(default=None, description="what the simulated user said")
    agent_response: str | None = Field(default=None, description="the agent's final answer")
    agent_tools: list[Any] = Field(
        default_factory=list, description="tool names the agent called (strings or {name})"
    )
    scores: dict[str, Any] = Field(
        default_factory=dict, description="the seven rubric dimensions, 0-10"
    )
    overall_score: Score = Field(default=None, description="weighted turn score, 0-10")
    passed: bool | None = Field(default=None, alias="pass", description="GAIA's turn rule")
    failure_category: str | None = Field(default=None, description="judge's failure label")
    reasoning: str | None = Field(default=None, description="judge's reasoning")
    performance: GaiaTurnPerformance | None = Field(
        default=None, description="inference stats of the turn, when the backend gave them"
    )


class GaiaCostEstimate(_Gaia):
    """A row's `cost_estimate`: what driving and judging the scenario cost."""

    turns: Count = Field(default=0, description="turns the estimate covers")
    estimated_usd: Number = Field(default=None, description="driver/judge cost in US dollars")


class GaiaPerformanceSummary(_Gaia):
    """GAIA's per-scenario `performance_summary` (None in GAIA when no stats came back)."""

    avg_tokens_per_second: Number = Field(default=None, description="mean over turns")
    avg_time_to_first_token: Number = Field(default=None, description="mean over turns, s")
    total_input_tokens: Count = Field(default=0, description="prompt tokens, all turns")
    total_output_tokens: Count = Field(default=0, description="generated tokens, all turns")
    turns_measured: Count = Field(default=0, description="turns with a tokens/s figure")
    flags: list[str] = Field(default_factory=list, description="union of the turns' flags")


class GaiaScenario(_Gaia):
    """One row of GAIA's `scenarios` list."""

    scenario_id: str = Field(description="the scenario's id: GAIA's compare keys rows by it")
    status: str = Field(description="PASS, FAIL, BLOCKED_BY_ARCHITECTURE, TIMEOUT, ...")
    overall_score: Score = Field(default=None, description="mean turn score, 0-10")
    turns: list[GaiaTurn] = Field(default_factory=list, description="judged turns in order")
    root_cause: Any = Field(default=None, description="judge's root cause (text or object)")
    recommended_fix: Any = Field(default=None, description="judge's fix (text or object)")
    cost_estimate: GaiaCostEstimate | None = Field(default=None, description="judging cost")
    elapsed_s: Seconds = Field(default=None, description="scenario wall clock, seconds")
    category: str | None = Field(default=None, description="scenario category")
    name: str | None = Field(default=None, description="scenario display name")
    severity: str | None = Field(default=None, description="critical|high|medium|low|standard")
    error: Any = Field(default=None, description="infrastructure error (text or object)")
    performance_summary: GaiaPerformanceSummary | None = Field(
        default=None, description="inference stats over the scenario's turns"
    )
    agent_type_requested: str | None = Field(
        default=None, description="the agent type the run asked the session for"
    )
    agent_type_observed: str | None = Field(
        default=None, description="the agent type the session reported it ran"
    )


#: Where our RunConfig rides inside GAIA's config (GAIA keeps keys it does not know).
TRIALBOX_CONFIG_KEY = "trialbox"


class GaiaConfig(_Gaia):
    """GAIA's run `config`. `model` is the Claude model that drove and judged the run."""

    backend_url: str | None = Field(default=None, description="the Agent UI the run talked to")
    model: str | None = Field(default=None, description="the judge (GAIA's eval model)")
    budget_per_scenario_usd: Number = Field(default=None, description="cap per scenario, USD")
    agent_type: str | None = Field(default=None, description="GAIA agent type of the run")
    agent_model: str | None = Field(default=None, description="local model the agent ran")
    commit: str | None = Field(default=None, description="GAIA repository commit of the run")
    scenario_filter: list[str] | None = Field(
        default=None, description="ids a targeted run was limited to (None = full run)"
    )


class GaiaCategory(_Gaia):
    """Counters of one category (and, via GaiaSummary, of the whole run)."""

    passed: Count = Field(default=0, description="PASS rows")
    failed: Count = Field(default=0, description="FAIL rows")
    blocked: Count = Field(default=0, description="BLOCKED_BY_ARCHITECTURE rows")
    timeout: Count = Field(default=0, description="TIMEOUT rows")
    budget_exceeded: Count = Field(default=0, description="BUDGET_EXCEEDED rows")
    infra_error: Count = Field(default=0, description="INFRA_ERROR and SETUP_ERROR rows")
    skipped: Count = Field(default=0, description="SKIPPED_NO_DOCUMENT/MODEL rows")
    not_run: Count = Field(default=0, description="NOT_RUN rows")
    errored: Count = Field(default=0, description="ERRORED and unknown statuses")
    avg_score: Score = Field(default=None, description="judged rows, FAIL capped at 5.99")


class GaiaSummary(GaiaCategory):
    """GAIA's run `summary`."""

    total_scenarios: Count = Field(default=0, description="rows in the scorecard")
    pass_rate: Number = Field(default=None, description="passed / total")
    judged_pass_rate: Number = Field(default=None, description="passed / judged")
    by_category: dict[str, GaiaCategory] = Field(
        default_factory=dict, description="the same counters per category"
    )


class GaiaCost(_Gaia):
    """GAIA's run `cost`."""

    estimated_total_usd: Number = Field(default=None, description="sum of the rows' estimates")


class GaiaScorecard(_Gaia):
    """GAIA's scorecard.json (`gaia eval agent`), or a `baseline.json` copied from one."""

    run_id: str | None = Field(default=None, description="eval-YYYYMMDD-HHMMSS")
    timestamp: str | None = Field(default=None, description="ISO 8601, UTC")
    config: GaiaConfig = Field(default_factory=GaiaConfig, description="run settings")
    summary: GaiaSummary = Field(default_factory=GaiaSummary, description="counters and rates")
    scenarios: list[GaiaScenario] = Field(description="one row per scenario")
    cost: GaiaCost = Field(default_factory=GaiaCost, description="cost estimate")
    performance: dict[str, Any] | None = Field(
        default=None, description="run-level inference stats"
    )
    warnings: list[str] = Field(default_factory=list, description="scorecard warnings")


class BaselineMeta(_Gaia):
    """meta.json beside a baseline scorecard: what the baseline was measured with.

    GAIA's compare reads `model` (the local model the agent ran) and `eval_model` (the judge)
    from it, ahead of the scorecard's own config. The other keys are ours, for people reading.
    """

    model: str | None = Field(default=None, description="the agent's (served) model")
    commit: str | None = Field(default=None, description="source commit of the run")
    lemonade_version: str | None = Field(
        default=None, description="version the LLM server reported (Lemonade or trialbox's)"
    )
    ctx_size: int | str | None = Field(default=None, description="LLM context size")
    eval_model: str | None = Field(default=None, description="the judge model")
    hardware: Any = Field(default=None, description="hardware fingerprint (text or object)")
    device: str | None = Field(default=None, description="cpu | rocm | npu (trialbox)")
    images: dict[str, str] = Field(
        default_factory=dict, description="image name -> image id (trialbox)"
    )
    llm_server: dict[str, Any] = Field(
        default_factory=dict, description="what the LLM server said it is (trialbox)"
    )
    run_id: str | None = Field(default=None, description="the run the baseline was saved from")
    trialbox_version: str | None = Field(default=None, description="trialbox that wrote it")
    saved_at: str | None = Field(default=None, description="when the baseline was saved, UTC")
