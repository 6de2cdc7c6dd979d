"""The front door switches the server behind it between blocks of `trialbox ab`.

Two Lemonade stand-ins (A and B) and the real door, all real processes on loopback. What is
proven: the switch needs the admin token and a well-formed request; after it, requests reach
the new server only (the old one is stopped and the chat still answers); every meter record
names the side that answered it; a switch while a request is in flight waits, and refuses
(409) when the request outlasts its drain time, so no request is half-measured on two servers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import free_port, wait_live
from test_front_door import STANDIN, TOKEN, _start, _stop

from trialbox_llm.admin import ADMIN_TOKEN_ENV
from trialbox_llm.upstream import UPSTREAM_PATH

ADMIN = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[tuple[str, dict[str, str], dict[str, object]]]:
    """(door origin, {side: stand-in origin}, {side: stand-in process})."""
    processes, origins = {}, {}
    for side in ("A", "B"):
        port = free_port()
        processes[side] = _start([str(STANDIN), str(port)], tmp_path / f"{side}.log")
        origins[side] = f"http://127.0.0.1:{port}"
    door_port = free_port()
    door = _start(["-m", "trialbox_llm.front_door", "--upstream", origins["A"], "--host",
                   "127.0.0.1", "--port", str(door_port)], tmp_path / "door.log",
                  {ADMIN_TOKEN_ENV: TOKEN})
    url = f"http://127.0.0.1:{door_port}"
    try:
        for side in ("A", "B"):
            wait_live(origins[side], processes[side], tmp_path / f"{side}.log", 30)
        wait_live(url, door, tmp_path / "door.log", 30)
        yield url, origins, dict(processes)
    finally:
        for process in [door, *processes.values()]:
            _stop(process)


def _switch(url: str, origin: str, label: str, drain_s: float = 30.0) -> httpx.Response:
    return httpx.post(f"{url}{UPSTREAM_PATH}", headers=ADMIN, timeout=60,
                      json={"upstream": origin, "label": label, "drain_s": drain_s})


def _chat(url: str, plan: str = "tokens=6") -> httpx.Response:
    return httpx.post(f"{url}/api/v1/chat/completions", timeout=60, json={
        "model": "Qwen3-0.6B-GGUF", "stream": True,
        "messages": [{"role": "user", "content": plan}]})


def _labels(url: str, since: float) -> list[str | None]:
    reply = httpx.get(f"{url}/trialbox/meter", params={"client": "127.0.0.1", "since": since},
                      headers=ADMIN)
    return [record["upstream"] for record in reply.json()["records"]]


def test_the_switch_needs_the_token_and_a_well_formed_request(two_servers: tuple) -> None:
    url, origins, _ = two_servers
    refused = httpx.post(f"{url}{UPSTREAM_PATH}", json={"upstream": origins["B"], "label": "B"})
    assert refused.status_code == 403 and "admin token" in refused.json()["error"]["message"]
    malformed = httpx.post(f"{url}{UPSTREAM_PATH}", headers=ADMIN,
                           json={"upstream": "not a url", "label": "B"})
    assert malformed.status_code == 400
    assert "upstream" in malformed.json()["error"]["message"]
    # Neither changed anything: A still answers.
    served = httpx.get(f"{url}{UPSTREAM_PATH}").json()
    assert served["upstream"] == origins["A"] and served["switches"] == 0


def test_after_a_switch_requests_reach_the_new_server_only_and_records_name_it(
    two_servers: tuple,
) -> None:
    url, origins, processes = two_servers
    since = time.time()
    assert _switch(url, origins["A"], "A").json()["label"] == "A"
    assert _chat(url).status_code == 200
    report = _switch(url, origins["B"], "B").json()
    assert (report["upstream"], report["label"], report["switches"]) == (origins["B"], "B", 2)
    _stop(processes["A"])  # A gone: a chat that still answers went to B
    assert _chat(url).status_code == 200
    assert _chat(url).status_code == 200
    assert _labels(url, since) == ["A", "B", "B"]


def test_a_switch_waits_for_the_request_in_flight_and_refuses_past_its_drain_time(
    two_servers: tuple,
) -> None:
    url, origins, _ = two_servers

    async def during_a_slow_answer() -> tuple[int, int, int]:
        async with httpx.AsyncClient(timeout=60) as client:
            slow = asyncio.create_task(client.post(f"{url}/api/v1/chat/completions", json={
                "model": "Qwen3-0.6B-GGUF", "stream": True,
                "messages": [{"role": "user", "content": "delay=0.5 tokens=20 gap=0.1"}]}))
            await asyncio.sleep(0.3)  # the request is at the door
            hurried = await client.post(f"{url}{UPSTREAM_PATH}", headers=ADMIN, json={
                "upstream": origins["B"], "label": "B", "drain_s": 0.2})
            patient = await client.post(f"{url}{UPSTREAM_PATH}", headers=ADMIN, json={
                "upstream": origins["B"], "label": "B", "drain_s": 30})
            answered = await slow
            return hurried.status_code, patient.status_code, answered.status_code

    since = time.time()
    hurried, patient, answered = asyncio.run(during_a_slow_answer())
    assert (hurried, patient, answered) == (409, 200, 200)
    # The slow request was measured whole on the server it began on (A, then unlabelled).
    assert _labels(url, since) == [None]
    assert httpx.get(f"{url}{UPSTREAM_PATH}").json()["in_flight"] == 0
