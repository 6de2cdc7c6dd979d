"""The embeddings cache at the front door before the real Lemonade Server: a repeated input is
answered with the vector Lemonade computed for it, bit for bit, and the meter says how many
inputs the cache answered. The null case: the suite's door without a cache (as `trialbox ab`
runs it) never answers from one.

A second door, with `--embedding-cache-mib`, is started before the suite's shared Lemonade
(`real_lemonade`), beside the shared door, so each test can compare the cached door's vectors
with Lemonade's own answers for the same inputs.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from lemonade_layout import LemonadeLayout

from runner.stack.labels import RUN_LABEL
from runner.stack.lemonade_container import start_front_door

EMBEDDER = "user.embeddinggemma-300m-GGUF"  # GAIA 0.25.1's name; Lemonade reports it unprefixed
#: Chunks in the shape GAIA's indexing sends: a few hundred tokens of prose from one document.
CHUNKS = [
    "Section 4.2 Forklift charging. Chargers stand in bay C only; keep two metres clear and "
    "log each battery swap with the shift lead. " * 3,
    "Section 7.1 Visitors sign in at reception, wear the orange vest on the floor and are "
    "escorted past the press line at all times. " * 3,
]
#: Past MiniLM's 256 word pieces: the door cuts it before Lemonade sees it.
LONG_CHUNK = " ".join(f"inspection {n}: valve {n % 17} torque {n * 3} Nm, signed" for n in range(120))


@pytest.fixture(scope="module")
def cached_door(real_lemonade: LemonadeLayout) -> Iterator[str]:
    """A front door with a 16 MiB embeddings cache before the suite's Lemonade; its URL."""
    door, url = start_front_door(f"tbx-{real_lemonade.tag}-cached-llm",
                                 {RUN_LABEL: real_lemonade.tag}, real_lemonade.stack_network,
                                 real_lemonade.lemonade_url, admin_token=real_lemonade.admin_token,
                                 embedding_cache_mib=16)
    try:
        yield url
    finally:
        door.remove(force=True)


def _embed(url: str, inputs: list[str], model: str = EMBEDDER) -> tuple[list[list[float]], dict]:
    reply = httpx.post(f"{url}/api/v1/embeddings", json={"model": model, "input": inputs},
                       timeout=120)
    assert reply.status_code == 200, reply.text[:300]
    answer = reply.json()
    return [item["embedding"] for item in sorted(answer["data"], key=lambda d: d["index"])], answer


def _last_embedding_record(url: str) -> dict:
    records = httpx.get(f"{url}/trialbox/meter", timeout=5).json()["records"]
    return [r for r in records if r["route"].endswith("embeddings")][-1]


def _embedder_served_last(url: str) -> None:
    """Lemonade's tokenizer answers for the model that served last (embedding_inputs.py): an
    embedding first makes it the embedder's, so a test starts where GAIA's indexing does."""
    _embed(url, ["warm-up"])


def test_a_repeated_input_gets_lemonades_own_vector_from_the_cache(
        real_lemonade: LemonadeLayout, cached_door: str) -> None:
    _embedder_served_last(cached_door)
    first, first_answer = _embed(cached_door, CHUNKS)
    assert _last_embedding_record(cached_door)["cached_inputs"] == 0
    again, again_answer = _embed(cached_door, CHUNKS)
    assert again == first  # bit for bit: the kept vectors, not near ones
    assert again_answer["usage"] == first_answer["usage"]
    assert _last_embedding_record(cached_door)["cached_inputs"] == 2
    # They are Lemonade's answers: the suite's door without a cache gives the same vectors.
    direct, _ = _embed(real_lemonade.door_url, CHUNKS)
    for kept, lemonades in zip(first, direct, strict=True):
        assert kept == pytest.approx(lemonades, abs=1e-6)


def test_a_mixed_request_sends_only_the_new_inputs_and_keeps_the_order(
        real_lemonade: LemonadeLayout, cached_door: str) -> None:
    _embedder_served_last(cached_door)
    kept, _ = _embed(cached_door, [CHUNKS[0]])
    new_text = "Section 9.4 Spill kits hang beside every drum store; report their use the same day."
    # GAIA's name without the `user.` prefix is the same model to Lemonade, and to the cache.
    mixed, _ = _embed(cached_door, [new_text, CHUNKS[0], new_text], model=EMBEDDER.removeprefix("user."))
    assert _last_embedding_record(cached_door)["cached_inputs"] == 1
    assert mixed[1] == kept[0] and mixed[0] == mixed[2]
    alone, _ = _embed(real_lemonade.door_url, [new_text])
    assert mixed[0] == pytest.approx(alone[0], abs=1e-6)


def test_a_long_input_is_kept_as_cut_and_served_again(
        real_lemonade: LemonadeLayout, cached_door: str) -> None:
    _embedder_served_last(cached_door)
    first, _ = _embed(cached_door, [LONG_CHUNK])
    again, _ = _embed(cached_door, [LONG_CHUNK])
    assert again == first and len(first[0]) == 384
    assert _last_embedding_record(cached_door)["cached_inputs"] == 1


def test_after_a_chat_a_chunk_is_still_sent_whole_and_its_vector_kept(
        real_lemonade: LemonadeLayout, cached_door: str) -> None:
    """After a chat Lemonade's tokenizer is the chat model's, and the door once cut this chunk
    by characters (to 254 non-space ones, about a third of it). It now has the embedder serve
    one word and asks again, so the chunk goes whole: the vector Lemonade gives it alone, kept
    and served again."""
    chunk = "Section 11.3 Hearing protection is worn past the yellow line in hall B. " * 6
    httpx.post(f"{cached_door}/api/v1/chat/completions", timeout=60, json={
        "model": "Gemma-4-E4B-it-GGUF", "max_tokens": 2, "messages": [{"role": "user", "content": "Hi"}]})
    after_chat, _ = _embed(cached_door, [chunk])
    assert _last_embedding_record(cached_door)["cached_inputs"] == 0
    alone, _ = _embed(real_lemonade.door_url, [chunk])
    assert after_chat[0] == pytest.approx(alone[0], abs=1e-6)
    again, _ = _embed(cached_door, [chunk])
    assert again == after_chat and _last_embedding_record(cached_door)["cached_inputs"] == 1


def test_without_a_cache_the_door_answers_nothing_from_one(real_lemonade: LemonadeLayout) -> None:
    for _ in range(2):
        _embed(real_lemonade.door_url, CHUNKS)
        assert not _last_embedding_record(real_lemonade.door_url)["cached_inputs"]
