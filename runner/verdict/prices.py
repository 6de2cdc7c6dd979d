"""What judging costs: the one price table, by exact judge model id.

Every dollar figure comes from here: the Anthropic backend's per-request `JudgeUsage.cost_usd`,
the engine's budget check and the scorecard's cost section. Ids are matched exactly, never by
substring: a local model whose name happens to contain "opus" is not Claude Opus. A judge model
this table does not name (an OpenAI-compatible server, a local model, an Anthropic model newer
than the table) costs 0 and is reported as "unpriced" rather than priced by a guess.

It lives outside `runner.judge` so that `runner.verdict` (pure, imported by the engine and the
report) can hand it out without importing the judge providers' SDKs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict, Field

from runner.records.judgments import JudgeUsage, Judgments

ANTHROPIC = "anthropic"
"""The provider prefix in a recorded judge model ("anthropic:claude-sonnet-4-6")."""


class Price(BaseModel):
    """List prices of one model, in US dollars per million tokens."""

    model_config = ConfigDict(frozen=True)

    input: float = Field(description="uncached input tokens, dollars per million")
    output: float = Field(description="output tokens, dollars per million")
    cache_read: float = Field(
        description="input tokens read from the prompt cache, dollars per million"
    )
    cache_write: float = Field(
        description="input tokens written to the prompt cache (5-minute lifetime), dollars per "
        "million"
    )


def _anthropic(input_price: float, output_price: float) -> Price:
    # Anthropic bills a 5-minute cache write at 1.25x and a cache read at 0.1x the input price.
    return Price(
        input=input_price,
        output=output_price,
        cache_read=round(input_price * 0.1, 4),
        cache_write=round(input_price * 1.25, 4),
    )


_OPUS_45 = _anthropic(5.0, 25.0)
_OPUS_4 = _anthropic(15.0, 75.0)
_SONNET_4 = _anthropic(3.0, 15.0)
_HAIKU_45 = _anthropic(1.0, 5.0)
_HAIKU_35 = _anthropic(0.8, 4.0)
_HAIKU_3 = _anthropic(0.25, 1.25)

ANTHROPIC_PRICES: Mapping[str, Price] = MappingProxyType({
    # Aliases and the dated snapshots they point at; list prices when this was written.
    "claude-opus-4-6": _OPUS_45,
    "claude-opus-4-5": _OPUS_45,
    "claude-opus-4-5-20251101": _OPUS_45,
    "claude-opus-4-1": _OPUS_4,
    "claude-opus-4-1-20250805": _OPUS_4,
    "claude-opus-4-0": _OPUS_4,
    "claude-opus-4-20250514": _OPUS_4,
    "claude-sonnet-4-6": _SONNET_4,
    "claude-sonnet-4-5": _SONNET_4,
    "claude-sonnet-4-5-20250929": _SONNET_4,
    "claude-sonnet-4-0": _SONNET_4,
    "claude-sonnet-4-20250514": _SONNET_4,
    "claude-haiku-4-5": _HAIKU_45,
    "claude-haiku-4-5-20251001": _HAIKU_45,
    "claude-3-5-haiku-latest": _HAIKU_35,
    "claude-3-5-haiku-20241022": _HAIKU_35,
    "claude-3-haiku-20240307": _HAIKU_3,
})
"""Anthropic model id → list price. Only the Anthropic API bills by these prices: the same name
served by any other provider is unpriced."""


def price_of(judge_model: str) -> Price | None:
    """The list price of a judge model, or None when it is unpriced.

    `judge_model` is either what `Judgments.judge_model` records ("anthropic:<model id>") or a
    bare Anthropic model id (what the Anthropic backend knows itself by). Any other provider
    prefix ("openai:…") is unpriced: an OpenAI-compatible server's bill is not Anthropic's.
    """
    provider, colon, model_id = judge_model.partition(":")
    if not colon:
        provider, model_id = ANTHROPIC, judge_model
    if provider != ANTHROPIC:
        return None
    return ANTHROPIC_PRICES.get(model_id)


def judge_cost_usd(usage: JudgeUsage, model: str) -> float:
    """Estimated dollars for the tokens in `usage`; 0 for an unpriced model."""
    price = price_of(model)
    if price is None:
        return 0.0
    # Not rounded: per-request costs are added up, and rounding each would drift the total.
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_tokens * price.cache_read
        + usage.cache_write_tokens * price.cache_write
    ) / 1_000_000


def judgings_cost_usd(judgings: Iterable[Judgments]) -> float:
    """Estimated dollars for every judging of one scenario run (`--rejudge K` judges it K times
    and pays K times, so the budget and the scorecard both count all of them)."""
    return sum((judge_cost_usd(j.usage, j.judge_model) for j in judgings), 0.0)


def cost_note(judge_model: str) -> str:
    """One line for a run header or a report: the price used, or that the model is unpriced."""
    price = price_of(judge_model)
    if price is None:
        return f"{judge_model}: unpriced (no list price in runner/verdict/prices.py; its cost counts as $0)"
    return (f"{judge_model}: ${price.input:g} in / ${price.output:g} out per million tokens "
            f"(cache read ${price.cache_read:g}, write ${price.cache_write:g})")
