"""Repeatable decoding for a speed comparison: the same conversation in every trial.

Why: a turn's prompt grows with the agent's earlier answers. Under the agent's own sampling those
answers differ between trials, so the same turn's prompt has another length (and llama.cpp's
prompt cache holds more or less of it) in every trial, and its time to first token varies far
more than the server's timing jitter does (issue 18: cell noise 0.65-0.76 on a log scale). With
greedy decoding and a fixed seed forced on a sandbox's chat requests, trials repeat the same
conversation and a turn's TTFT differs between trials by jitter alone.

Why per client, set by the runner with the admin token, and not a server start option: one
server serves several runs at once (and the cluster's nodes each serve several sandboxes), the
judge and the user simulator may call it too, and a start option would change what all of them
get and need a restart. A policy is set for one sandbox's address (`POST /trialbox/decoding`,
admin token; the address is how `meter` names the sandbox too), so another run's sandboxes, the
judge and the simulator are untouched. It is a lease (`ttl_s`): the runner renews it while the
sandbox lives and deletes it when the sandbox goes; a runner that dies leaves a policy that
lapses by itself within `ttl_s`, so a later sandbox given the same address is not greedy by
accident.

What changes in a covered request: `temperature` 0, `top_k` 1, `top_p` 1, `min_p` 0 and `seed`
the policy's, whatever the agent sent, and `cache_prompt` false; nothing else (tools, limits,
messages stay as sent). Why the prompt cache goes too: greedy decoding alone did not repeat.
With the cache, a trial's first prompt is prefilled from scratch after another scenario but
found cached after the previous trial of the same one; the logits then differ in their last
bits, a near-tie of a 135M model flips, and the answers part (measured: 220 prompt tokens, 57
answer tokens in trial 1, 37 in trial 2). Prefilled whole every time, the same prompt gives the
same logits, and a turn's time to first token is the same work in every trial: the prefill of
its whole prompt (for a driver comparison the figure to compare; not what a cached agent sees).
Each metered record says whether its request was forced (`MeterRecord.decoding`). The route
is `routes.decoding_route`; this module has no web framework in it, so the runner imports its
names without the server's dependencies.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

DECODING_PATH = "/trialbox/decoding"
#: A lease long enough that a renewal every third of it survives a busy machine, short enough
#: that a dead runner's policy is gone before its sandbox's address is likely handed out again.
DEFAULT_TTL_S = 120.0
MAX_TTL_S = 3600.0
DEFAULT_SEED = 1234
#: Only chat generations are forced: embeddings and reranking have no sampling.
FORCED_ROUTES = ("chat/completions", "completions")

#: The label a forced request's meter record carries.
REPEATABLE = "repeatable"


class DecodingRequest(BaseModel):
    """`POST /trialbox/decoding`: set (or clear) the policy of one client."""

    client: str = Field(description="the client's source address (the sandbox's, on its network)")
    mode: str = Field(default=REPEATABLE, pattern="^(repeatable|sampled)$", description=(
        "repeatable: greedy decoding with a fixed seed forced on its chat requests; sampled: "
        "its requests pass as sent (clears the policy)"))
    seed: int = Field(default=DEFAULT_SEED, ge=0, le=2**31 - 1, description="the forced seed")
    ttl_s: float = Field(default=DEFAULT_TTL_S, gt=0, le=MAX_TTL_S, description=(
        "seconds until the policy lapses unless set again (a dead runner's policy goes by itself)"))


class DecodingPolicy(BaseModel):
    """One client's policy as the server holds it."""

    client: str = Field(description="the client's source address")
    mode: str = Field(description="repeatable")
    seed: int = Field(description="the seed forced on its chat requests")
    expires_at: float = Field(description="Unix time at which the policy lapses")


def forced(body: dict[str, Any], seed: int) -> dict[str, Any]:
    """`body` with greedy decoding and `seed` in place of the agent's sampling settings."""
    body = dict(body)
    body.update(temperature=0.0, top_k=1, top_p=1.0, min_p=0.0, seed=seed, cache_prompt=False)
    return body


@dataclass
class Decoding:
    """The policies of this front door, by client address; lapsed ones are never applied."""

    policies: dict[str, DecodingPolicy] = field(default_factory=dict)
    clock: Callable[[], float] = time.time

    def set(self, request: DecodingRequest) -> DecodingPolicy | None:
        if request.mode != REPEATABLE:
            self.policies.pop(request.client, None)
            return None
        policy = DecodingPolicy(client=request.client, mode=REPEATABLE, seed=request.seed,
                                expires_at=self.clock() + request.ttl_s)
        self.policies[request.client] = policy
        return policy

    def of(self, client: str) -> DecodingPolicy | None:
        """The live policy of `client` (a dict lookup on the hot path when there is none)."""
        policy = self.policies.get(client)
        if policy is None:
            return None
        if policy.expires_at <= self.clock():
            self.policies.pop(client, None)
            return None
        return policy

    def live(self) -> list[DecodingPolicy]:
        return [p for p in list(self.policies.values()) if self.of(p.client) is not None]

    def apply(self, client: str, body: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """(the body to send on, the record's label) for a parsed chat request."""
        policy = self.of(client)
        if policy is None:
            return body, None
        return forced(body, policy.seed), REPEATABLE

    def apply_raw(self, client: str, raw: bytes) -> tuple[bytes, str | None]:
        """The same for a request still in bytes (the pass-through front door). A body that is
        not a JSON object passes as sent: Lemonade answers it with its own error."""
        policy = self.of(client)
        if policy is None:
            return raw, None
        try:
            body = json.loads(raw or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError):
            return raw, None
        if not isinstance(body, dict):
            return raw, None
        return json.dumps(forced(body, policy.seed)).encode(), REPEATABLE


class DecodingReport(BaseModel):
    """`GET /trialbox/decoding` (and the answer to a POST): the live policies."""

    policies: list[DecodingPolicy] = Field(description="clients whose chat requests are forced")

