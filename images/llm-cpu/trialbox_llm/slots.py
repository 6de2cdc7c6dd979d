"""Each client its own llama.cpp slot when it pins one.

Why: GAIA pins every chat request to a slot (`"id_slot": 0`, measured on GAIA 0.25.1's requests).
On a desktop that is one user on one server, and the pin keeps the conversation's prompt cache
in one place. On a server shared by several sandboxes every sandbox pins the same slot 0:
llama.cpp then holds each request until slot 0 is free, so two sandboxes' turns run one after
the other while the other slots sit idle, and each sandbox's prompt evicts the other's cache.
Measured on llm-cpu at `--concurrency 2` (2 slots): every chat's first token came only after
the other sandbox's chat had ended, and prompts the slot had held before were prefilled again.

What the front door does: a request that pins a slot is read as "my conversation's own slot".
Each (client, pinned slot) pair is given one of the server's slots and keeps it; a pair seen for
the first time gets an idle slot before a busy one, and of those the one used least recently
(a never-used one first), taking it over from whoever held it. So the first sandbox is given
slot 0, as it asked, and a second one beside it slot 1. A request that pins no slot (no
`id_slot`, or -1: llama.cpp's "any") is sent as it came, and so is every request while the
server's slot count is unknown. Sampling, messages and limits are never touched: which slot
runs a request does not change what the agent asked for. Which slot ran it is on its meter
record (`MeterRecord.slot`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: The request field llama.cpp reads a pinned slot from.
SLOT_FIELD = "id_slot"


@dataclass
class SlotPins:
    """Which server slot each client's pinned conversation runs on."""

    clock: Callable[[], float] = time.monotonic
    #: (client, the slot it pinned) -> the server slot it was given.
    _given: dict[tuple[str, int], int] = field(default_factory=dict)
    #: server slot -> when a request sent to it last ended (or began, while none has ended).
    _last_used: dict[int, float] = field(default_factory=dict)
    #: server slot -> requests sent to it and not yet ended.
    _busy: dict[int, int] = field(default_factory=dict)

    def apply(self, client: str, body: dict[str, Any], slot_count: int | None
              ) -> tuple[dict[str, Any], int | None]:
        """The body to send on, and the server slot it now pins; call `end(slot)` when its
        answer is over. The slot is None, and the body as it came, when the request pins no
        slot or the server's slot count is unknown."""
        pinned = body.get(SLOT_FIELD)
        if isinstance(pinned, bool) or not isinstance(pinned, int) or pinned < 0:
            return body, None
        if not slot_count:
            return body, None
        slot = self._slot_for(client, pinned, slot_count)
        self._busy[slot] = self._busy.get(slot, 0) + 1
        self._last_used[slot] = self.clock()
        return {**body, SLOT_FIELD: slot}, slot

    def end(self, slot: int) -> None:
        """A request sent to `slot` is answered (or abandoned)."""
        self._busy[slot] = max(0, self._busy.get(slot, 0) - 1)
        self._last_used[slot] = self.clock()

    def _slot_for(self, client: str, pinned: int, slot_count: int) -> int:
        key = (client, pinned)
        slot = self._given.get(key)
        if slot is not None and slot < slot_count:
            return slot
        # An idle slot before a busy one (a busy slot would hold this request until it is
        # free), then the one used least recently (its cached prompt is the stalest).
        slot = min(range(slot_count), key=lambda s: (self._busy.get(s, 0) > 0,
                                                      self._last_used.get(s, float("-inf")), s))
        # Whoever held it gives it up: their next request is given a slot anew.
        self._given = {k: v for k, v in self._given.items() if v != slot}
        self._given[key] = slot
        return slot
