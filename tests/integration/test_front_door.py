"""The front door in front of a Lemonade stand-in, both real processes on loopback.

What is proven here: the admin gate (state-changing routes refused without the token and never
reaching Lemonade, inference passing), and per-client metering under concurrency (three
clients, three different latencies: each one's records match what it measured itself).
Clients are told apart by source address: each binds its own loopback address (127.0.0.x),
as each sandbox has its own address on its own network.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import ROOT, free_port, wait_live

from runner.conversation import turn_performance_from_meter
from trialbox_llm.admin import ADMIN_TOKEN_ENV

TOKEN = "a" * 40
STANDIN = Path(__file__).with_name("front_door_standin.py")


def _start(args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("w") as sink:
        return subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=sink,
                                stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(front door origin, stand-in origin)."""
    logs = tmp_path_factory.mktemp("front-door")
    standin_port, door_port = free_port(), free_port()
    standin = _start([str(STANDIN), str(standin_port)], logs / "standin.log")
    upstream = f"http://127.0.0.1:{standin_port}"
    front = _start(["-m", "trialbox_llm.front_door", "--upstream", upstream, "--host",
                    "0.0.0.0", "--port", str(door_port), "--chat-slots", "2"], logs / "door.log",
                   {ADMIN_TOKEN_ENV: TOKEN})
    url = f"http://127.0.0.1:{door_port}"
    try:
        wait_live(upstream, standin, logs / "standin.log", 30)
        wait_live(url, front, logs / "door.log", 30)
        yield url, upstream
    finally:
        _stop(front)
        _stop(standin)


def _changes(upstream: str) -> list[str]:
    changes: list[str] = httpx.get(f"{upstream}/standin/changes").json()
    return changes


@pytest.mark.parametrize("route", ["unload", "delete", "params", "pull"])
def test_state_changing_routes_without_the_token_never_reach_lemonade(
    door: tuple[str, str], route: str
) -> None:
    url, upstream = door
    before = _changes(upstream)
    reply = httpx.post(f"{url}/api/v1/{route}", json={"model_name": "Other-Model"})
    if route == "unload":  # answered here, as llm-cpu does: the model stays for the others
        assert reply.status_code == 200 and reply.json()["kept_resident"] is True
    else:
        assert reply.status_code == 403
        assert reply.json()["error"]["code"] == "admin_token_required"
    assert _changes(upstream) == before


def test_a_load_that_would_restart_the_model_needs_the_token(door: tuple[str, str]) -> None:
    url, upstream = door
    before = _changes(upstream)
    refused = httpx.post(f"{url}/api/v1/load", json={"model_name": "Other-Model"})
    assert refused.status_code == 403
    bigger = httpx.post(f"{url}/api/v1/load",
                        json={"model_name": "Qwen3-0.6B-GGUF", "ctx_size": 65536})
    assert bigger.status_code == 403
    assert _changes(upstream) == before
    # GAIA's own load of what already runs changes nothing and needs no token.
    same = httpx.post(f"{url}/api/v1/load", json={"model_name": "Qwen3-0.6B-GGUF"})
    assert same.status_code == 200 and same.json()["started"] is False
    assert _changes(upstream) == before


def test_with_the_token_the_change_goes_through_and_the_token_does_not(
    door: tuple[str, str]
) -> None:
    url, upstream = door
    reply = httpx.post(f"{url}/api/v1/delete", json={"model_name": "Other-Model"},
                       headers={"Authorization": f"Bearer {TOKEN}"})
    assert reply.status_code == 200
    assert _changes(upstream)[-1] == "/api/v1/delete"
    wrong = httpx.post(f"{url}/api/v1/params", json={}, headers={"Authorization": "Bearer " + "b" * 40})
    assert wrong.status_code == 403


def test_inference_and_status_pass(door: tuple[str, str]) -> None:
    url, _ = door
    chat = httpx.post(f"{url}/api/v1/chat/completions",
                      json={"model": "Qwen3-0.6B-GGUF", "messages": [{"role": "user",
                                                                       "content": "tokens=3"}]})
    assert chat.status_code == 200 and chat.json()["usage"]["completion_tokens"] == 3
    assert httpx.get(f"{url}/api/v1/health").json()["model_loaded"] == "Qwen3-0.6B-GGUF"
    assert "amd_igpu" in httpx.get(f"{url}/api/v1/system-info").json()["devices"]


def test_an_embeddings_request_is_recorded_with_its_inputs(door: tuple[str, str]) -> None:
    """How the run line counts a document's chunks while it indexes: the inputs each
    embeddings request carried, read from its body after the answer."""
    url, _ = door
    since = time.time()
    reply = httpx.post(f"{url}/api/v1/embeddings", json={"model": "nomic-embed-text-v2-moe-GGUF",
                                                         "input": ["one", "two", "three"]})
    assert reply.status_code == 200 and len(reply.json()["data"]) == 3
    [record] = [r for r in _meter(url, "127.0.0.1", since) if r["route"] == "/api/v1/embeddings"]
    assert record["inputs"] == 3 and record["model"] == "nomic-embed-text-v2-moe-GGUF"


def test_another_clients_records_need_the_token(door: tuple[str, str]) -> None:
    url, _ = door
    other = httpx.get(f"{url}/trialbox/meter", params={"client": "10.9.9.9"})
    assert other.status_code == 403
    own = httpx.get(f"{url}/trialbox/meter")
    assert own.status_code == 200 and own.json()["client"] == "127.0.0.1"


async def _turn(url: str, address: str, delay: float, gap: float, calls: int,
                base_tokens: int = 10, pin: int | None = None) -> list[tuple[float, float, int]]:
    """`calls` streamed completions from `address` (pinned to slot `pin`, as GAIA pins 0);
    per call (ttft, first-to-last token time, tokens) as the client itself measured them."""
    transport = httpx.AsyncHTTPTransport(local_address=address)
    measured = []
    async with httpx.AsyncClient(transport=transport, timeout=30) as client:
        # Connect first (untimed, before the turn's window), so a call's figures are the model's
        # and not this test client's TCP set-up.
        await client.get(f"{url}/api/v1/health")
        await asyncio.sleep(0.05)
        for call in range(calls):
            tokens = base_tokens + 5 * call
            request = {"model": "Qwen3-0.6B-GGUF", "stream": True, "messages": [
                {"role": "user", "content": f"delay={delay} tokens={tokens} gap={gap}"}],
                **({"id_slot": pin} if pin is not None else {})}
            started = time.perf_counter()
            first: float | None = None
            end = 0.0
            async with client.stream("POST", f"{url}/api/v1/chat/completions",
                                     json=request) as response:
                async for line in response.aiter_lines():
                    if '"content": "x' in line:
                        end = time.perf_counter()
                        first = first or end
            assert first is not None
            measured.append((first - started, end - first, tokens))
    return measured


def _meter(url: str, address: str, since: float) -> list[dict[str, object]]:
    reply = httpx.get(f"{url}/trialbox/meter", params={"client": address, "since": since},
                      headers={"Authorization": f"Bearer {TOKEN}"})
    assert reply.status_code == 200
    records: list[dict[str, object]] = reply.json()["records"]
    return records


def test_each_client_at_concurrency_3_gets_its_own_figures(door: tuple[str, str]) -> None:
    url, _ = door
    # Latencies long beside this shared machine's scheduling jitter (tens of ms under load),
    # which the test client's own clock carries too: 5 % of a second-long figure is the door's.
    plans = {"127.0.0.2": (1.0, 0.08), "127.0.0.3": (2.0, 0.12), "127.0.0.4": (3.0, 0.16)}
    since = time.time()

    async def all_at_once() -> list[list[tuple[float, float, int]]]:
        return await asyncio.gather(*(_turn(url, address, delay, gap, calls=2, base_tokens=30)
                                      for address, (delay, gap) in plans.items()))

    measured = dict(zip(plans, asyncio.run(all_at_once()), strict=True))
    for address, calls in measured.items():
        figures = turn_performance_from_meter(_meter(url, address, since), wall_s=1.0)
        assert figures.source == "front_door" and figures.llm_calls == 2
        own_ttft = calls[0][0]
        own_rate = sum(tokens - 1 for _, _, tokens in calls) / sum(t for _, t, _ in calls)
        assert figures.time_to_first_token_s == pytest.approx(own_ttft, rel=0.05), address
        assert figures.tokens_per_s == pytest.approx(own_rate, rel=0.05), address
        assert figures.output_tokens == sum(tokens for _, _, tokens in calls) == 65
        assert figures.input_tokens == 10  # 5 prompt tokens per call, summed


def test_a_multi_call_turn_at_concurrency_1_sums_all_its_calls(door: tuple[str, str]) -> None:
    url, _ = door
    since = time.time()
    calls = asyncio.run(_turn(url, "127.0.0.5", 0.8, 0.06, calls=3, base_tokens=25))
    figures = turn_performance_from_meter(_meter(url, "127.0.0.5", since), wall_s=2.0)
    assert figures.llm_calls == 3
    assert figures.output_tokens == 25 + 30 + 35
    assert figures.time_to_first_token_s == pytest.approx(calls[0][0], rel=0.05)
    own_rate = sum(tokens - 1 for _, _, tokens in calls) / sum(t for _, t, _ in calls)
    assert figures.tokens_per_s == pytest.approx(own_rate, rel=0.05)


def test_two_clients_pinning_slot_0_at_once_run_on_a_slot_each(door: tuple[str, str]) -> None:
    """With `--chat-slots 2` the door places GAIA's pinned chats as llm-cpu does (slots.py):
    two sandboxes at once get a slot each; one alone keeps the slot it asked for; a chat that
    pins none passes as sent."""
    url, _ = door
    since = time.time()

    async def two_at_once() -> None:
        first = asyncio.create_task(_turn(url, "127.0.0.6", 1.0, 0.01, calls=1, pin=0))
        await asyncio.sleep(0.3)  # the first one's answer holds slot 0 now
        await asyncio.gather(first, _turn(url, "127.0.0.7", 0.2, 0.01, calls=1, pin=0))

    asyncio.run(two_at_once())
    assert [r["slot"] for r in _meter(url, "127.0.0.6", since)] == [0]
    assert [r["slot"] for r in _meter(url, "127.0.0.7", since)] == [1]
    asyncio.run(_turn(url, "127.0.0.8", 0.1, 0.01, calls=2, pin=0))
    assert [r["slot"] for r in _meter(url, "127.0.0.8", since)] == [0, 0]
    asyncio.run(_turn(url, "127.0.0.9", 0.1, 0.01, calls=1))
    assert [r["slot"] for r in _meter(url, "127.0.0.9", since)] == [None]
