"""Each client its own llama.cpp slot (trialbox_llm.slots): which slot a pinned request is sent
to. That two sandboxes pinning slot 0 then really decode side by side on llama.cpp is shown in
tests/integration/test_llm_server.py."""

from __future__ import annotations

import asyncio

from trialbox_llm.in_flight import InFlight
from trialbox_llm.slots import SLOT_FIELD, Pin, SlotPins

GAIA_CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.1,
             "max_tokens": 512, "tools": [{}], SLOT_FIELD: 0}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def place(pins: SlotPins, client: str, body: dict | None = None, slot_count: int = 2) -> Pin:
    sent, pin = pins.apply(client, dict(body or GAIA_CHAT), slot_count)
    assert pin is not None and sent[SLOT_FIELD] == pin.slot
    return pin


def test_one_client_keeps_the_slot_it_pinned_and_everything_else_as_sent():
    pins = SlotPins(clock=Clock())
    for _ in range(3):
        body, pin = pins.apply("10.0.0.2", dict(GAIA_CHAT), slot_count=2)
        assert pin is not None and pin.slot == 0 and body == GAIA_CHAT
        pins.end(pin)


def test_sandboxes_one_after_the_other_all_run_on_the_slot_they_asked_for():
    """`make bench` and a repeatable run's trials: as before, every sandbox on slot 0."""
    pins = SlotPins(clock=Clock())
    for client in ("10.0.0.2", "10.0.1.2", "10.0.2.2"):
        for _ in range(2):
            pin = place(pins, client)
            assert pin.slot == 0
            pins.end(pin)


def test_a_second_sandbox_is_moved_to_an_idle_slot_while_the_first_answers_and_stays():
    pins = SlotPins(clock=Clock())
    first = place(pins, "10.0.0.2")
    second = place(pins, "10.0.1.2")
    assert (first.slot, second.slot) == (0, 1)
    pins.end(first)
    pins.end(second)
    # Each keeps its own slot, so its prompt stays cached there between turns.
    assert place(pins, "10.0.1.2").slot == 1
    assert place(pins, "10.0.0.2").slot == 0


def test_a_sandboxs_own_requests_wait_for_each_other_on_its_slot_as_on_a_desktop():
    pins = SlotPins(clock=Clock())
    first = place(pins, "10.0.0.2")
    assert place(pins, "10.0.0.2").slot == first.slot == 0


def test_of_two_idle_slots_the_one_used_least_recently_is_moved_to():
    pins = SlotPins(clock=Clock())
    a = place(pins, "a", slot_count=3)
    b = place(pins, "b", slot_count=3)
    pins.end(b)
    c = place(pins, "c", slot_count=3)
    assert (a.slot, b.slot, c.slot) == (0, 1, 2)  # slot 2, never used, before slot 1


def test_with_every_slot_busy_a_request_waits_for_the_one_it_asked_for():
    pins = SlotPins(clock=Clock())
    given = [place(pins, f"10.0.{i}.2").slot for i in range(4)]
    assert given == [0, 1, 0, 0]


def test_an_ended_request_frees_its_own_place_not_another_pairs():
    pins = SlotPins(clock=Clock())
    first = place(pins, "10.0.0.2")
    own_again = place(pins, "10.0.0.2")  # waits on slot 0 behind the first
    pins.end(first)
    # slot 0 still holds this sandbox's second request: another sandbox is moved off it.
    assert own_again.slot == 0 and place(pins, "10.0.1.2").slot == 1


def test_a_request_that_pins_no_slot_or_any_slot_is_sent_as_it_came():
    pins = SlotPins(clock=Clock())
    unpinned = {k: v for k, v in GAIA_CHAT.items() if k != SLOT_FIELD}
    for body in (unpinned, {**GAIA_CHAT, SLOT_FIELD: -1}, {**GAIA_CHAT, SLOT_FIELD: "0"},
                 {**GAIA_CHAT, SLOT_FIELD: True}):
        assert pins.apply("10.0.0.2", body, slot_count=2) == (body, None)


def test_an_unknown_slot_count_or_a_slot_the_server_lacks_is_sent_as_it_came():
    assert SlotPins().apply("10.0.0.2", dict(GAIA_CHAT), slot_count=None) == (GAIA_CHAT, None)
    past = {**GAIA_CHAT, SLOT_FIELD: 5}
    assert SlotPins().apply("10.0.0.2", past, slot_count=2) == (past, None)


def test_split_over_servers_a_request_that_pins_no_slot_goes_to_the_idle_one_used_least():
    """`--chat-servers 2`: an unpinned request (GAIA's simulated user) still runs on one server;
    it takes the idle slot used least recently, and a sandbox pinning that slot is then moved
    off it, as off another sandbox's answer."""
    pins = SlotPins(clock=Clock())
    done = place(pins, "10.0.0.2")
    pins.end(done)  # slot 0 used, slot 1 never: the unpinned request goes to slot 1
    unpinned = pins.any_slot(slot_count=2)
    assert unpinned.slot == 1
    sandbox = place(pins, "10.0.1.2")
    assert sandbox.slot == 0
    # Both busy: the slot with the fewest requests on it, then the one used least recently.
    third = pins.any_slot(slot_count=2)
    assert third.slot == 1
    assert pins.any_slot(slot_count=2).slot == 0
    pins.end(unpinned)
    pins.end(third)
    assert pins.any_slot(slot_count=2).slot == 1


def test_a_use_runs_its_release_callbacks_once_when_the_answer_is_over():
    async def scenario() -> list[str]:
        use = await InFlight("m").enter()
        ran: list[str] = []
        use.on_release(lambda: ran.append("slot freed"))
        use.release()
        use.release()
        return ran

    assert asyncio.run(scenario()) == ["slot freed"]
