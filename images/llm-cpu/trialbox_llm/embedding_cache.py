"""Embeddings the server has already computed, served again without the model: exact, by content.

Why: GAIA 0.25.1 embeds each of a session's documents twice — once when the Agent UI indexes
it, and again on the agent's first turn, because its RAG cache holds chunks, not vectors
(gaia/rag/sdk.py) — and a suite indexes the same corpus documents in scenario after scenario.
On these 2 cores the embedder does ~9 chunks/s, so GAIA's 6.2M-character PDF costs minutes each
time. At one input per decode (`--embedder-slots 1`, the default, which the cache requires) the
model computes the same vector for the same text whatever its batch (tests/integration/
test_embedding_equivalence.py measures a drift of exactly 0.0), so a vector kept from an
earlier request is the answer the model would give again.

What is kept: per served model, the input text's SHA-256 → the vector and its token count (for
`usage`), least recently used dropped first within a byte budget. Only plain text inputs with
float vectors are served from here (`encoding_format` base64 and token-id inputs pass on to the
model as they are). The agent still sends every request; what the cache answered is on the
record (`MeterRecord.cached_inputs`, and the run's summary), and it is off unless the server is
started with `--embedding-cache-mib` — `trialbox ab` and speed comparisons start servers without it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from array import array
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

#: The environment variable both servers read the cache's size from (compose passes it on).
CACHE_MIB_ENV = "TRIALBOX_LLM_EMBEDDING_CACHE_MIB"

#: Bytes an entry costs beyond its vector (key, token count, dictionary slot): a rough bound.
_ENTRY_OVERHEAD = 200


@dataclass(frozen=True)
class CachedVector:
    """One input's embedding as the model answered it, and how many tokens it embedded."""

    vector: array  # doubles: the parsed JSON floats exactly, at 8 bytes a value
    tokens: int


def _key(model: str, text: str) -> tuple[str, bytes]:
    return model, hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


@dataclass
class EmbeddingCache:
    """A byte-bounded LRU of vectors by (served model, input text)."""

    max_bytes: int
    _entries: OrderedDict[tuple[str, bytes], CachedVector] = field(default_factory=OrderedDict)
    _bytes: int = 0
    #: Inputs answered from here, and inputs the model embedded (since the server started).
    served: int = 0
    embedded: int = 0

    def look_up(self, model: str, texts: list[str]) -> list[CachedVector | None]:
        """Each text's kept vector, or None where the model must embed it."""
        found: list[CachedVector | None] = []
        for text in texts:
            key = _key(model, text)
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            found.append(entry)
        return found

    def keep(self, model: str, text: str, vector: list[float], tokens: int) -> CachedVector:
        """Keep `vector` for `text` (dropping the least recently used past the budget)."""
        entry = CachedVector(array("d", vector), tokens)
        key = _key(model, text)
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= _size(old)
        self._entries[key] = entry
        self._bytes += _size(entry)
        while self._bytes > self.max_bytes and self._entries:
            _, dropped = self._entries.popitem(last=False)
            self._bytes -= _size(dropped)
        return entry

    @property
    def entries(self) -> int:
        return len(self._entries)


def _size(entry: CachedVector) -> int:
    return entry.vector.itemsize * len(entry.vector) + _ENTRY_OVERHEAD


def servable_texts(body: dict[str, Any]) -> list[str] | None:
    """The request's inputs when the cache may answer them (plain texts, float vectors asked),
    else None: the request passes to the model as it came."""
    if body.get("encoding_format", "float") != "float" or body.get("dimensions") is not None:
        return None
    inputs = body.get("input")
    texts = [inputs] if isinstance(inputs, str) else inputs
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        return None
    return texts


def vectors_of(answer: Any, count: int) -> list[list[float]] | None:
    """The `count` vectors of an OpenAI-style embeddings answer, in input order (None when the
    answer is not that shape: then nothing is kept and it is passed on as it came)."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list) or len(data) != count:
        return None
    vectors: list[list[float] | None] = [None] * count
    for item in data:
        index = item.get("index") if isinstance(item, dict) else None
        vector = item.get("embedding") if isinstance(item, dict) else None
        if (not isinstance(index, int) or not 0 <= index < count or vectors[index] is not None
                or not isinstance(vector, list)
                or not all(isinstance(v, float | int) and not isinstance(v, bool) for v in vector)):
            return None
        vectors[index] = [float(v) for v in vector]
    return vectors if all(v is not None for v in vectors) else None  # type: ignore[return-value]


class ModelAnswer(Protocol):
    """The model's HTTP answer as the cache reads it (an `httpx.Response`)."""

    @property
    def status_code(self) -> int: ...

    @property
    def content(self) -> bytes: ...


#: Sends the inputs the cache lacks to the model: its answer, and each input's tokens as
#: embedded (None where they are not known; then nothing is kept).
Embed = Callable[[list[str]], Awaitable[tuple[ModelAnswer, tuple[int | None, ...]]]]


@dataclass(frozen=True)
class CacheOutcome:
    """What `through_cache` made of one request."""

    #: Every input's vector in input order, or None when the model's answer could not be merged
    #: (a refusal, or an answer not in the expected shape): then `model_answer` is that answer.
    vectors: list[CachedVector] | None
    model_answer: ModelAnswer | None
    #: Inputs the cache answered, and inputs sent to the model.
    cached: int
    embedded: int


async def through_cache(cache: EmbeddingCache, model: str, texts: list[str],
                        embed: Embed) -> CacheOutcome:
    """Answer what the cache holds for `model`, send only the rest to the model (`embed`), and
    keep what it answers. One definition for llm-cpu's own embeddings route and the front door
    before Lemonade."""
    found = cache.look_up(model, texts)
    missing = [i for i, entry in enumerate(found) if entry is None]
    cached = len(texts) - len(missing)
    if missing:
        upstream, tokens = await embed([texts[i] for i in missing])
        vectors = vectors_of(_json_or_none(upstream.content), len(missing)) \
            if upstream.status_code == 200 else None
        if vectors is None or len(tokens) != len(missing) or None in tokens:
            return CacheOutcome(None, upstream, cached, len(missing))
        cache.embedded += len(missing)
        for i, vector, count in zip(missing, vectors, tokens, strict=True):
            found[i] = cache.keep(model, texts[i], vector, count or 0)
    cache.served += cached
    return CacheOutcome([entry for entry in found if entry is not None], None, cached,
                        len(missing))


def _json_or_none(content: bytes) -> Any:
    try:
        return json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return None


def answer(model: str, vectors: list[CachedVector]) -> dict[str, Any]:
    """The OpenAI-style embeddings answer for `vectors`, in order, with their tokens as usage."""
    tokens = sum(v.tokens for v in vectors)
    return {
        "object": "list",
        "model": model,
        "data": [{"object": "embedding", "index": i, "embedding": v.vector.tolist()}
                 for i, v in enumerate(vectors)],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def add_cache_option(parser: argparse.ArgumentParser) -> None:
    """`--embedding-cache-mib`, the same flag on llm-cpu and on the front door before Lemonade."""
    parser.add_argument(
        "--embedding-cache-mib",
        default=os.environ.get(CACHE_MIB_ENV, "0"),
        help="keep computed embeddings (by input text) in this many MiB and answer repeated "
        "inputs from them; 0 (the default) keeps none (trialbox_llm/embedding_cache.py; env "
        f"{CACHE_MIB_ENV})",
    )


def cache_mib(parser: argparse.ArgumentParser, value: str) -> int:
    """The flag's value in MiB (0: off); one clear error through `parser` when it is not one."""
    try:
        mib = int(value)
    except ValueError:
        mib = -1
    if mib < 0:
        parser.error(f"--embedding-cache-mib (or {CACHE_MIB_ENV}): expected 0 (off) or a size "
                     f"in MiB, got {value!r}")
    return mib
