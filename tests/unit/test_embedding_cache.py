"""The embeddings cache's own rules: what it may answer, what it keeps, and within what size.

Its answers against the real model (bit for bit, usage included, and the meter's count) are
in tests/integration/test_llm_server.py."""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import dataclass

import pytest

from trialbox_llm.embedding_cache import (
    EmbeddingCache,
    answer,
    cache_mib,
    servable_texts,
    through_cache,
    vectors_of,
)
from trialbox_llm.front_door import _tokens_each

MODEL = "all-MiniLM-L6-v2-GGUF"


def test_a_text_is_found_again_under_its_model_only() -> None:
    cache = EmbeddingCache(max_bytes=1 << 20)
    assert cache.look_up(MODEL, ["fuel log"]) == [None]
    cache.keep(MODEL, "fuel log", [0.25, -0.5, 1e-9], tokens=4)
    [entry] = cache.look_up(MODEL, ["fuel log"])
    assert entry is not None and entry.vector.tolist() == [0.25, -0.5, 1e-9] and entry.tokens == 4
    assert cache.look_up("another-embedder", ["fuel log"]) == [None]  # keyed by model too
    assert cache.look_up(MODEL, ["fuel log "]) == [None]  # exact text, not a near one


def test_the_least_recently_used_go_first_past_the_byte_budget() -> None:
    one = 384 * 8 + 200  # a MiniLM vector in doubles, and its overhead
    cache = EmbeddingCache(max_bytes=2 * one)
    for text in ("a", "b"):
        cache.keep(MODEL, text, [0.0] * 384, tokens=3)
    cache.look_up(MODEL, ["a"])  # "a" is now the more recent
    cache.keep(MODEL, "c", [0.0] * 384, tokens=3)
    assert cache.entries == 2
    assert [e is not None for e in cache.look_up(MODEL, ["a", "b", "c"])] == [True, False, True]


@pytest.mark.parametrize(("body", "servable"), [
    ({"input": "one text"}, ["one text"]),
    ({"input": ["a", "b"], "encoding_format": "float"}, ["a", "b"]),
    ({"input": ["a", "b"], "encoding_format": "base64"}, None),  # not the vectors we keep
    ({"input": ["a"], "dimensions": 128}, None),
    ({"input": [[101, 102]]}, None),  # token ids go to the model as sent
    ({"input": ["a", [101, 102]]}, None),
    ({"input": []}, None),
    ({}, None),
])  # fmt: skip
def test_only_plain_texts_asking_for_float_vectors_are_served(body: dict, servable: list | None) -> None:
    assert servable_texts(body) == servable


def test_an_answer_not_in_the_expected_shape_is_not_kept() -> None:
    good = {"data": [{"index": 1, "embedding": [0.5]}, {"index": 0, "embedding": [1, -1.5]}]}
    assert vectors_of(good, 2) == [[1.0, -1.5], [0.5]]  # back in input order
    for bad in (
        {"data": [{"index": 0, "embedding": [0.5]}]},  # one vector for two inputs
        {"data": [{"index": 0, "embedding": [0.5]}, {"index": 0, "embedding": [0.5]}]},
        {"data": [{"index": 0, "embedding": [0.5]}, {"index": 2, "embedding": [0.5]}]},
        {"data": [{"index": 0, "embedding": [True]}, {"index": 1, "embedding": [0.5]}]},
        {"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": [0.5]}]},
        {"error": {"message": "input too large"}},
        ["not", "an", "answer"],
    ):
        assert vectors_of(bad, 2) is None, bad


def test_a_cached_answer_has_the_models_shape_and_its_usage() -> None:
    cache = EmbeddingCache(max_bytes=1 << 20)
    kept = [cache.keep(MODEL, t, [float(i)], tokens=5 + i) for i, t in enumerate(["x", "y"])]
    assert answer("user.embeddinggemma-300m-GGUF", kept) == {
        "object": "list", "model": "user.embeddinggemma-300m-GGUF",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.0]},
                 {"object": "embedding", "index": 1, "embedding": [1.0]}],
        "usage": {"prompt_tokens": 11, "total_tokens": 11},
    }  # fmt: skip


@dataclass
class _Answer:
    """An embeddings answer as `through_cache` reads it (httpx.Response's two fields)."""

    status_code: int
    content: bytes


def _model(status: int = 200, tokens: int | None = 7, shape_ok: bool = True):  # noqa: ANN202
    """An `embed` that answers each input with [len(text)] and records what it was sent."""
    sent: list[list[str]] = []

    async def embed(inputs: list[str]) -> tuple[_Answer, tuple[int | None, ...]]:
        sent.append(inputs)
        data = [{"index": i, "embedding": [float(len(t))]} for i, t in enumerate(inputs)]
        body = {"data": data if shape_ok else data[:-1]}
        return _Answer(status, json.dumps(body).encode()), (tokens,) * len(inputs)

    return embed, sent


def test_only_the_inputs_the_cache_lacks_go_to_the_model_and_come_back_in_order() -> None:
    cache = EmbeddingCache(max_bytes=1 << 20)
    cache.keep(MODEL, "bb", [9.0], tokens=3)
    embed, sent = _model()
    outcome = asyncio.run(through_cache(cache, MODEL, ["a", "bb", "ccc", "a"], embed))
    assert sent == [["a", "ccc", "a"]]
    assert outcome.vectors is not None
    assert [v.vector.tolist() for v in outcome.vectors] == [[1.0], [9.0], [3.0], [1.0]]
    assert (outcome.cached, outcome.embedded, cache.served, cache.embedded) == (1, 3, 1, 3)
    again = asyncio.run(through_cache(cache, MODEL, ["ccc"], embed))
    assert len(sent) == 1 and again.cached == 1 and again.embedded == 0


@pytest.mark.parametrize(("status", "tokens", "shape_ok"), [
    (500, 7, True),      # a refusal goes back as it came
    (200, None, True),   # tokens not counted: nothing kept, the caller sends the whole request
    (200, 7, False),     # an answer short of a vector
])  # fmt: skip
def test_an_answer_that_cannot_be_merged_is_handed_back_and_nothing_is_kept(
        status: int, tokens: int | None, shape_ok: bool) -> None:
    cache = EmbeddingCache(max_bytes=1 << 20)
    cache.keep(MODEL, "kept", [1.0], tokens=2)
    embed, _ = _model(status, tokens, shape_ok)
    outcome = asyncio.run(through_cache(cache, MODEL, ["kept", "new", "newer"], embed))
    assert outcome.vectors is None and outcome.model_answer is not None
    assert outcome.model_answer.status_code == status and outcome.cached == 1
    assert cache.entries == 1 and cache.served == 0 and cache.embedded == 0


@pytest.mark.parametrize("value", ["-1", "many", "1.5"])
def test_a_cache_size_that_is_not_whole_mib_is_one_clear_error(
        value: str, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="front_door")
    with pytest.raises(SystemExit) as stopped:
        cache_mib(parser, value)
    assert stopped.value.code == 2
    assert f"expected 0 (off) or a size in MiB, got {value!r}" in capsys.readouterr().err


@pytest.mark.parametrize(("counts", "usage", "each"), [
    ([5, 7], 12, (5, 7)),             # the embedder's tokenizer counted each one
    ([None], 40, (40,)),              # one input: the answer's usage is its count
    ([4, None, None], 15, (4, 6, 5)),  # the rest shared out, summing to the usage
    ([None, None], None, (None, None)),  # no usage in the answer: unknown, nothing is kept
])  # fmt: skip
def test_each_inputs_tokens_at_the_front_door(counts: list[int | None], usage: int | None,
                                              each: tuple[int | None, ...]) -> None:
    content = json.dumps({"data": [], **({"usage": {"prompt_tokens": usage}} if usage else {})})
    assert _tokens_each(counts, _Answer(200, content.encode())) == each
