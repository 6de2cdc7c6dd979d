"""Repeatable decoding's policy (trialbox_llm.decoding): what a covered request becomes, and who
is covered for how long. The routes that apply it run against real llama.cpp in
tests/integration/test_llm_server.py (what llama.cpp itself received)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from trialbox_llm.decoding import REPEATABLE, Decoding, DecodingRequest

AGENT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 1.2,
         "top_k": 40, "top_p": 0.9, "min_p": 0.1, "seed": 9, "max_tokens": 50, "tools": [{}]}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_covered_request_is_greedy_with_the_policy_seed_and_otherwise_as_sent():
    decoding = Decoding()
    decoding.set(DecodingRequest(client="10.0.0.2", seed=77))
    body, label = decoding.apply("10.0.0.2", dict(AGENT))
    assert label == REPEATABLE
    assert body == {**AGENT, "temperature": 0.0, "top_k": 1, "top_p": 1.0, "min_p": 0.0,
                    "seed": 77, "cache_prompt": False}


def test_other_clients_pass_as_sent():
    decoding = Decoding()
    decoding.set(DecodingRequest(client="10.0.0.2"))
    assert decoding.apply("10.0.0.3", dict(AGENT)) == (AGENT, None)
    raw = json.dumps(AGENT).encode()
    assert decoding.apply_raw("10.0.0.3", raw) == (raw, None)  # the bytes themselves


def test_the_pass_through_door_rewrites_the_bytes_of_a_covered_request():
    decoding = Decoding()
    decoding.set(DecodingRequest(client="10.0.0.2"))
    raw, label = decoding.apply_raw("10.0.0.2", json.dumps(AGENT).encode())
    assert label == REPEATABLE and json.loads(raw)["temperature"] == 0.0
    assert decoding.apply_raw("10.0.0.2", b"not json") == (b"not json", None)  # Lemonade answers


def test_a_lease_lapses_unless_renewed_and_sampled_clears_it():
    clock = Clock()
    decoding = Decoding(clock=clock)
    decoding.set(DecodingRequest(client="10.0.0.2", ttl_s=120))
    clock.now += 100
    decoding.set(DecodingRequest(client="10.0.0.2", ttl_s=120))  # renewed
    clock.now += 100
    assert decoding.of("10.0.0.2") is not None
    clock.now += 21
    assert decoding.of("10.0.0.2") is None and decoding.live() == []  # a dead runner's lease
    decoding.set(DecodingRequest(client="10.0.0.2"))
    decoding.set(DecodingRequest(client="10.0.0.2", mode="sampled"))
    assert decoding.of("10.0.0.2") is None


@pytest.mark.parametrize("bad", [{"client": "x", "mode": "greedy"}, {"client": "x", "ttl_s": 0},
                                 {"client": "x", "ttl_s": 7200}, {"mode": "repeatable"}])
def test_a_bad_policy_request_is_refused(bad):
    with pytest.raises(ValidationError):
        DecodingRequest.model_validate(bad)
