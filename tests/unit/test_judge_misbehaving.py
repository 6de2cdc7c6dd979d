"""A judge server that misbehaves, on loopback: a real HTTP server (the test double sits only at
the judge's edge) that checks the request trialbox sends, then answers badly — 401, 429, 500,
a dropped connection, a bad gzip body, 2 MB of headers, garbage, NaN in `usage`, or nothing.

Each must be one judge error line within a bounded time, never a verdict: `calibrate` against a
judge that refuses our key is exit 3 with one infrastructure line (it once read "failed
calibration: 15 of 15 examples wrong", exit 1), with no asyncio "Task exception was never
retrieved" after it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.judge import JudgeError, JudgeServerError, JudgeUnavailable
from runner.judge._ask import StructuredRequest
from runner.judge._openai import RETRIES, OpenAIBackend
from runner.run.errors import EXIT_INFRA, EXIT_USAGE

ROOT = Path(__file__).resolve().parents[2]
TRIALBOX = Path(sys.executable).with_name("trialbox")
KEY = "sk-loopback-test-key"
MARK = "never-echo-this-body"  # in every bad body: an error line must not quote it


def reply(content: str, usage: Any) -> bytes:
    return json.dumps({"model": "judge", "usage": usage,
                       "choices": [{"message": {"role": "assistant", "content": content}}]},
                      allow_nan=True).encode()


class Judge(BaseHTTPRequestHandler):
    """Answers as `mode` says; records every request it got (path, headers, body)."""

    mode = "ok"
    body = b""  # what mode "body" answers
    seen: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {"Content-Type": "application/json"}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        Judge.seen.append({"path": self.path, "auth": self.headers.get("Authorization"),
                           "body": body})
        mode = Judge.mode
        if self.path.endswith("/models"):
            self._answer(200, json.dumps({"data": [{"id": "judge"}]}).encode())
        elif mode in ("401", "403", "429", "500"):
            self._answer(int(mode), f'{{"error": "{MARK}"}}'.encode())
        elif mode == "500-once":
            Judge.mode = "ok"
            self._answer(500, b"{}")
        elif mode == "disconnect":
            self.close_connection = True
            self.connection.shutdown(2)
        elif mode == "bad-gzip":
            self._answer(200, MARK.encode(), {"Content-Type": "application/json",
                                               "Content-Encoding": "gzip"})
        elif mode == "huge-headers":
            self._answer(200, b"{}", {f"X-Pad-{i}": "p" * 1000 for i in range(2000)})
        elif mode == "garbage":
            self._answer(200, f"<html>{MARK}</html>".encode())
        elif mode == "nan-usage":
            self._answer(200, reply('{"label": "entailed"}', {"prompt_tokens": float("nan")}))
        elif mode == "fractional-usage":
            self._answer(200, reply('{"label": "entailed"}', {"prompt_tokens": 2.5}))
        elif mode == "text-usage":
            self._answer(200, reply('{"label": "entailed"}', {"prompt_tokens": MARK}))
        elif mode == "trickle":  # a byte at a time, each well within httpx's per-read timeout
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            for _ in range(1000):
                try:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                except OSError:  # the client gave up: what the test wants
                    return
                time.sleep(0.2)
        elif mode == "silent":
            time.sleep(30)
        elif mode == "body":
            self._answer(200, Judge.body)
        else:
            self._answer(200, reply('{"label": "entailed"}', {"prompt_tokens": 5,
                                                               "completion_tokens": 2}))

    do_GET = do_POST = _handle


@pytest.fixture()
def judge_url() -> Iterator[str]:
    Judge.mode, Judge.seen = "ok", []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Judge)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


REQUEST = StructuredRequest("RUBRIC", [{"role": "user", "content": "CASE"}], "claim_labels",
                            {"type": "object"})


def ask(url: str, timeout_s: float = 5.0) -> Any:
    async def once() -> Any:
        backend = OpenAIBackend(url, "judge", timeout_s=timeout_s)
        try:
            return await backend.complete(REQUEST)
        finally:
            await backend.aclose()
    return asyncio.run(once())


def test_a_well_behaved_judge_gets_the_request_we_mean(judge_url: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # Null case, and the check on what we send: the route, the key as a bearer token, the body.
    monkeypatch.setenv("TRIALBOX_JUDGE_API_KEY", KEY)
    answer = ask(judge_url)
    assert answer.usage.input_tokens == 5 and answer.usage.output_tokens == 2
    [sent] = [r for r in Judge.seen if r["path"] == "/v1/chat/completions"]
    assert sent["auth"] == f"Bearer {KEY}"
    assert sent["body"]["model"] == "judge" and sent["body"]["stream"] is False
    assert sent["body"]["response_format"]["type"] == "json_schema"


@pytest.mark.parametrize("mode", ["disconnect", "bad-gzip", "huge-headers", "garbage",
                                  "nan-usage", "fractional-usage", "text-usage"])
def test_a_malformed_reply_is_one_judge_error_line(judge_url: str, mode: str) -> None:
    Judge.mode = mode
    started = time.monotonic()
    with pytest.raises(JudgeError) as raised:
        ask(judge_url)
    assert not isinstance(raised.value, JudgeUnavailable)
    message = str(raised.value)
    assert "\n" not in message and MARK not in message, message
    assert time.monotonic() - started < 10


def test_a_judge_that_never_answers_is_an_error_at_its_timeout(judge_url: str) -> None:
    Judge.mode = "silent"
    started = time.monotonic()
    with pytest.raises(JudgeError, match="did not answer in time"):
        ask(judge_url, timeout_s=1.0)
    assert time.monotonic() - started < 5


def test_a_judge_that_trickles_its_reply_is_an_error_at_its_timeout(judge_url: str) -> None:
    # Each byte comes 0.2 s after the last, so no single read ever times out: only a deadline
    # on the whole request ends it (it took 200 s, the whole body, before).
    Judge.mode = "trickle"
    started = time.monotonic()
    with pytest.raises(JudgeServerError, match="whole reply within 1s") as raised:
        ask(judge_url, timeout_s=1.0)
    assert "\n" not in str(raised.value)
    assert time.monotonic() - started < 4


def test_the_anthropic_judge_that_trickles_its_reply_is_an_error_at_its_timeout(
        judge_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.judge import AnthropicBackend

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", judge_url.removesuffix("/v1"))
    Judge.mode = "trickle"

    async def once() -> None:
        backend = AnthropicBackend(max_retries=0, timeout_s=1.0)
        with pytest.raises(JudgeServerError, match="no whole reply within 1s"):
            await backend.complete(REQUEST)

    started = time.monotonic()
    asyncio.run(once())
    assert time.monotonic() - started < 4


@pytest.mark.parametrize("status", ["401", "403"])
def test_a_refused_key_is_unavailable_at_once(judge_url: str, status: str) -> None:
    Judge.mode = status
    with pytest.raises(JudgeUnavailable, match=f"HTTP {status}") as raised:
        ask(judge_url)
    assert MARK not in str(raised.value)
    assert len([r for r in Judge.seen if r["path"].endswith("/completions")]) == 1  # no retry


def test_rate_limits_are_retried_with_backoff_then_unavailable(judge_url: str) -> None:
    Judge.mode = "429"
    with pytest.raises(JudgeUnavailable, match=f"after {RETRIES} retries"):
        ask(judge_url)
    assert len([r for r in Judge.seen if r["path"].endswith("/completions")]) == RETRIES + 1


def test_a_short_outage_is_ridden_out(judge_url: str) -> None:
    Judge.mode = "500-once"
    assert ask(judge_url).usage.input_tokens == 5
    assert len([r for r in Judge.seen if r["path"].endswith("/completions")]) == 2


def calibrate(judge_url: str, *extra: str, env: dict[str, str] | None = None
              ) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("TRIALBOX_JUDGE", "ANTHROPIC"))}
    return subprocess.run(
        [str(TRIALBOX), "calibrate", "--judge-provider", "openai", "--judge-url", judge_url,
         "--judge-model", "judge", *extra],
        cwd=ROOT, env=clean | {"COLUMNS": "200"} | (env or {}), capture_output=True, text=True,
        timeout=120)


@pytest.mark.parametrize("status", ["401", "500"])
def test_calibrate_against_an_unavailable_judge_is_exit_3_and_one_line(judge_url: str,
                                                                       status: str) -> None:
    Judge.mode = status
    done = calibrate(judge_url, env={"TRIALBOX_JUDGE_API_KEY": KEY})
    output = done.stdout + done.stderr
    assert done.returncode == EXIT_INFRA, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"HTTP {status}" in errors[0], output
    assert "examples wrong" not in output and "Traceback" not in output, output
    assert "Task exception was never retrieved" not in output, output
    assert KEY not in output and MARK not in output, output


@pytest.mark.parametrize("mode", ["disconnect", "garbage", "nan-usage", "fractional-usage"])
def test_calibrate_against_a_broken_judge_is_exit_3_and_one_line_naming_it(
        judge_url: str, mode: str) -> None:
    # No model answer came back, so nothing says how well it judges: not "15 of 15 wrong".
    Judge.mode = mode
    done = calibrate(judge_url)
    output = done.stdout + done.stderr
    assert done.returncode == EXIT_INFRA, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "calibration could not run: openai judge" in errors[0], output
    assert "examples wrong" not in output and "Traceback" not in output, output
    assert "Task exception was never retrieved" not in output, output
    assert MARK not in output, output
    # Stopped at once: the two examples in flight, not all fifteen.
    assert len([r for r in Judge.seen if r["path"].endswith("/completions")]) <= 2


def test_a_key_with_a_line_break_is_refused_by_name_and_never_printed(judge_url: str) -> None:
    done = calibrate(judge_url, env={"TRIALBOX_JUDGE_API_KEY": KEY + "\r\n"})
    output = done.stdout + done.stderr
    assert done.returncode == EXIT_USAGE, output
    assert "TRIALBOX_JUDGE_API_KEY holds a line break" in output, output
    assert KEY not in output and "Traceback" not in output, output
    assert Judge.seen == []  # refused before any request


def test_an_endless_deadline_is_refused(judge_url: str) -> None:
    done = calibrate(judge_url, "--deadline", "1e30")
    assert done.returncode == EXIT_USAGE and "--deadline" in done.stdout + done.stderr


def test_a_judge_refusing_mid_run_stops_the_run_and_keeps_the_conversation(
        judge_url: str, tmp_path: Path) -> None:
    # The real openai judge over the loopback server, inside the real engine: the first
    # scenario's judging meets 401, so its conversation is kept unjudged (rescore judges it
    # later, its note says why), no further scenario starts, and the run's exit code is 3.
    from test_engine import Conversations, make_engine, statuses

    from runner.judge import JudgeCache, JudgeConfig, make_judge
    from runner.records.status import Status
    from runner.report import read_trace
    from runner.run.gate import exit_code

    Judge.mode = "401"
    judge = make_judge(JudgeConfig(provider="openai", url=judge_url, model="judge"),
                       JudgeCache(tmp_path / "cache"))
    engine = make_engine(tmp_path, Conversations(), judge)  # type: ignore[arg-type]
    card = asyncio.run(engine.run())
    by_key = statuses(card)
    first = card.scenarios[0]
    assert first.status is Status.NOT_JUDGED, by_key
    assert any(note.startswith("judge unavailable: openai judge: HTTP 401") for note in first.notes)
    assert set(by_key.values()) - {Status.NOT_JUDGED} == {Status.NOT_RUN}, by_key
    assert exit_code(card, None) == EXIT_INFRA
    trace = read_trace(engine.settings.run_dir / str(first.trace))
    assert trace.transcript is not None and trace.transcript.turns  # the conversation is kept
    assert len([r for r in Judge.seen if r["path"].endswith("/completions")]) == 1
    # The summary's head counts the rows the outage left unjudged, and says what judges them.
    assert first.judge_unavailable and card.summary.judge_unavailable == 1
    summary = (engine.settings.run_dir / "summary.md").read_text()
    assert "- **⚠️ Judge unavailable:** 1 scenario(s) kept unjudged" in summary


def test_the_anthropic_judge_refused_its_key_is_unavailable(
        judge_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # ANTHROPIC_BASE_URL may point at any proxy: the loopback judge answers 401 to /v1/messages.
    from runner.judge import AnthropicBackend

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", judge_url.removesuffix("/v1"))
    Judge.mode = "401"

    async def once() -> None:
        backend = AnthropicBackend(max_retries=0)
        with pytest.raises(JudgeUnavailable, match="HTTP 401") as raised:
            await backend.complete(REQUEST)
        assert MARK not in str(raised.value) and KEY not in str(raised.value)

    asyncio.run(once())
    [sent] = [r for r in Judge.seen if r["path"].endswith("/messages")]
    assert sent["body"]["messages"] == [{"role": "user", "content": "CASE"}]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                max_size=4),
    max_leaves=12)


@st.composite
def judge_replies(draw: st.DrawFn) -> bytes:
    """A chat completion reply with one part replaced by any JSON value (NaN and infinities
    included), or cut short."""
    reply_ = {"model": "judge", "usage": {"prompt_tokens": 5, "completion_tokens": 2},
              "choices": [{"message": {"role": "assistant", "content": '{"label": "entailed"}'}}]}
    where = draw(st.sampled_from([("model",), ("usage",), ("usage", "prompt_tokens"),
                                  ("usage", "completion_tokens"), ("choices",), ("choices", 0),
                                  ("choices", 0, "message"), ("choices", 0, "message", "content")]))
    node: Any = reply_
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = draw(JSON_VALUES)
    text = json.dumps(reply_, allow_nan=True).encode()
    return text[:draw(st.integers(0, len(text)))] if draw(st.booleans()) else text


@settings(max_examples=40, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=judge_replies())
def test_any_reply_is_a_reply_or_one_judge_error(judge_url: str, body: bytes) -> None:
    Judge.mode, Judge.body = "body", body
    try:
        answer = ask(judge_url)
    except JudgeError as error:
        assert "\n" not in str(error)
    else:  # accepted: its figures are real token counts and its text is text
        assert isinstance(answer.text, str)
        assert answer.usage.input_tokens >= 0 and answer.usage.output_tokens >= 0
