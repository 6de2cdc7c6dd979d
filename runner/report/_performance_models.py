"""scorecard.json's speed block as pydantic models: per scenario, over the run, and set-up phases.

None is "not measured", never a guess; runner/report/_performance.py computes the figures.
"""

from __future__ import annotations

from pydantic import Field

from runner.records.transcript import SetupTimings
from runner.report._base import StrictModel


class PerformanceStats(StrictModel):
    """Speed over a set of turns. None = not measured (never a guess)."""

    wall_s: float | None = Field(
        default=None, description="scenario wall clock (sum over scenarios in totals), s"
    )
    turns: int = Field(default=0, description="turns measured")
    turn_wall_s_mean: float | None = Field(default=None, description="mean turn wall time, s")
    turn_wall_s_p50: float | None = Field(default=None, description="median turn wall time, s")
    turn_wall_s_p90: float | None = Field(
        default=None, description="90th percentile turn wall time, s"
    )
    agent_turn_s: float | None = Field(
        default=None,
        description="agent turn time: the sum of the measured turns' wall times, s; None when "
        "no turn was measured",
    )
    agent_indexing_s: float | None = Field(
        default=None,
        description="the agent's own indexing of the setup documents inside the Agent UI "
        "(embedding them), s: agent time, not harness time (in totals: the sum over the "
        "scenarios that timed it); None when not measured",
    )
    turn_embedding_s: float | None = Field(
        default=None,
        description="seconds of the agent's turns spent in its embeddings requests, summed "
        "(front door; part of agent_turn_s): GAIA 0.25.1's agent embeds its session documents "
        "again on its first turn. None when no turn was measured at the front door",
    )
    turn_embedded_inputs: int | None = Field(
        default=None, ge=0,
        description="texts those requests embedded (chunks and queries); None as above",
    )
    turn_embedded_cached: int | None = Field(
        default=None, ge=0,
        description="of turn_embedded_inputs, how many the LLM server's embeddings cache answered "
        "without the model (trialbox_llm/embedding_cache.py); None when no cache was on",
    )
    simulated_turns: int = Field(
        default=0, ge=0, description="turns whose user message the simulator's model wrote")
    simulator_s: float | None = Field(
        default=None, ge=0,
        description="seconds the simulator's model took writing those messages, summed: outside "
        "agent time (before each turn's wall clock) and not the harness's; None when no "
        "simulated turn was timed",
    )
    indexing_embedded_inputs: int | None = Field(
        default=None, ge=0,
        description="texts sent to the embedder while the setup documents indexed (front door; "
        "in totals: summed over the scenarios that measured it); None when not measured",
    )
    indexing_embedded_cached: int | None = Field(
        default=None, ge=0,
        description="of indexing_embedded_inputs, how many the embeddings cache answered; None "
        "when no cache was on",
    )
    overhead_ratio: float | None = Field(
        default=None,
        description="this run's scenario wall ÷ agent time, agent time being agent_turn_s + "
        "agent_indexing_s (in totals: the sum of wall_s over the sum of agent time, over the "
        "scenarios that have both a wall and a timed turn); 1.0 means nothing but the agent "
        "took time; None when either is missing or the wall clock is a rescore's. The harness "
        "overhead against the agent alone is scripts/bench-harness --vs-attached's figure",
    )
    ttft_s_mean: float | None = Field(default=None, description="mean time to first token, s")
    tokens_per_s_mean: float | None = Field(
        default=None, description="mean decode speed, tokens/s"
    )
    input_tokens: int = Field(default=0, description="prompt tokens, all turns")
    output_tokens: int = Field(default=0, description="generated tokens, all turns")
    figure_sources: dict[str, int] = Field(
        default_factory=dict,
        description="turns counted by where their TTFT/tokens/s came from (TurnPerformance."
        "source: front_door, self_reported, gaia_turn_metrics, not_measured; unrecorded for "
        "traces written before sources were)")
    setup: SetupTimings | None = Field(
        default=None,
        description="the scenario's set-up phases (always None in totals: see Performance.setup); "
        "None when not recorded",
    )


class PhaseStats(StrictModel):
    """One set-up phase over the run's scenarios that measured it."""

    measured: int = Field(default=0, description="scenarios that measured this phase")
    median_s: float | None = Field(
        default=None, description="median over those scenarios, s; None when none measured it"
    )
    p90_s: float | None = Field(
        default=None, description="90th percentile over those scenarios, s; None when none did"
    )


class SetupStats(StrictModel):
    """Where the run's set-up time went, phase by phase (see runner.records.transcript.SetupTimings)."""

    scenarios: int = Field(
        default=0, description="scenarios whose set-up timings were recorded"
    )
    pool_hits: int = Field(
        default=0,
        description="scenarios whose sandbox the warm pool had already prepared when asked for",
    )
    pool_known: int = Field(
        default=0, description="scenarios that recorded whether their sandbox was a pool hit"
    )
    waited_s: PhaseStats = Field(
        default_factory=PhaseStats,
        description="visible set-up: what a scenario waited for a ready sandbox",
    )
    container_create_s: PhaseStats = Field(
        default_factory=PhaseStats, description="creating the sandbox's network and containers"
    )
    gaia_import_s: PhaseStats = Field(
        default_factory=PhaseStats, description="Agent UI process start to GAIA imported"
    )
    ui_ready_s: PhaseStats = Field(
        default_factory=PhaseStats, description="containers created to the Agent UI answering"
    )
    mcp_ready_s: PhaseStats = Field(
        default_factory=PhaseStats, description="containers created to the MCP bridge answering"
    )
    session_s: PhaseStats = Field(
        default_factory=PhaseStats, description="creating the chat session"
    )
    indexing_s: PhaseStats = Field(
        default_factory=PhaseStats,
        description="the agent indexing the setup documents (agent time, not harness time)",
    )
    teardown_s: PhaseStats = Field(
        default_factory=PhaseStats,
        description="collecting and removing the used sandbox, after the result was recorded "
        "(off the scenario's clock)",
    )

    def phase(self, name: str) -> PhaseStats:
        """The phase called `name` (a SetupTimings field other than pool_hit)."""
        stats = getattr(self, name)
        if not isinstance(stats, PhaseStats):
            raise KeyError(f"{name!r} is not a set-up phase")
        return stats


class Performance(StrictModel):
    """Speed of the whole run and of each scenario."""

    totals: PerformanceStats = Field(
        default_factory=PerformanceStats, description="over every turn of the run"
    )
    scenarios: dict[str, PerformanceStats] = Field(
        default_factory=dict, description="by result key (id, or id__trial<k>)"
    )
    setup: SetupStats = Field(
        default_factory=SetupStats,
        description="set-up phases over the run (all zero counts when no scenario recorded them)",
    )
