"""A judge that refuses our key in the middle of a run, then recovers: issue 34's Done-when.

"A loopback judge that answers 401 after the second scenario: the run stops with exit 3, all
transcripts kept; after the judge recovers, `rescore` completes the run."

Everything is real except the conversations: `trialbox run`'s own path from settings to exit
code (`runner.cli.run.execute`: calibration, the engine, the summary, the gate) with the
scripted conversation source of test_engine.py in place of sandboxes (no Docker), the real
openai judge over HTTP to a loopback judge server this test starts, and then `trialbox rescore`
as a process against the same server. The server is the only double, at the judge's edge: it
checks every request trialbox sends (model, a system rubric, a non-empty case, the schema it
asks for, our key), answers calibration and the first two scenarios' judgments the way the
judge code validates them (GAIA's seven rubric dimensions, a verdict, claim labels), then
answers 401 to everything until the test says it has recovered. An LLM server stand-in on
another loopback port answers the health and identity questions a run asks of its LLM server.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from test_engine import Conversations, scenarios

import runner.run.launch as launch
from runner.cli.run import execute
from runner.judge import load_calibration
from runner.records.judgments import DIMENSIONS
from runner.records.status import Status
from runner.report import read_scorecard, read_trace
from runner.run.errors import EXIT_INFRA, EXIT_OK
from runner.run.settings import Backend, RunSettings, new_run_id

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "fixtures" / "engine_suite"
TRIALBOX = Path(sys.executable).with_name("trialbox")
KEY = "sk-loopback-outage-key"
MODEL = "judge"
SCHEMAS = {"turn_grades", "scenario_verdict", "claim_labels"}


@dataclass
class JudgeState:
    """What the loopback judge does and what it was asked."""

    refuse_after: int | None = None  # answer 401 to everything once this many suite verdicts went out
    refusing: bool = False
    suite_ids: set[str] = field(default_factory=set)
    verdicts: list[str] = field(default_factory=list)  # suite scenario ids whose verdict was answered
    asked: list[tuple[str, str | None, bool]] = field(default_factory=list)  # (schema, scenario id, refused)
    problems: list[str] = field(default_factory=list)  # requests that were not what we mean to send
    claim_labels: dict[tuple[str, str], str] = field(default_factory=dict)
    rubric_scores: dict[str, dict[str, float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    state: JudgeState


def calibration_answers(state: JudgeState) -> None:
    """The right answer to every calibration example: its label, or scores inside its bands."""
    examples = load_calibration()
    for claim in examples.claims:
        state.claim_labels[(claim.answer.strip(), claim.claim.strip())] = claim.label.value
    for rubric in examples.rubric:
        scores = {name: 5.0 for name in DIMENSIONS}
        scores.update({name: (band.min + band.max) / 2 for name, band in rubric.bands.items()})
        state.rubric_scores[rubric.scenario.id] = scores


def scenario_id(case: str) -> str | None:
    found = re.match(r"SCENARIO: (\S+)", case)
    return found.group(1) if found else None


class JudgeHandler(BaseHTTPRequestHandler):
    """An OpenAI-compatible judge at /v1: /models and /chat/completions with json_schema replies."""

    server: Server

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _answer(self, status: int, payload: Any) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 — http.server's name
        state = self.server.state
        if state.refusing:
            self._answer(401, {"error": {"message": "invalid api key"}})
        elif self.path == "/v1/models":
            self._answer(200, {"object": "list", "data": [{"id": MODEL, "owned_by": "loopback"}]})
        else:
            self._answer(404, {"error": "no such route"})

    def do_POST(self) -> None:  # noqa: N802 — http.server's name
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else {}
        with state.lock:
            schema, case = self._check(state, body)
            refused = state.refusing
            state.asked.append((schema, scenario_id(case), refused))
            if refused:
                self._answer(401, {"error": {"message": "invalid api key"}})
                return
            content = self._grade(state, schema, case)
        self._answer(200, {"model": MODEL, "object": "chat.completion",
                           "usage": {"prompt_tokens": len(case) // 4, "completion_tokens": 40},
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": json.dumps(content)}}]})

    def _check(self, state: JudgeState, body: Any) -> tuple[str, str]:
        """The request trialbox sends: our model and key, a system rubric and a non-empty case,
        asking for one of the judge's schemas. What is wrong is noted; the test asserts none."""
        problems = []
        if self.path != "/v1/chat/completions":
            problems.append(f"POST to {self.path}")
        if self.headers.get("Authorization") != f"Bearer {KEY}":
            problems.append("no bearer key")
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(body, dict) or body.get("model") != MODEL or body.get("stream") is not False:
            problems.append(f"model/stream: {body.get('model') if isinstance(body, dict) else body!r}")
        if not isinstance(messages, list) or len(messages) < 2:
            problems.append("messages: fewer than a system rubric and a case")
            messages = [{}, {}]
        system, case = messages[0], messages[-1]
        if system.get("role") != "system" or not str(system.get("content") or "").strip():
            problems.append("messages[0]: no system rubric")
        if case.get("role") != "user" or not str(case.get("content") or "").strip():
            problems.append("messages[-1]: no case to judge")
        response_format = body.get("response_format") or {} if isinstance(body, dict) else {}
        schema = str((response_format.get("json_schema") or {}).get("name"))
        if response_format.get("type") != "json_schema" or schema not in SCHEMAS:
            problems.append(f"response_format: {schema}")
        state.problems.extend(problems)
        return schema, str(case.get("content") or "")

    def _grade(self, state: JudgeState, schema: str, case: str) -> dict[str, Any]:
        """A reply in the shape runner/judge/_replies.py validates: right for calibration, a pass
        for the suite's scenarios."""
        scenario = scenario_id(case)
        if schema == "turn_grades":
            scores = state.rubric_scores.get(scenario or "", dict.fromkeys(DIMENSIONS, 8.0))
            if scenario not in state.rubric_scores and scenario not in state.suite_ids:
                state.problems.append(f"turn_grades for an unknown scenario {scenario}")
            return {**scores, "overall_score": sum(scores.values()) / len(scores),
                    "failure_category": "none", "reasoning": "loopback judge: graded by its bands"}
        if schema == "scenario_verdict":
            if scenario in state.suite_ids:
                state.verdicts.append(scenario)
                if state.refuse_after is not None and len(state.verdicts) >= state.refuse_after:
                    state.refusing = True  # the next request meets a refused key
            return {"verdict": "PASS", "root_cause": None, "recommended_fix": None}
        answer = re.search(r"ANSWER:\n<<<\n(.*?)\n>>>", case, re.S)
        claims = re.findall(r"^- ([^:\n]+): (.*)$", case.split("CLAIMS (name: claim):", 1)[-1], re.M)
        labels = []
        for name, claim in claims:
            label = state.claim_labels.get(((answer.group(1) if answer else "").strip(), claim.strip()))
            if label is None:
                state.problems.append(f"claim_labels for an unknown claim {claim!r}")
            labels.append({"name": name, "label": label or "entailed", "rationale": "loopback judge"})
        return {"claims": labels}


class LlmHandler(BaseHTTPRequestHandler):
    """The LLM server's health and identity routes, as a run asks them (no model behind it)."""

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 — http.server's name
        replies: dict[str, Any] = {"/api/v1/health": {"status": "ok", "model_loaded": "stand-in"},
                                   "/api/v1/models": {"data": []}, "/api/v1/system-info": {}}
        found = self.path in replies
        body = json.dumps(replies.get(self.path, {"error": "no such route"})).encode()
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serving(handler: type[BaseHTTPRequestHandler], state: JudgeState) -> Iterator[str]:
    server = Server(("127.0.0.1", 0), handler)
    server.state = state
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture()
def judge() -> Iterator[tuple[str, JudgeState]]:
    state = JudgeState()
    calibration_answers(state)
    for origin in serving(JudgeHandler, state):
        yield f"{origin}/v1", state


@pytest.fixture()
def llm_origin() -> Iterator[str]:
    yield from serving(LlmHandler, JudgeState())


def test_a_judge_refusing_after_the_second_scenario_stops_the_run_and_rescore_completes_it(
        judge: tuple[str, JudgeState], llm_origin: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    judge_url, state = judge
    for name in list(os.environ):
        if name.startswith(("TRIALBOX_JUDGE", "TRIALBOX_SIMULATOR", "ANTHROPIC")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TRIALBOX_JUDGE_API_KEY", KEY)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the judge cache, ours alone
    source = Conversations()  # every scenario's conversation, whole, without a sandbox
    monkeypatch.setattr(launch, "LiveConversations", lambda *args, **kwargs: source)
    settings = RunSettings(
        run_id=new_run_id(), suite_paths=[SUITE / "scenarios"], corpus_root=SUITE / "corpus",
        results_root=tmp_path / "results", backend=Backend.LOCAL, device="cpu", llm_url=llm_origin,
        concurrency=1, judge_provider="openai", judge_url=judge_url, judge_model=MODEL,
        simulator_mode="scripted")
    state.suite_ids = {scenario.id for scenario in scenarios()}
    state.refuse_after = 2
    started = time.monotonic()

    # The run: calibration passes, two scenarios are judged, the third meets 401 and stops it.
    code = execute(settings)
    run_s = time.monotonic() - started
    captured = capsys.readouterr()
    output = captured.out + captured.err
    run_dir = settings.run_dir
    assert code == EXIT_INFRA, output
    # Said once as it happens (the summary printed after it quotes it among its warnings, "> ").
    stops = [line for line in output.splitlines()
             if "the judge is unavailable" in line and not line.startswith("> ")]
    assert len(stops) == 1 and "HTTP 401" in stops[0], output
    assert f"trialbox rescore {run_dir}" in stops[0], stops
    assert "Traceback" not in output and "Task exception was never retrieved" not in output, output
    assert KEY not in output, output
    assert len(source.started) == 3 and state.verdicts == source.started[:2], (source.started, state.verdicts)
    # Refused once and never asked again: 401 is not retried, and nothing further was judged.
    refused = [asked for asked in state.asked if asked[2]]
    assert len(refused) == 1 and refused[0][1] == source.started[2], state.asked
    assert state.asked[-1] == refused[0]

    card = read_scorecard(run_dir / "scorecard.json")
    rows = {row.id: row for row in card.scenarios}
    first, second, third = (rows[key] for key in source.started)
    assert first.status is Status.PASS and second.status is Status.PASS, output
    assert third.status is Status.NOT_JUDGED and third.judge_unavailable, third
    assert any(note.startswith("judge unavailable: openai judge: HTTP 401") for note in third.notes)
    assert not first.judge_unavailable and not second.judge_unavailable
    for row in card.scenarios:  # every finished conversation is kept, whole
        trace = read_trace(run_dir / str(row.trace))
        assert trace.transcript is not None and len(trace.transcript.turns) >= 2, row.id
    assert card.summary.judge_unavailable == 1
    summary = (run_dir / "summary.md").read_text(encoding="utf-8")
    assert "- **⚠️ Judge unavailable:** 1 scenario(s) kept unjudged" in summary

    # The judge recovers; `trialbox rescore RUN` with the same judge flags completes the run.
    state.refusing, state.refuse_after = False, None
    asked_before = len(state.asked)
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("TRIALBOX_JUDGE", "TRIALBOX_SIMULATOR", "ANTHROPIC"))}
    started = time.monotonic()
    done = subprocess.run(
        [str(TRIALBOX), "rescore", str(run_dir), "--judge-provider", "openai",
         "--judge-url", judge_url, "--judge-model", MODEL],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
        env=environment | {"TRIALBOX_JUDGE_API_KEY": KEY, "XDG_CACHE_HOME": str(tmp_path / "cache"),
                           "COLUMNS": "200"})
    rescore_s = time.monotonic() - started
    output = done.stdout + done.stderr
    assert done.returncode == EXIT_OK, output
    assert "Traceback" not in output and KEY not in output, output
    [rescored] = [folder for folder in run_dir.parent.iterdir() if folder != run_dir]
    again = read_scorecard(rescored / "scorecard.json")
    assert {row.id for row in again.scenarios} == set(source.started)
    assert all(row.status is Status.PASS and not row.judge_unavailable for row in again.scenarios), \
        [(row.id, row.status, row.notes) for row in again.scenarios]
    assert again.summary.judged == 3 and again.summary.judge_unavailable == 0
    assert "Judge unavailable" not in (rescored / "summary.md").read_text(encoding="utf-8")
    # The scenario the outage left unjudged was judged by the recovered server, live (the two
    # judged before may come from the judge cache), and every request was one we mean to send.
    later = state.asked[asked_before:]
    assert ("scenario_verdict", source.started[2], False) in later, later
    assert not any(refused for _, _, refused in later)
    assert state.problems == [], state.problems[:5]
    print(f"run {run_s:.1f} s, rescore {rescore_s:.1f} s")
