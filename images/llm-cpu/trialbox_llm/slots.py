"""A chat pinned to a llama.cpp slot is not held behind another sandbox's answer on it.

Why: GAIA pins every chat request to a slot (`"id_slot": 0`, measured on GAIA 0.25.1's requests).
On a desktop that is one user on one server, and the pin keeps the conversation's prompt cache
in one place. On a server shared by several sandboxes every sandbox pins the same slot 0:
llama.cpp then holds each request until slot 0 is free, so two sandboxes' turns run one after
the other while the other slots sit idle, and each sandbox's prompt evicts the other's cache.
Measured on llm-cpu at `--concurrency 2` (2 slots): every chat's first token came only after
the other sandbox's chat had ended, and prompts the slot had held before were prefilled again.

What the front door does: a request that pins a slot is read as "my conversation's own slot".
Each (client, pinned slot) pair runs on the slot it asked for, or on the one it was moved to
before, unless another pair's request is on that slot right now and another slot is idle: then
it is moved to the idle slot used least recently, and stays there. So sandboxes one after the
other all run on slot 0, as each asked (`make bench`, and a repeatable run's trials, whose
greedy answers must not depend on the slot); two at once soon run on a slot each. A pair's own
requests still wait for each other on its slot, as on a desktop. A request that pins no slot
(no `id_slot`, or -1: llama.cpp's "any"), a slot the server lacks, and every request while the
server's slot count is unknown are sent as they came. Sampling, messages and limits are never
touched. Which slot ran a request is on its meter record (`MeterRecord.slot`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: The request field llama.cpp reads a pinned slot from.
SLOT_FIELD = "id_slot"


@dataclass(frozen=True)
class Pin:
    """One request's place: the (client, pinned slot) pair it came from and the slot it got."""

    pair: tuple[str, int]
    slot: int


@dataclass
class SlotPins:
    """Which server slot each client's pinned conversation runs on."""

    clock: Callable[[], float] = time.monotonic
    #: (client, the slot it pinned) -> the server slot it runs on.
    _given: dict[tuple[str, int], int] = field(default_factory=dict)
    #: server slot -> when a request sent to it last ended (or began, while none has ended).
    _last_used: dict[int, float] = field(default_factory=dict)
    #: server slot -> the pairs whose requests are on it now (one entry per request).
    _on: dict[int, list[tuple[str, int]]] = field(default_factory=dict)

    def apply(self, client: str, body: dict[str, Any], slot_count: int | None
              ) -> tuple[dict[str, Any], Pin | None]:
        """The body to send on, and where it is pinned; call `end(pin)` when its answer is
        over. The pin is None, and the body as it came, when the request pins no slot or one
        the server lacks, or the server's slot count is unknown."""
        pinned = body.get(SLOT_FIELD)
        if isinstance(pinned, bool) or not isinstance(pinned, int) or pinned < 0:
            return body, None
        if not slot_count or pinned >= slot_count:
            return body, None
        key = (client, pinned)
        slot = self._given.get(key, pinned)
        held_by_another = any(pair != key for pair in self._on.get(slot, []))
        idle = [s for s in range(slot_count) if not self._on.get(s)]
        if held_by_another and idle:
            # Another sandbox's answer holds this slot: llama.cpp would keep this request
            # waiting while an idle slot is free. The idle one used least recently is moved to.
            slot = min(idle, key=lambda s: (self._last_used.get(s, float("-inf")), s))
        self._given[key] = slot
        self._on.setdefault(slot, []).append(key)
        self._last_used[slot] = self.clock()
        return {**body, SLOT_FIELD: slot}, Pin(key, slot)

    def any_slot(self, slot_count: int) -> Pin:
        """Where a request that pins no slot runs when the slots are split over several
        llama-servers: the idle slot used least recently, or the least busy while none is
        idle. The request itself stays unpinned on that slot's server; its pin's pair is no
        client's (`("", -1)`), so a sandbox pinning the same slot is moved off it as usual."""
        slot = min(range(slot_count), key=lambda s: (
            len(self._on.get(s, [])), self._last_used.get(s, float("-inf")), s))
        pair = ("", -1)
        self._on.setdefault(slot, []).append(pair)
        self._last_used[slot] = self.clock()
        return Pin(pair, slot)

    def end(self, pin: Pin) -> None:
        """The request `pin` placed is answered (or abandoned)."""
        on = self._on.get(pin.slot, [])
        if pin.pair in on:
            on.remove(pin.pair)
        self._last_used[pin.slot] = self.clock()
