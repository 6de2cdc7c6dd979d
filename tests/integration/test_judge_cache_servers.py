"""The judge cache is keyed by server identity: a judge that passed calibration on one server never
lends its answers to another server that serves a model under the same name. The calibration gate
itself is never served from the cache: every run asks it of the live server.

Two real HTTP servers on loopback speak the OpenAI chat API like a judge: an honest one that
labels every calibration example correctly, and a yes-man that calls every claim entailed and
gives every turn top marks. Both report the same model name. The honest one passes calibration;
the yes-man must then fail it, with the same cache folder, however the honest one did.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.judge import JudgeCache, ModelJudge, OpenAIBackend, calibrate, load_calibration
from runner.records.judgments import DIMENSIONS

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

MODEL = "judge-7b-instruct"
EXAMPLES = load_calibration()
CLAIM_TRUTH = {(e.answer, e.claim): e.label.value for e in EXAMPLES.claims}
RUBRIC_BY_SCENARIO = {e.scenario.id: e for e in EXAMPLES.rubric}
ANSWER = re.compile(r"ANSWER:\n<<<\n(.*?)\n>>>\n\nCLAIMS \(name: claim\):\n(.*)\Z", re.DOTALL)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def honest_reply(schema_name: str, case: str) -> dict[str, Any]:
    """What a judge that gets every calibration example right answers."""
    if schema_name == "claim_labels":
        found = ANSWER.search(case)
        assert found is not None, case
        answer, listing = found.groups()
        claims = [line[2:].split(": ", 1) for line in listing.splitlines() if line.startswith("- ")]
        return {"claims": [{"name": name, "label": CLAIM_TRUTH[(answer, text)],
                            "rationale": "Read against the answer."} for name, text in claims]}
    if schema_name == "turn_grades":
        scenario_id = re.match(r"SCENARIO: (\S+)", case)
        assert scenario_id is not None, case
        example = RUBRIC_BY_SCENARIO[scenario_id.group(1)]
        scores = dict.fromkeys(DIMENSIONS, 5.0)
        scores.update({name: (band.min + band.max) / 2 for name, band in example.bands.items()})
        return {**scores, "overall_score": 5.0, "failure_category": "none", "reasoning": "Graded by the rubric."}
    return {"verdict": "PASS", "root_cause": None, "recommended_fix": None}


def yes_man_reply(schema_name: str, case: str) -> dict[str, Any]:
    """A judge that agrees with everything: every claim entailed, every score 10."""
    if schema_name == "claim_labels":
        found = ANSWER.search(case)
        assert found is not None, case
        names = [line[2:].split(": ", 1)[0] for line in found.group(2).splitlines() if line.startswith("- ")]
        return {"claims": [{"name": name, "label": "entailed", "rationale": "Looks right."} for name in names]}
    if schema_name == "turn_grades":
        return {**dict.fromkeys(DIMENSIONS, 10.0), "overall_score": 10.0, "failure_category": "none",
                "reasoning": "Excellent."}
    return {"verdict": "PASS", "root_cause": None, "recommended_fix": None}


class JudgeServer(ThreadingHTTPServer):
    """An OpenAI-compatible server on loopback that answers like a judge (`reply`)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int, reply: Any, meta: dict[str, Any], list_models: bool = True) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.reply = reply
        self.meta = meta
        self.list_models = list_models
        self.chat_requests = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: JudgeServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/v1/models" and self.server.list_models:
            # llama.cpp's shape: `created` is the time of the request, `meta` describes the weights.
            self._json(200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "created": int(time.time()), "owned_by": "llamacpp",
                 "meta": self.server.meta}]})
        else:
            self._json(404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}})

    def do_POST(self) -> None:
        if self.path != "/v1/chat/completions":
            self._json(404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}})
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.chat_requests += 1
        schema_name = body["response_format"]["json_schema"]["name"]
        content = json.dumps(self.server.reply(schema_name, body["messages"][-1]["content"]))
        self._json(200, {
            "id": f"chatcmpl-{self.server.chat_requests}", "object": "chat.completion",
            "created": int(time.time()), "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 850, "completion_tokens": 60, "total_tokens": 910},
        })


WEIGHTS_A = {"vocab_type": 2, "n_vocab": 49152, "n_ctx_train": 8192, "n_embd": 4096,
             "n_params": 7241732096, "size": 4368439296}
WEIGHTS_B = {**WEIGHTS_A, "n_params": 1543714304, "size": 986048768}


@contextmanager
def serving(reply: Any, meta: dict[str, Any], port: int = 0, list_models: bool = True) -> Iterator[JudgeServer]:
    server = JudgeServer(port, reply, meta, list_models)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# Questions one calibration asks: one per claim example, a turn grade and a verdict per rubric one.
QUESTIONS = len(EXAMPLES.claims) + 2 * len(EXAMPLES.rubric)


async def ask_every_example(judge: ModelJudge, concurrency: int = 2) -> None:
    """Ask the judge every calibration question the way a run judges scenarios: through its
    cache (the gate itself never reads the cache, so this is how the cache is exercised)."""
    limit = asyncio.Semaphore(concurrency)

    async def claim(example: Any) -> None:
        async with limit:
            await judge.judge_claims([{"name": "claim", "claim": example.claim}], example.answer, example.reference)

    async def rubric(example: Any) -> None:
        async with limit:
            await judge.judge(example.scenario, example.transcript)

    await asyncio.gather(*(claim(e) for e in EXAMPLES.claims), *(rubric(e) for e in EXAMPLES.rubric))


async def test_a_yes_man_with_the_same_model_name_fails_after_the_honest_server_passed(tmp_path: Path) -> None:
    with serving(honest_reply, WEIGHTS_A) as honest, serving(yes_man_reply, WEIGHTS_A) as yes_man:
        first = JudgeCache(tmp_path)
        report = await calibrate(ModelJudge(OpenAIBackend(honest.url), first), deadline_s=30)
        assert report.passed, str(report)
        assert report.judge_model == f"openai:{MODEL}" and report.judge_server == honest.url
        # The gate is asked live and stores nothing: the next run's gate asks again.
        assert first.stats().hits == first.stats().misses == 0 and honest.chat_requests == QUESTIONS
        await ask_every_example(ModelJudge(OpenAIBackend(honest.url), first))
        assert first.stats().misses == QUESTIONS and honest.chat_requests == 2 * QUESTIONS

        # The same server again: every judging is answered from disk, none reaches it ...
        asked = honest.chat_requests
        again = JudgeCache(tmp_path)
        await ask_every_example(ModelJudge(OpenAIBackend(honest.url), again))
        assert honest.chat_requests == asked and again.stats().hits == QUESTIONS and again.stats().misses == 0
        # ... but the calibration gate is asked live once more, the cache full or not.
        assert (await calibrate(ModelJudge(OpenAIBackend(honest.url), again), deadline_s=30)).passed
        assert honest.chat_requests == asked + QUESTIONS and again.stats().hits == QUESTIONS

        # Same model name, same /models report, another server: nothing from the cache.
        other = JudgeCache(tmp_path)
        await ask_every_example(ModelJudge(OpenAIBackend(yes_man.url), other))
        assert other.stats().hits == 0 and yes_man.chat_requests == QUESTIONS
        verdict = await calibrate(ModelJudge(OpenAIBackend(yes_man.url), other), deadline_s=30)
        assert not verdict.passed
        assert verdict.judge_model == report.judge_model and verdict.judge_server == yes_man.url
        assert "pump_stopped_contradicted: expected contradicted, got entailed" in str(verdict)
        assert f"at {yes_man.url} failed calibration" in str(verdict)


async def test_other_weights_behind_the_same_address_are_another_judge(tmp_path: Path) -> None:
    with serving(honest_reply, WEIGHTS_A) as honest:
        port = honest.server_address[1]
        await ask_every_example(ModelJudge(OpenAIBackend(honest.url), JudgeCache(tmp_path)))
    # The honest server is gone; a yes-man now answers on the very same address and name, but its
    # /models reports different weights.
    with serving(yes_man_reply, WEIGHTS_B, port=port) as yes_man:
        cache = JudgeCache(tmp_path)
        await ask_every_example(ModelJudge(OpenAIBackend(yes_man.url), cache))
        assert cache.stats().hits == 0 and yes_man.chat_requests == QUESTIONS
        assert not (await calibrate(ModelJudge(OpenAIBackend(yes_man.url), cache), deadline_s=30)).passed


async def test_a_server_without_models_route_is_known_by_its_replies_and_its_address(tmp_path: Path) -> None:
    with serving(honest_reply, WEIGHTS_A, list_models=False) as honest, \
            serving(yes_man_reply, WEIGHTS_A, list_models=False) as yes_man:
        first = JudgeCache(tmp_path)
        await ask_every_example(ModelJudge(OpenAIBackend(honest.url, MODEL), first))
        stored = [json.loads(p.read_text()) for p in tmp_path.rglob("*.json")]
        assert stored and all(e["server"] == {"url": honest.url, "model": MODEL, "served_model": MODEL}
                              for e in stored)
        # Until a reply names the model, nothing is read from the cache; after it, the rest is.
        again = JudgeCache(tmp_path)
        await ask_every_example(ModelJudge(OpenAIBackend(honest.url, MODEL), again), concurrency=1)
        assert again.stats().misses == 0 and again.stats().hits == QUESTIONS - 1
        other = JudgeCache(tmp_path)
        await ask_every_example(ModelJudge(OpenAIBackend(yes_man.url, MODEL), other))
        assert other.stats().hits == 0


def test_trialbox_calibrate_asks_the_server_live_every_time_and_fails_the_yes_man(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the default cache folder, isolated
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    runner = CliRunner()
    with serving(honest_reply, WEIGHTS_A) as honest, serving(yes_man_reply, WEIGHTS_A) as yes_man:
        first = runner.invoke(app, ["calibrate", "--judge-url", honest.url])
        assert first.exit_code == 0, first.output
        assert "passed calibration" in first.output and "asked live" in first.output
        second = runner.invoke(app, ["calibrate", "--judge-url", honest.url])
        # The second gate reached the server with every question: none was replayed from disk.
        assert second.exit_code == 0 and honest.chat_requests == 2 * QUESTIONS, second.output
        assert f"{QUESTIONS} question(s) asked live" in second.output, second.output
        third = runner.invoke(app, ["calibrate", "--judge-url", yes_man.url])
        assert third.exit_code == 1, third.output
        assert "failed calibration" in third.output and yes_man.chat_requests == QUESTIONS
