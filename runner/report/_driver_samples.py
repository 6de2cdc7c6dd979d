"""The values the driver report compares, from two scorecards: per scenario, trial and turn."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from runner.records.status import JUDGED
from runner.report._models import ScenarioResult, Scorecard, Trace, TurnResult


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    lower_is_better: bool | None  # None: a score (higher is better, absolute change)
    turn_value: Callable[[TurnResult], float | None] | None  # None: comes from traces
    # Heavy-tailed (a prompt-cache miss, a request queued behind another client: a value many
    # times the others): summed up by medians and a trimmed mean. Decode speed has no tail on
    # this machine (measured, both profiles: no trial ×3 off its turn's median), and the mean
    # finds a change with fewer samples (a median of 5 normal values is ~1.4× as variable).
    tailed: bool = True

    @property
    def relative(self) -> bool:
        return self.lower_is_better is not None


def _perf(get: Callable[[Any], float | None]) -> Callable[[TurnResult], float | None]:
    return lambda t: get(t.performance) if t.performance is not None else None


SPEED_METRICS = (
    Metric("ttft_s", "time to first token", "s", True, _perf(lambda p: p.time_to_first_token_s)),
    Metric("tokens_per_s", "decode speed", "tok/s", False, _perf(lambda p: p.tokens_per_s),
           tailed=False),
    Metric("turn_wall_s", "turn wall time", "s", True, _perf(lambda p: p.wall_s)),
    Metric("index_s", "index time per document", "s", True, None),
)
SCORE = Metric("score", "judged score", "", None, None)

TrialValues = dict[str, list[float]]
"""scenario id → one value per trial (the mean over that trial's turns, or documents)."""

TrialTurns = dict[str, list[dict[int, float]]]
"""scenario id → one entry per trial: turn number → value (the turns that trial measured)."""

TrialUnits = dict[str, dict[int, dict[int, float]]]
"""scenario id → trial number → turn number → value: each scenario trial found by its number,
so that side A's trial k meets side B's trial k (in a `trialbox ab`, the block beside it)."""


FRONT_DOOR = "front_door"


def _source(turn: TurnResult) -> str:
    # A trace written before sources were recorded carries GAIA's turn_metrics.
    source = getattr(turn.performance, "source", None) if turn.performance else None
    return str(source) if source else "gaia_turn_metrics"


def speed_source(a: Scorecard, b: Scorecard) -> str | None:
    """front_door when both runs metered turns at the LLM's front door; None = all turns."""
    def has_front_door(card: Scorecard) -> bool:
        return any(_source(t) == FRONT_DOOR for row in card.scenarios for t in row.turns)

    return FRONT_DOOR if has_front_door(a) and has_front_door(b) else None


def sources_seen(card: Scorecard) -> set[str]:
    return {_source(t) for row in card.scenarios for t in row.turns if t.performance}


UNFORCED = "a request the front door did not force to repeatable decoding (a lease lapsed)"
OTHER_SIDE = "a request answered by the other side's server"


def asked_repeatable(card: Scorecard) -> bool:
    """The run asked for repeatable decoding (`--repeatable-decoding`, `trialbox ab`)."""
    decoding = card.config.extra.get("decoding")
    return isinstance(decoding, str) and decoding.startswith("repeatable")


def has_unforced_request(card: Scorecard, turn: TurnResult) -> bool:
    """The one definition of "a turn with an unforced request": the run asked for repeatable
    decoding and the front door forced fewer of the turn's calls than it answered (a lease
    lapsed, or the request came before it). The driver report leaves such a turn out
    (`not_comparable`); summary.md's head counts them (`unforced_turns`)."""
    perf = turn.performance
    if perf is None:
        return False
    forced, calls = getattr(perf, "forced_calls", None), getattr(perf, "llm_calls", None)
    return forced is not None and bool(calls) and forced < calls and asked_repeatable(card)


def unforced_turns(card: Scorecard) -> tuple[int, int] | None:
    """(turns with an unforced request, turns that called the LLM) when the run asked for
    repeatable decoding; None when it did not (nothing was to be forced)."""
    if not asked_repeatable(card):
        return None
    turns = [t for row in card.scenarios for t in row.turns
             if t.performance is not None and getattr(t.performance, "llm_calls", None)]
    return sum(has_unforced_request(card, t) for t in turns), len(turns)


def not_comparable(card: Scorecard, turn: TurnResult) -> str | None:
    """Why a turn's speed cannot stand for its run's build, or None when it can: in a
    repeatable run, a request that went out with the agent's own sampling; in an A/B side, a
    request the other side's server answered (the door's records name the server)."""
    perf = turn.performance
    if perf is None:
        return None
    if has_unforced_request(card, turn):
        return UNFORCED
    ab = card.config.extra.get("ab")
    side = ab.get("side") if isinstance(ab, dict) else None
    served = getattr(perf, "served_by", None) or []
    if side and served and served != [side]:
        return OTHER_SIDE
    return None


def incomparable_turns(card: Scorecard) -> dict[str, int]:
    """How many of the run's turns each reason of `not_comparable` leaves out."""
    counts: dict[str, int] = {}
    for row in card.scenarios:
        for turn in row.turns:
            if (why := not_comparable(card, turn)) is not None:
                counts[why] = counts.get(why, 0) + 1
    return counts


def turn_trials(
    card: Scorecard, metric: Metric, dropped: set[str], source: str | None
) -> TrialValues:
    assert metric.turn_value is not None
    samples: TrialValues = {}
    for row in card.scenarios:
        if row.key in dropped:
            continue
        values = [
            metric.turn_value(t) for t in row.turns
            if (source is None or _source(t) == source) and not_comparable(card, t) is None
        ]
        # Zero or negative = not measured (GAIA's rule too); a speed is never 0.
        measured = [v for v in values if v is not None and v > 0]
        if measured:
            samples.setdefault(row.id, []).append(statistics.fmean(measured))
    return samples


def trial_turns_of(
    card: Scorecard, metric: Metric, dropped: set[str], source: str | None
) -> TrialTurns:
    """Each trial's turns kept together: a permutation test relabels whole trials."""
    return {sid: list(by_trial.values())
            for sid, by_trial in unit_turns_of(card, metric, dropped, source).items()}


def unit_turns_of(
    card: Scorecard, metric: Metric, dropped: set[str], source: str | None
) -> TrialUnits:
    """Each trial's measured turns, by scenario and trial number (1 for a run of one trial)."""
    assert metric.turn_value is not None
    units: TrialUnits = {}
    for row in card.scenarios:
        if row.key in dropped:
            continue
        turns = {}
        for t in row.turns:
            kept = (source is None or _source(t) == source) and not_comparable(card, t) is None
            value = metric.turn_value(t) if kept else None
            if value is not None and value > 0:
                turns[t.turn] = value
        if turns:
            units.setdefault(row.id, {})[row.trial or 1] = turns
    return units


def _ab_of(card: Scorecard) -> dict[str, Any]:
    ab = card.config.extra.get("ab")
    return ab if isinstance(ab, dict) else {}


def one_ab(a: Scorecard, b: Scorecard) -> str | None:
    """The A/B's id when the two runs are the two sides of one `trialbox ab` (each scenario
    trial run on both in blocks side by side in time), in either order, else None."""
    side_a, side_b = _ab_of(a), _ab_of(b)
    ab_id = side_a.get("ab_id")
    same = bool(ab_id) and ab_id == side_b.get("ab_id")
    return str(ab_id) if same and {side_a.get("side"), side_b.get("side")} == {"A", "B"} else None


def ab_sessions(a: Scorecard, b: Scorecard) -> int | None:
    """The number of sessions (one side each) of the A/B whose two sides these are, when it
    ran in sessions; None for an A/B switched inside one run, or two runs of no A/B."""
    if one_ab(a, b) is None:
        return None
    sessions = _ab_of(a).get("sessions")
    return sessions if isinstance(sessions, int) and not isinstance(sessions, bool) else None


def index_trials(traces: Sequence[Trace], dropped: set[str]) -> TrialValues:
    samples: TrialValues = {}
    for trace in traces:
        if trace.result.key in dropped:
            continue
        docs = trace.transcript.indexed if trace.transcript else []
        durations = [d.duration_s for d in docs if d.error is None and d.duration_s > 0]
        if durations:
            samples.setdefault(trace.result.id, []).append(statistics.fmean(durations))
    return samples


def score_trials(runs: dict[str, list[ScenarioResult]]) -> TrialValues:
    return {
        sid: scores
        for sid, rows in runs.items()
        if (scores := [r.score for r in rows if r.status in JUDGED and r.score is not None])
    }


def warmup_keys(card: Scorecard, warmup: int) -> list[str]:
    """The first `warmup` scenario runs in the scorecard's order (the order they were planned)."""
    if warmup < 0:
        raise ValueError(f"--warmup {warmup} must be 0 or more")
    return [row.key for row in card.scenarios[:warmup]]


def scope_groups(
    common: Sequence[str], categories: dict[str, str]
) -> list[tuple[str, str, list[str]]]:
    groups = [("all", "all", list(common))]
    for category in sorted({categories[s] for s in common}):
        groups.append(("category", category, [s for s in common if categories[s] == category]))
    groups += [("scenario", s, [s]) for s in common]
    return groups
