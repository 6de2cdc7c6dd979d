"""llm-cpu's own front door: every chat request metered per client, read back per client.

The real routes over the instant double (no model), through Starlette's test client; clients
are told apart by their source address, as sandboxes are on their own networks."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from trialbox_llm.catalog import SMOLLM2
from trialbox_llm.double import FIXED_ANSWER_TOKENS
from trialbox_llm.meter import Meter, Timing
from trialbox_llm.routes import build_app
from trialbox_llm.server import ServeOptions, build_state

TOKEN = "k" * 40
CHAT = {"model": SMOLLM2.aliases[0], "messages": [{"role": "user", "content": "two words"}]}


@pytest.fixture
def app(tmp_path: Path) -> Iterator[object]:
    state = build_state(ServeOptions("127.0.0.1", 0, tmp_path, threads=1, double=True,
                                     admin_token=TOKEN))
    application = build_app(state, on_shutdown=state.backend.close)
    yield application
    state.backend.close()


class _Clients:
    """One test client (one event loop, as one server has) whose requests come from the
    address each call names: the ASGI scope's client is set as a sandbox's source would be."""

    def __init__(self, app: Any) -> None:
        async def from_address(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                headers = dict(scope["headers"])
                address = headers.get(b"x-test-source", b"127.0.0.1").decode()
                scope = {**scope, "client": (address, 50000)}
            await app(scope, receive, send)

        self.client = TestClient(from_address)

    def __enter__(self) -> _Clients:
        self.client.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.__exit__(*exc)

    def at(self, address: str) -> _From:
        return _From(self.client, address)


class _From:
    def __init__(self, client: TestClient, address: str) -> None:
        self.client, self.headers = client, {"x-test-source": address}

    def get(self, url: str, **kwargs: Any) -> Any:
        return self.client.get(url, headers={**self.headers, **kwargs.pop("headers", {})},
                               **kwargs)

    def post(self, url: str, **kwargs: Any) -> Any:
        return self.client.post(url, headers=self.headers, **kwargs)

    def stream(self, method: str, url: str, **kwargs: Any) -> Any:
        return self.client.stream(method, url, headers=self.headers, **kwargs)


def test_each_clients_requests_are_its_own(app: object) -> None:
    since = time.time()
    with _Clients(app) as clients:
        one, two = clients.at("10.0.1.2"), clients.at("10.0.2.2")
        one.post("/api/v1/chat/completions", json=CHAT)
        with one.stream("POST", "/api/v1/chat/completions", json={**CHAT, "stream": True}) as r:
            list(r.iter_lines())
        two.post("/v1/chat/completions", json=CHAT)
        mine = one.get("/trialbox/meter", params={"since": since}).json()
        theirs = two.get("/trialbox/meter").json()
    assert mine["client"] == "10.0.1.2" and len(mine["records"]) == 2
    assert [r["streamed"] for r in mine["records"]] == [False, True]
    assert theirs["client"] == "10.0.2.2" and len(theirs["records"]) == 1
    assert theirs["records"][0]["route"] == "/v1/chat/completions"
    for record in mine["records"]:
        assert record["status"] == 200 and record["completion_tokens"] == FIXED_ANSWER_TOKENS
        assert record["prompt_tokens"] == 2 and record["wall_s"] >= record["queue_wait_s"] >= 0
        assert record["self_reported"]["output_tokens"] == FIXED_ANSWER_TOKENS
    # A non-streamed answer has no first token the front door could see: None, never a guess.
    assert mine["records"][0]["time_to_first_token_s"] is None
    assert mine["records"][1]["time_to_first_token_s"] >= 0


def test_another_clients_records_need_the_admin_token(app: object) -> None:
    with _Clients(app) as clients:
        one, runner = clients.at("10.0.1.2"), clients.at("10.0.9.9")
        one.post("/api/v1/chat/completions", json=CHAT)
        refused = runner.get("/trialbox/meter", params={"client": "10.0.1.2"})
        allowed = runner.get("/trialbox/meter", params={"client": "10.0.1.2"},
                             headers={"Authorization": f"Bearer {TOKEN}"})
        bad_since = runner.get("/trialbox/meter", params={"since": "yesterday"})
    assert refused.status_code == 403 and "admin token" in refused.json()["error"]["message"]
    assert allowed.status_code == 200 and len(allowed.json()["records"]) == 1
    assert bad_since.status_code == 400


def test_since_leaves_out_earlier_requests(app: object) -> None:
    with _Clients(app) as clients:
        one = clients.at("10.0.1.2")
        one.post("/api/v1/chat/completions", json=CHAT)
        since = time.time()
        one.post("/api/v1/chat/completions", json=CHAT)
        records = one.get("/trialbox/meter", params={"since": since}).json()["records"]
    assert len(records) == 1


def test_a_refused_request_is_recorded_with_its_status(app: object) -> None:
    with _Clients(app) as clients:
        one = clients.at("10.0.1.2")
        one.post("/api/v1/chat/completions", json={**CHAT, "model": "no-such-model"})
        records = one.get("/trialbox/meter").json()["records"]
    assert [r["status"] for r in records] == [404]


def test_decode_rate_is_tokens_after_the_first_over_first_to_last_token() -> None:
    meter = Meter()
    timing = Timing(meter, "c", "/v1/chat/completions", "m", streamed=True)
    timing.sending()
    timing.line('data: {"choices": [{"delta": {"role": "assistant"}}]}')  # no text: not a token
    assert timing.first_token is None
    timing.line('data: {"choices": [{"delta": {"content": "a"}}]}')
    first = timing.first_token
    assert first is not None
    time.sleep(0.05)
    timing.line('data: {"choices": [{"delta": {"content": "b"}}], '
                '"usage": {"prompt_tokens": 3, "completion_tokens": 11}}')
    record = timing.close(200)
    assert record is not None and timing.close(200) is None  # written once
    assert record.completion_tokens == 11 and record.prompt_tokens == 3
    assert record.decode_s is not None and record.decode_s >= 0.05
    assert record.decode_tokens_per_s == pytest.approx(10 / record.decode_s, rel=1e-3)


def test_embeddings_are_metered_and_left_out_of_turn_speed(app: object) -> None:
    from runner.conversation import turn_performance_from_meter
    from trialbox_llm.catalog import MINILM

    with _Clients(app) as clients:
        one = clients.at("10.0.1.2")
        one.post("/api/v1/embeddings", json={"model": MINILM.aliases[0], "input": ["a b c"]})
        one.post("/api/v1/embeddings", json={"model": MINILM.aliases[0], "input": ["d", "e f", "g"]})
        with one.stream("POST", "/api/v1/chat/completions", json={**CHAT, "stream": True}) as r:
            list(r.iter_lines())
        records = one.get("/trialbox/meter").json()["records"]
    assert [r["route"] for r in records] == ["/api/v1/embeddings"] * 2 + ["/api/v1/chat/completions"]
    assert records[0]["status"] == 200 and records[0]["prompt_tokens"] == 3
    # A document's chunks embedded so far are the inputs these records carried (issue 35).
    assert [r["inputs"] for r in records] == [1, 3, None]
    figures = turn_performance_from_meter(records, wall_s=1.0)
    assert figures.llm_calls == 1 and figures.output_tokens == FIXED_ANSWER_TOKENS
    assert figures.source == "front_door"


def test_a_stream_cut_anywhere_reads_as_the_same_lines() -> None:
    """The front door sees bytes as they come off the socket, cut at any point: the record is
    the one its lines give, usage split across two chunks included."""
    stream = (b'data: {"choices": [{"delta": {"role": "assistant"}}]}\n\n'
              b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n'
              b'data: {"choices": [{"delta": {"content": "b"}}]}\n\n'
              b'data: {"choices": [{"delta": {}, "finish_reason": "stop"}], '
              b'"usage": {"prompt_tokens": 4, "completion_tokens": 7}, '
              b'"timings": {"predicted_n": 7, "predicted_per_second": 30.0}}\n\n'
              b"data: [DONE]\n\n")
    whole = Timing(Meter(), "c", "/v1/chat/completions", "m", streamed=True)
    for line in stream.decode().split("\n"):
        whole.line(line)
    expected = whole.close(200)
    for cut in range(1, len(stream)):
        timing = Timing(Meter(), "c", "/v1/chat/completions", "m", streamed=True)
        timing.chunk(stream[:cut])
        timing.chunk(stream[cut:])
        record = timing.close(200)
        assert record is not None and expected is not None
        assert (record.completion_tokens, record.prompt_tokens) == (7, 4), cut
        assert record.self_reported == expected.self_reported, cut
        assert timing.first_token is not None and timing.last_token is not None, cut


def test_past_the_first_token_a_text_chunk_moves_the_clock_and_nothing_else() -> None:
    timing = Timing(Meter(), "c", "/v1/chat/completions", "m", streamed=True)
    timing.chunk(b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n')
    first = timing.first_token
    time.sleep(0.01)
    timing.chunk(b'data: {"choices": [{"delta": {"content": "b"}}]}\n\n')
    after_text = timing.last_token
    timing.chunk(b'data: {"choices": [{"delta": {}, "finish_reason": "stop"}]}\n\n'
                 b"data: [DONE]\n\n")  # the end, no output: the clock stays at the last text
    assert first is not None and after_text is not None and after_text - first >= 0.01
    assert timing.last_token == after_text and timing.first_token == first
    tool = Timing(Meter(), "c", "/v1/chat/completions", "m", streamed=True)
    tool.chunk(b'data: {"choices": [{"delta": {"tool_calls": [{"index": 0}]}, '
               b'"finish_reason": null}]}\n\n')
    opened = tool.last_token
    time.sleep(0.01)
    tool.chunk(b'data: {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": '
               b'{"arguments": "{}"}}]}, "finish_reason": null}]}\n\n')  # a tool call's next piece
    assert opened is not None and tool.last_token is not None
    assert tool.last_token - opened >= 0.01


@pytest.mark.parametrize(("route", "body", "inputs"), [
    ("/api/v1/embeddings", {"input": "one text"}, 1),
    ("/v1/embeddings", {"input": ["a", "b"]}, 2),
    ("/api/v1/reranking", {"query": "q", "documents": ["a", "b", "c"]}, 3),
    ("/api/v1/embeddings", {"input": 7}, None),  # says no number: none is guessed
    ("/api/v1/chat/completions", {"input": ["a"]}, None),
    ("/api/v1/embeddings", ["not", "a", "body"], None),
])  # fmt: skip
def test_inputs_are_counted_only_where_a_request_carries_them(route: str, body: Any,
                                                              inputs: int | None) -> None:
    from trialbox_llm.meter import inputs_of

    assert inputs_of(route, body) == inputs
