"""The embeddings cache's own rules: what it may answer, what it keeps, and within what size.

Its answers against the real model (bit for bit, usage included, and the meter's count) are
in tests/integration/test_llm_server.py."""

from __future__ import annotations

import pytest

from trialbox_llm.embedding_cache import EmbeddingCache, answer, servable_texts, vectors_of

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
