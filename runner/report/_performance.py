"""Speed aggregates: turns (means, percentiles), set-up phases and the run's wall ÷ agent time.

Agent time is what the agent under test spends on its own: its turns and its indexing of the
setup documents inside the Agent UI (embedding them on the LLM server) — a 6,110-chunk PDF takes
minutes of that, which is not the harness's. The ratio here is this run's scenario wall over
that agent time; the harness overhead a user pays against the agent alone (an Agent UI already
running, no sandboxes) is measured side by side by ``scripts/bench-harness --vs-attached``.

None whenever nothing was measured: a trace written before set-up was timed renders "n/a".
The sentences both renderers (summary.md, report.html) print for them are here too, so the two
say the same thing."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from runner.records.transcript import SetupTimings, TurnPerformance
from runner.report._models import ScenarioResult, Scorecard
from runner.report._performance_models import Performance, PerformanceStats, PhaseStats, SetupStats
from runner.system.clock import clock_text

# The set-up phases, in the order a reader should see them (field of SetupTimings and of
# SetupStats → label). `waited_s` first: it is the only one a scenario sees with a warm pool.
SETUP_PHASES: dict[str, str] = {
    "waited_s": "visible set-up (waited)",
    "container_create_s": "container create",
    "gaia_import_s": "GAIA import",
    "ui_ready_s": "Agent UI ready",
    "mcp_ready_s": "MCP ready",
    "session_s": "session",
    "indexing_s": "indexing (the agent's own work)",
    "teardown_s": "teardown (after the result, off the clock)",
}

OVERHEAD_LABEL = "this run's wall ÷ agent time: scenario wall ÷ (agent turns + its own indexing)"
#: Where the harness overhead against the agent alone comes from (README, summary.md).
BENCHMARK_OVERHEAD = "harness overhead (vs the agent alone, scripts/bench-harness --vs-attached)"

# runner/run/launch.py's rescore marks the runs it writes with this key of RunConfig.extra.
RESCORED_FROM = "rescored_from"


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    if not values:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q={q} must be within 0..100")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def phase_seconds(setup: SetupTimings | None, phase: str) -> float | None:
    """One phase of a scenario's set-up (a key of SETUP_PHASES), None when not measured."""
    value = getattr(setup, phase, None) if setup is not None else None
    return float(value) if value is not None else None


def overhead_ratio(
    wall_s: float | None, agent_turn_s: float | None, agent_indexing_s: float | None = None
) -> float | None:
    """Scenario wall ÷ agent time (turns + the agent's own indexing); None unless the wall and
    the turns were measured (and the turns took time). Unmeasured indexing counts as none."""
    if wall_s is None or agent_turn_s is None or agent_turn_s <= 0:
        return None
    return wall_s / (agent_turn_s + (agent_indexing_s or 0.0))


class OverheadParts(NamedTuple):
    """The numerator and denominator of the run's ratio, over the scenarios that have both a
    wall clock and a timed turn."""

    wall_s: float
    agent_turn_s: float
    agent_indexing_s: float
    scenarios: int

    @property
    def agent_s(self) -> float:
        return self.agent_turn_s + self.agent_indexing_s


def overhead_parts(scenarios: Iterable[PerformanceStats]) -> OverheadParts:
    """Sums of wall_s, agent_turn_s and agent_indexing_s, and how many scenarios, over those
    whose ratio is defined."""
    counted = [
        s for s in scenarios
        if overhead_ratio(s.wall_s, s.agent_turn_s, s.agent_indexing_s) is not None
    ]
    return OverheadParts(
        wall_s=sum(s.wall_s or 0.0 for s in counted),
        agent_turn_s=sum(s.agent_turn_s or 0.0 for s in counted),
        agent_indexing_s=sum(s.agent_indexing_s or 0.0 for s in counted),
        scenarios=len(counted),
    )


def stats_of(
    turns: Iterable[TurnPerformance],
    wall_s: float | None,
    setup: SetupTimings | None = None,
    *,
    with_overhead: bool = True,
) -> PerformanceStats:
    measured = list(turns)
    walls = [t.wall_s for t in measured]
    agent_turn_s = sum(walls) if walls else None
    embedding = [t for t in measured if t.embedding_s is not None]
    simulated = [t.simulator_s for t in measured if t.simulator_s is not None]
    # The Agent UI embedding the setup documents is the agent's work, timed by the conversation.
    agent_indexing_s = phase_seconds(setup, "indexing_s")
    return PerformanceStats(
        wall_s=wall_s,
        turns=len(measured),
        turn_wall_s_mean=_mean(walls),
        turn_wall_s_p50=percentile(walls, 50),
        turn_wall_s_p90=percentile(walls, 90),
        agent_turn_s=agent_turn_s,
        agent_indexing_s=agent_indexing_s,
        turn_embedding_s=sum(t.embedding_s or 0.0 for t in embedding) if embedding else None,
        turn_embedded_inputs=sum(t.embedded_inputs or 0 for t in embedding) if embedding else None,
        turn_embedded_cached=_sum_known(t.embedded_cached for t in embedding),
        simulated_turns=len(simulated),
        simulator_s=round(sum(simulated), 3) if simulated else None,
        indexing_embedded_inputs=None if setup is None else setup.indexing_embedded_inputs,
        indexing_embedded_cached=None if setup is None else setup.indexing_embedded_cached,
        overhead_ratio=(
            overhead_ratio(wall_s, agent_turn_s, agent_indexing_s) if with_overhead else None
        ),
        ttft_s_mean=_mean(
            [t.time_to_first_token_s for t in measured if t.time_to_first_token_s is not None]
        ),
        tokens_per_s_mean=_mean([t.tokens_per_s for t in measured if t.tokens_per_s is not None]),
        input_tokens=sum(t.input_tokens or 0 for t in measured),
        output_tokens=sum(t.output_tokens or 0 for t in measured),
        figure_sources=dict(Counter(t.source or "unrecorded" for t in measured)),
        setup=setup,
    )


def _sum_known(values: Iterable[int | None]) -> int | None:
    """The sum of the values that were measured; None when none was."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _turn_performance(result: ScenarioResult) -> list[TurnPerformance]:
    return [t.performance for t in result.turns if t.performance is not None]


def _phase(values: Sequence[float]) -> PhaseStats:
    return PhaseStats(
        measured=len(values), median_s=percentile(values, 50), p90_s=percentile(values, 90)
    )


def setup_of(results: Sequence[ScenarioResult]) -> SetupStats:
    """Each set-up phase over the scenarios that measured it, and the warm pool's hits."""
    setups = [r.setup for r in results if r.setup is not None]
    known = [s.pool_hit for s in setups if s.pool_hit is not None]
    phases = {
        phase: _phase([v for s in setups if (v := phase_seconds(s, phase)) is not None])
        for phase in SETUP_PHASES
    }
    return SetupStats.model_validate(
        {"scenarios": len(setups), "pool_hits": sum(known), "pool_known": len(known), **phases}
    )


def scenario_stats(result: ScenarioResult, *, with_overhead: bool = True) -> PerformanceStats:
    """One scenario's speed, from its row: the figures summary.md's table gives it."""
    return stats_of(_turn_performance(result), result.wall_s, result.setup,
                    with_overhead=with_overhead)


def performance_of(results: Sequence[ScenarioResult], *, replayed: bool = False) -> Performance:
    """The run's speed. `replayed` (a rescore) has no overhead ratio: its scenario wall clock
    is the replay's and the judge's, not the agent's."""
    walls = [r.wall_s for r in results if r.wall_s is not None]
    with_overhead = not replayed
    scenarios = {r.key: scenario_stats(r, with_overhead=with_overhead) for r in results}
    totals = stats_of(
        (p for r in results for p in _turn_performance(r)),
        sum(walls) if walls else None,
        with_overhead=False,
    )
    indexed = [s.agent_indexing_s for s in scenarios.values() if s.agent_indexing_s is not None]
    totals.agent_indexing_s = sum(indexed) if indexed else None
    totals.indexing_embedded_inputs = _sum_known(
        s.indexing_embedded_inputs for s in scenarios.values())
    totals.indexing_embedded_cached = _sum_known(
        s.indexing_embedded_cached for s in scenarios.values())
    if with_overhead:
        parts = overhead_parts(scenarios.values())
        totals.overhead_ratio = overhead_ratio(
            parts.wall_s, parts.agent_turn_s, parts.agent_indexing_s
        )
    return Performance(totals=totals, scenarios=scenarios, setup=setup_of(results))


def _scenarios(count: int) -> str:
    return f"{count} scenario" + ("" if count == 1 else "s")


def overhead_text(card: Scorecard) -> str:
    """The run's wall ÷ agent time, saying what it is and what it is made of:
    `this run's wall ÷ agent time: scenario wall ÷ (agent turns + its own indexing) = 1.48
    (670.6 s ÷ (441.9 s + 10.0 s) over 12 scenarios)`, or `= n/a (why)`."""
    perf = card.performance
    if RESCORED_FROM in card.config.extra:
        return f"{OVERHEAD_LABEL} = n/a (a rescore: its wall clock is the replay's, not the agent's)"
    parts = overhead_parts(perf.scenarios.values())
    if perf.totals.overhead_ratio is None or parts.scenarios == 0:
        return f"{OVERHEAD_LABEL} = n/a (no scenario has both a wall clock and a timed turn)"
    text = (
        f"{OVERHEAD_LABEL} = {perf.totals.overhead_ratio:.2f} "
        f"({parts.wall_s:.1f} s ÷ ({parts.agent_turn_s:.1f} s + {parts.agent_indexing_s:.1f} s) "
        f"over {_scenarios(parts.scenarios)})"
    )
    # The engine's scenario wall clock runs until the judge has answered (runner/run/engine.py).
    return text + ("; the scenario wall includes judging" if card.config.judged else "")


def run_wall_text(card: Scorecard) -> str:
    """The run's own clock beside its scenarios' walls, which add up to more than it when
    several run at once: `the run's wall clock = 19:40 (first scenario's start to the last
    one's end) at concurrency 2; its scenarios' walls add up to 36:12, 1.84 at once on
    average`, or n/a when no row has both ends."""
    label = "the run's wall clock"
    spans = card.spans()
    if not spans:
        return f"{label} = n/a (no scenario recorded when it started and ended)"
    wall = (max(end for _, end in spans) - min(start for start, _ in spans)).total_seconds()
    busy = sum((end - start).total_seconds() for start, end in spans)
    text = (f"{label} = {clock_text(wall)} (first scenario's start to the last one's end) at "
            f"concurrency {card.config.concurrency}")
    if card.config.concurrency > 1 and wall > 0:
        text += (f"; its scenarios' walls add up to {clock_text(busy)}, {busy / wall:.2f} at once "
                 "on average")
    return text


def reference_decode_text(card: Scorecard) -> str | None:
    """The server's speed before the run, beside its wall clock: `the LLM server's reference
    decode before the first scenario = 41.3 tokens/s (64 greedy tokens of one fixed prompt by
    Gemma-4-E4B-it-GGUF, llama.cpp's own timing): compare two runs' wall clocks only beside
    theirs`; None when the run has none."""
    reference = card.config.reference_decode
    if reference is None:
        return None
    return (f"the LLM server's reference decode before the first scenario = "
            f"{reference.tokens_per_s:.1f} tokens/s ({reference.tokens} greedy tokens of one fixed "
            f"prompt by {reference.model}, llama.cpp's own timing): compare two runs' wall clocks "
            "only beside theirs")


def indexing_text(card: Scorecard) -> str:
    """The agent's own indexing, as a figure of its own: `the agent's own document indexing
    (in the Agent UI, agent time) = 39.9 s over 2 of 12 scenarios (longest 38.2 s)`, or n/a."""
    label = "the agent's own document indexing (in the Agent UI, agent time)"
    timed = [
        s.agent_indexing_s for s in card.performance.scenarios.values()
        if s.agent_indexing_s is not None
    ]
    if not timed:
        return f"{label} = n/a (no scenario timed its indexing)"
    spent = [t for t in timed if t > 0]
    if not spent:
        return f"{label} = 0.0 s (no scenario indexed a document)"
    return (
        f"{label} = {sum(spent):.1f} s over {len(spent)} of {_scenarios(len(timed))} "
        f"(longest {max(spent):.1f} s)"
    )


def turn_embedding_text(card: Scorecard) -> str:
    """What of the agent's turns went to embedding, beside the indexing: `the agent's embedding
    inside its turns (front door, agent time) = 288.4 s of 1,783.7 s of turns, 6,140 texts, over
    12 of 91 scenarios (longest 281.0 s)`, or n/a. In GAIA 0.25.1 that is mostly its first turn
    embedding the session documents again (its RAG cache holds chunks, not vectors)."""
    label = "the agent's embedding inside its turns (front door, agent time)"
    totals = card.performance.totals
    if totals.turn_embedding_s is None:
        return f"{label} = n/a (no turn was measured at the front door)"
    spent = [s.turn_embedding_s for s in card.performance.scenarios.values()
             if s.turn_embedding_s]
    if not spent:
        return f"{label} = 0.0 s"
    measured = sum(s.turn_embedding_s is not None for s in card.performance.scenarios.values())
    return (f"{label} = {totals.turn_embedding_s:.1f} s of {totals.agent_turn_s or 0.0:,.1f} s "
            f"of turns, {totals.turn_embedded_inputs or 0:,} texts, over {len(spent)} of "
            f"{_scenarios(measured)} (longest {max(spent):.1f} s)")


def embedding_cache_text(card: Scorecard) -> str | None:
    """What the LLM server's embeddings cache answered, when one was on: `the LLM server's
    embeddings cache answered 6,900 of 13,380 texts without the model (indexing 3,440 of 6,690,
    turns 3,460 of 6,690) — the vectors it computed before for the same texts; the indexing and
    turn times above are shorter than on a server without it`. None: no cache was on."""
    totals = card.performance.totals
    parts = [(name, cached, inputs or 0) for name, cached, inputs in (
        ("indexing", totals.indexing_embedded_cached, totals.indexing_embedded_inputs),
        ("turns", totals.turn_embedded_cached, totals.turn_embedded_inputs)) if cached is not None]
    if not parts:
        return None
    cached, inputs = sum(p[1] for p in parts), sum(p[2] for p in parts)
    each = ", ".join(f"{name} {c:,} of {n:,}" for name, c, n in parts)
    return (f"the LLM server's embeddings cache answered {cached:,} of {inputs:,} texts without "
            f"the model ({each}) — the vectors it computed before for the same texts; the "
            "indexing and turn times above are shorter than on a server without it")


def pool_text(setup: SetupStats) -> str:
    """`3 of 4 scenarios` (how many sandboxes the warm pool had ready), or n/a."""
    if not setup.pool_known:
        return "n/a"
    return f"{setup.pool_hits} of {setup.pool_known} scenarios"
