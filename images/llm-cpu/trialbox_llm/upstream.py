"""Which server answers behind the front door, switched by the runner between blocks of an A/B.

`trialbox ab` starts two LLM servers (A and B) behind one front door, so the sandboxes, their
networks and the door's meter and decoding policies stay the same while the server changes.
Between two blocks of its schedule the runner tells the door which server serves next:
`POST /trialbox/upstream {"upstream": "http://…:13305", "label": "B", "embed_max_tokens": null}`
with the admin token. The switch waits until no request is in flight (the block before it has
ended, but a request may still be finishing) and refuses with 409 if one is still running after
`drain_s`: a request that began on A must not be half-measured on B. `GET` says which serves.

Every meter record names the server that answered it (its `upstream` label), so the runner can
check each turn was served by the side its block says.
"""

from __future__ import annotations

import asyncio
import time

from pydantic import BaseModel, Field

UPSTREAM_PATH = "/trialbox/upstream"


class UpstreamRequest(BaseModel):
    """`POST /trialbox/upstream`: the server that answers from now on."""

    upstream: str = Field(description="the server's origin as the door reaches it, e.g. "
                          "http://10.0.3.2:13305", pattern=r"^https?://[^/\s]+$")
    label: str = Field(default="", max_length=64, description=(
        "the name meter records give the server (`A`, `B`); empty: its origin"))
    embed_max_tokens: int | None = Field(default=None, ge=2, description=(
        "cut embedding inputs to this many tokens for this server (a Lemonade serving the "
        "bundled MiniLM); None: passed as sent (llm-cpu cuts them itself)"))
    drain_s: float = Field(default=30.0, ge=0, le=600, description=(
        "seconds to wait for requests in flight to end before refusing the switch"))


class UpstreamReport(BaseModel):
    """What `GET`/`POST /trialbox/upstream` answer: the server that answers now."""

    upstream: str = Field(description="the origin requests go to")
    label: str = Field(description="the name meter records give it")
    embed_max_tokens: int | None = Field(description="embedding inputs cut to this many tokens")
    in_flight: int = Field(description="requests being answered now")
    switches: int = Field(description="switches since the door started")


class InFlight:
    """Requests between arrival and their last byte: the switch waits for none to be left."""

    def __init__(self) -> None:
        self.count = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def enter(self) -> None:
        self.count += 1
        self._idle.clear()

    def leave(self) -> None:
        self.count = max(0, self.count - 1)
        if self.count == 0:
            self._idle.set()

    async def drained(self, timeout_s: float) -> bool:
        """True once nothing is in flight, False if something still is after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while self.count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._idle.wait(), remaining)
            except TimeoutError:
                return False
        return True
