"""Embedding inputs cut to the embedder's limit, the way sentence-transformers cuts them.

Why: GAIA chunks documents for EmbeddingGemma (2048 tokens) and sends chunks of 600+ word
pieces; MiniLM's llama-server refuses any input longer than its window with HTTP 500 ("input
(635 tokens) is too large to process"), indexing fails and the scenario ends in SETUP_ERROR.
sentence-transformers, the reference for this model, never fails there: it encodes `[CLS]`,
the first `max_seq_length - 2` word pieces and `[SEP]`, and drops the rest silently. This
module does exactly that with llama.cpp's own tokenizer (the embedder's `/tokenize`). llm-cpu
cuts at its catalog's limit; the front door, before the real Lemonade serving the same MiniLM
file under GAIA's embedder name, cuts at `--embed-max-tokens` (`fit_through_lemonade`).

Lemonade's `/api/v1/tokenize` answers with the tokenizer of whichever model it served last, not
the model named (seen on 2026.39.1-2: after a chat, "hello world" came back as SmolLM2's ids).
So the door accepts a tokenization only when it carries the embedder's own opening and closing
special tokens (`--embed-special`, 101 and 102 for the bundled MiniLM). When another model's
tokenizer answered for an input that may need cutting, the door has Lemonade embed one word
with the embedder (so it served last) and asks once more: GAIA embeds its queries (and, in a
session's first turn, its documents again) right after chat requests, and a character cut keeps
about a third of the text the token cut keeps. If a chat slips in between and the answer is
still not the embedder's, that input is cut by characters to a length that cannot exceed the
window (a word piece covers at least one character that is not a space): shorter than the token
cut, but never refused.

How: each text input is tokenized with its special tokens. When it is longer than the limit,
the request sends token ids instead of text: `[CLS]`, the first pieces, and the closing
`[SEP]`. llama.cpp embeds token ids as given (it adds no special tokens to them), and the ids
of a whole input give the very vector its text gives (checked by the integration tests).
Requests with nothing to cut pass through unchanged.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass
from typing import Any

import httpx


class TokenizerError(RuntimeError):
    """The embedder's llama-server did not tokenize an input (its answer is in the message)."""


@dataclass(frozen=True)
class FittedRequest:
    """The embeddings request to send upstream, and what was done to its inputs."""

    body: dict[str, Any]
    #: Text inputs in the request.
    texts: int
    #: Text inputs that were longer than the limit and were cut.
    truncated: int
    #: Each input's tokens as it goes to the model (after any cut; None: not tokenized here).
    tokens: tuple[int | None, ...] = ()


def cut(tokens: list[int], limit: int) -> list[int]:
    """The first `limit - 1` tokens (the opening special token and the first pieces) and the
    last one (the closing special token), for an input tokenized with its special tokens."""
    if len(tokens) <= limit:
        return tokens
    return tokens[: limit - 1] + tokens[-1:]


async def tokenize(http: httpx.AsyncClient, url: str, text: str, model: str | None = None) -> list[int]:
    """`text` as llama.cpp's tokenizer for this model sees it, special tokens included. Through
    Lemonade (`/api/v1/tokenize`), `model` names which loaded model's tokenizer answers."""
    payload: dict[str, Any] = {"content": text, "add_special": True}
    if model is not None:
        payload["model"] = model
    response = await http.post(f"{url}/tokenize", json=payload)
    try:
        tokens = response.json().get("tokens") if response.status_code == 200 else None
    except ValueError:
        tokens = None
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        raise TokenizerError(
            f"llama.cpp /tokenize answered HTTP {response.status_code} without token ids: "
            f"{response.text[:200]}"
        )
    return tokens


def text_inputs(body: dict[str, Any]) -> list[Any] | None:
    """The request's inputs as a list, or None when there is no text to check."""
    inputs = body.get("input")
    items = [inputs] if isinstance(inputs, str) else inputs
    if not isinstance(items, list) or not any(isinstance(item, str) for item in items):
        return None
    return items


async def _tokenized(http: httpx.AsyncClient, url: str, items: list[Any],
                     model: str | None = None) -> list[list[int] | None]:
    """Each text input's tokens, None for an input that is already token ids. All at once:
    llama-server tokenizes on its HTTP threads, so a batch of 25 costs about one round trip
    instead of 25 in a row."""
    texts = [item for item in items if isinstance(item, str)]
    token_lists = iter(await asyncio.gather(*(tokenize(http, url, t, model) for t in texts)))
    return [next(token_lists) if isinstance(item, str) else None for item in items]


def cut_characters(text: str, limit: int) -> str:
    """`text` up to its `limit - 2`-th character that is not a space: at most `limit` tokens
    with the two special ones, whatever the tokenizer (every word piece covers one or more)."""
    seen = 0
    for index, character in enumerate(text):
        if not character.isspace():
            seen += 1
            if seen > limit - 2:
                return text[:index]
    return text


async def fit_through_lemonade(
    http: httpx.AsyncClient, url: str, body: dict[str, Any], limit: int, special: tuple[int, int]
) -> FittedRequest:
    """`body` with every text input longer than `limit` tokens cut: to token ids where Lemonade's
    tokenizer answered as the embedder (its ids open with `special[0]` and close with
    `special[1]`), else by characters (`cut_characters`). Inputs that fit pass as text."""
    items = text_inputs(body)
    if items is None:
        return FittedRequest(body, 0, 0)
    model = body.get("model") if isinstance(body.get("model"), str) else None
    tokenized = await _tokenized(http, url, items, model)
    if model is not None and any(
            isinstance(item, str) and not _said_by_embedder(tokens, special)
            and cut_characters(item, limit) != item
            for item, tokens in zip(items, tokenized, strict=True)):
        await _serve_embedder_last(http, url, model)
        tokenized = await _tokenized(http, url, items, model)
    fitted_items: list[Any] = []
    counts: list[int | None] = []  # known only where the embedder's own tokenizer answered
    truncated = 0
    for item, tokens in zip(items, tokenized, strict=True):
        embedder_said = _said_by_embedder(tokens, special)
        counts.append(min(len(tokens), limit) if tokens is not None and embedder_said else None)
        if tokens is None:
            fitted_items.append(item)
        elif embedder_said and len(tokens) <= limit:
            fitted_items.append(item)
        elif embedder_said:
            fitted_items.append(cut(tokens, limit))
            truncated += 1
        else:
            short = cut_characters(item, limit)
            fitted_items.append(short)
            truncated += short != item
    texts = sum(tokens is not None for tokens in tokenized)
    if not truncated:
        return FittedRequest(body, texts, 0, tuple(counts))
    fitted = copy.copy(body)
    fitted["input"] = fitted_items
    return FittedRequest(fitted, texts, truncated, tuple(counts))


def _said_by_embedder(tokens: list[int] | None, special: tuple[int, int]) -> bool:
    """Whether a tokenization is the embedder's own: its opening and closing special tokens."""
    return tokens is not None and len(tokens) >= 2 and (tokens[0], tokens[-1]) == special


async def _serve_embedder_last(http: httpx.AsyncClient, url: str, model: str) -> None:
    """One word embedded by `model`, so that Lemonade's tokenizer answers as the embedder (it
    answers for the model it served last). Its answer is not needed: a failure shows as the
    next tokenization still not being the embedder's."""
    await http.post(f"{url}/embeddings", json={"model": model, "input": ["tokenizer"]})


async def fit_to_limit(
    http: httpx.AsyncClient, url: str, body: dict[str, Any], limit: int
) -> FittedRequest:
    """`body` with every text input longer than `limit` tokens cut to `limit`.

    When one input is cut, every text input goes as token ids, so the upstream request never
    mixes text and ids (the vectors are the same either way).
    """
    items = text_inputs(body)
    if items is None:
        return FittedRequest(body, 0, 0)
    tokenized = await _tokenized(http, url, items)
    texts = sum(tokens is not None for tokens in tokenized)
    too_long = sum(tokens is not None and len(tokens) > limit for tokens in tokenized)
    counts = tuple(None if tokens is None else min(len(tokens), limit) for tokens in tokenized)
    if not too_long:
        return FittedRequest(body, texts, 0, counts)
    fitted = copy.copy(body)
    fitted["input"] = [
        item if tokens is None else cut(tokens, limit)
        for item, tokens in zip(items, tokenized, strict=True)
    ]
    return FittedRequest(fitted, texts, too_long, counts)
