"""A turn's speed: the front door's records of its own LLM calls, GAIA's figures kept beside them."""

from __future__ import annotations

from typing import Any, NamedTuple

from runner.records.transcript import GaiaReportedPerformance, TurnPerformance
from trialbox_llm.decoding import REPEATABLE


def _is_generation(record: dict[str, Any]) -> bool:
    """A chat/completion request (embeddings and reranking are metered too, not turn speed)."""
    route = str(record.get("route") or "")
    return route.endswith(("/chat/completions", "/completions", "/responses"))


class Embedded(NamedTuple):
    """What answered embeddings requests carried, from their meter records."""

    texts: int  # inputs: each one chunk or query
    seconds: float  # the requests' wall times, summed
    cached: int | None  # inputs the server's embeddings cache answered; None: no cache on


def embedded_inputs(records: list[dict[str, Any]]) -> Embedded:
    """The answered embeddings requests among `records` (`MeterRecord.inputs`,
    `MeterRecord.cached_inputs`)."""
    embedded = [r for r in records
                if str(r.get("route") or "").endswith("/embeddings") and r.get("status") == 200]
    cached = [r["cached_inputs"] for r in embedded if _count(r.get("cached_inputs")) is not None]
    return Embedded(texts=sum(_count(r.get("inputs")) or 0 for r in embedded),
                    seconds=sum(float(r.get("wall_s") or 0.0) for r in embedded),
                    cached=sum(cached) if cached else None)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def turn_performance_from_meter(records: list[dict[str, Any]], wall_s: float) -> TurnPerformance:
    """A turn's speed from *all* of its own requests at the front door (`trialbox_llm.meter`):
    TTFT of the first call, decode rate over every call (tokens after each first token over
    the time after it, summed), tokens summed. Non-streamed calls have no front-door TTFT:
    when no call streamed, the server's self-reported figures are used and labelled so."""
    done = sorted((r for r in records if r.get("status") == 200 and _is_generation(r)),
                  key=lambda r: r["started_at"])
    base = TurnPerformance(wall_s=round(wall_s, 3), source="not_measured", llm_calls=len(done))
    # The turn's own embedding (the agent loading its session documents, a retrieval query):
    # agent time inside the turn, shown apart in the summary.
    embedded = embedded_inputs(records)
    base.embedded_inputs, base.embedding_s = embedded.texts, round(embedded.seconds, 6)
    base.embedded_cached = embedded.cached
    if not done:
        return base

    def total(key: str) -> int | None:
        values = [r.get(key) for r in done]
        known = [v for v in values if isinstance(v, int)]
        return sum(known) if known else None

    base.input_tokens, base.output_tokens = total("prompt_tokens"), total("completion_tokens")
    base.queue_wait_s = round(sum(float(r.get("queue_wait_s") or 0.0) for r in done), 6)
    base.forced_calls = sum(r.get("decoding") == REPEATABLE for r in done)
    base.served_by = sorted({str(r["upstream"]) for r in done if r.get("upstream")})
    streamed = [r for r in done if r.get("time_to_first_token_s") is not None]
    if streamed:
        base.source = "front_door"
        base.time_to_first_token_s = float(streamed[0]["time_to_first_token_s"])
        timed = [r for r in streamed if r.get("decode_s") and r.get("completion_tokens")]
        seconds = sum(float(r["decode_s"]) for r in timed)
        tokens = sum(int(r["completion_tokens"]) - 1 for r in timed)
        base.tokens_per_s = round(tokens / seconds, 3) if seconds > 0 and tokens > 0 else None
        return base
    reported = [r["self_reported"] for r in done if isinstance(r.get("self_reported"), dict)]
    if reported:
        base.source = "self_reported"
        base.time_to_first_token_s = reported[0].get("time_to_first_token")
        rates = [x["tokens_per_second"] for x in reported if x.get("tokens_per_second")]
        base.tokens_per_s = round(sum(rates) / len(rates), 3) if rates else None
    return base


def turn_performance(
    wall_s: float, metrics: dict[str, Any], records: list[dict[str, Any]] | None = None
) -> TurnPerformance:
    """Speed of one turn from the front door's records of this sandbox's requests; GAIA's own
    figures are kept beside them as reported by GAIA, and used (labelled so) only when the
    LLM has no front door to ask (`records` None)."""

    def number(*keys: str) -> float | None:
        for key in keys:
            value = metrics.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
        return None

    tokens_in = number("turn_input_tokens", "tokens_in")
    tokens_out = number("turn_output_tokens", "tokens_out")
    gaia = GaiaReportedPerformance(
        time_to_first_token_s=number("time_to_first_token_s"),
        tokens_per_s=number("tokens_per_second"),
        input_tokens=int(tokens_in) if tokens_in is not None else None,
        output_tokens=int(tokens_out) if tokens_out is not None else None,
    )
    if records is not None:
        measured = turn_performance_from_meter(records, wall_s)
        measured.reported_by_gaia = gaia
        return measured
    return TurnPerformance(
        wall_s=round(wall_s, 3), **gaia.model_dump(),
        source="gaia_turn_metrics" if any(gaia.model_dump().values()) else "not_measured",
        reported_by_gaia=gaia,
    )
