"""Each client its own llama.cpp slot (trialbox_llm.slots): which slot a pinned request is sent
to. That two sandboxes pinning slot 0 then really decode side by side on llama.cpp is shown in
tests/integration/test_llm_server.py."""

from __future__ import annotations

import asyncio

from trialbox_llm.in_flight import InFlight
from trialbox_llm.slots import SLOT_FIELD, SlotPins

GAIA_CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.1,
             "max_tokens": 512, "tools": [{}], SLOT_FIELD: 0}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_one_client_keeps_the_slot_it_pinned_and_everything_else_as_sent():
    pins = SlotPins(clock=Clock())
    for _ in range(3):
        body, slot = pins.apply("10.0.0.2", dict(GAIA_CHAT), slot_count=2)
        assert slot == 0 and body == GAIA_CHAT
        pins.end(slot)


def test_two_clients_pinning_slot_0_are_given_a_slot_each():
    pins = SlotPins(clock=Clock())
    first, slot_a = pins.apply("10.0.0.2", dict(GAIA_CHAT), slot_count=2)
    second, slot_b = pins.apply("10.0.1.2", dict(GAIA_CHAT), slot_count=2)
    assert (slot_a, slot_b) == (0, 1)
    assert (first[SLOT_FIELD], second[SLOT_FIELD]) == (0, 1)
    pins.end(slot_a)
    pins.end(slot_b)
    # Each keeps its own slot, so its prompt stays cached there between turns.
    assert pins.apply("10.0.1.2", dict(GAIA_CHAT), slot_count=2)[1] == 1
    assert pins.apply("10.0.0.2", dict(GAIA_CHAT), slot_count=2)[1] == 0


def test_a_new_client_takes_an_idle_slot_not_the_one_a_long_answer_is_busy_on():
    pins = SlotPins(clock=Clock())
    _, long_answer = pins.apply("10.0.0.2", dict(GAIA_CHAT), slot_count=2)  # stays in flight
    _, short = pins.apply("10.0.1.2", dict(GAIA_CHAT), slot_count=2)
    pins.end(short)  # that sandbox is done; its slot is idle but used more recently
    _, newcomer = pins.apply("10.0.2.2", dict(GAIA_CHAT), slot_count=2)
    assert (long_answer, short, newcomer) == (0, 1, 1)
    # The newcomer took slot 1 over: the client it came from is given a slot anew.
    pins.end(newcomer)
    pins.end(long_answer)
    assert pins.apply("10.0.0.2", dict(GAIA_CHAT), slot_count=2)[1] == 0


def test_when_every_slot_is_idle_the_least_recently_used_one_is_given():
    pins = SlotPins(clock=Clock())
    for client in ("a", "b"):
        pins.end(pins.apply(client, dict(GAIA_CHAT), slot_count=2)[1])
    pins.end(pins.apply("a", dict(GAIA_CHAT), slot_count=2)[1])  # slot 0 used again, later
    assert pins.apply("c", dict(GAIA_CHAT), slot_count=2)[1] == 1


def test_more_clients_than_slots_share_them_and_every_slot_named_exists():
    pins = SlotPins(clock=Clock())
    given = [pins.apply(f"10.0.{i}.2", dict(GAIA_CHAT), slot_count=2)[1] for i in range(5)]
    assert set(given) == {0, 1}


def test_a_request_that_pins_no_slot_or_any_slot_is_sent_as_it_came():
    pins = SlotPins(clock=Clock())
    unpinned = {k: v for k, v in GAIA_CHAT.items() if k != SLOT_FIELD}
    for body in (unpinned, {**GAIA_CHAT, SLOT_FIELD: -1}, {**GAIA_CHAT, SLOT_FIELD: "0"},
                 {**GAIA_CHAT, SLOT_FIELD: True}):
        assert pins.apply("10.0.0.2", body, slot_count=2) == (body, None)


def test_an_unknown_slot_count_leaves_the_pin_as_the_agent_sent_it():
    assert SlotPins().apply("10.0.0.2", dict(GAIA_CHAT), slot_count=None) == (GAIA_CHAT, None)


def test_a_pin_past_the_servers_slots_is_given_one_that_exists():
    body, slot = SlotPins().apply("10.0.0.2", {**GAIA_CHAT, SLOT_FIELD: 5}, slot_count=2)
    assert slot in (0, 1) and body[SLOT_FIELD] == slot


def test_a_use_runs_its_release_callbacks_once_when_the_answer_is_over():
    async def scenario() -> list[str]:
        use = await InFlight("m").enter()
        ran: list[str] = []
        use.on_release(lambda: ran.append("slot freed"))
        use.release()
        use.release()
        return ran

    assert asyncio.run(scenario()) == ["slot freed"]
