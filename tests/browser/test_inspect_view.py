"""`inspect view` over a results root with two runs, opened in headless Chromium (Debian's
`chromium`): the viewer lists both runs, shows a sample's transcript with its tool call and
result, and the failed check's diagnostic. The logs are the ones `RunWriter` writes beside each
scorecard, so this is what a user sees after `trialbox run` and `inspect view --log-dir results/`.

The viewer is a single-page app: the test drives Chromium over its DevTools pipe and reads the
page's text as soon as the viewer has fetched the logs from the loopback server and drawn them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.records.outcomes import CheckResult
from runner.records.transcript import ToolCall, Transcript, TurnPerformance, TurnRecord
from runner.report import RunConfig, RunWriter, scenario_result, trace_of
from runner.system.ports import free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
INSPECT = Path(sys.executable).parent / "inspect"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
CONFIG = RunConfig(agent_model="SmolLM2", served_model="SmolLM2-135M-Instruct Q4_1 by trialbox llm-cpu",
                   device="cpu")


def conversation(scenario_id: str, answer: str) -> Transcript:
    return Transcript(scenario_id=scenario_id, turns=[TurnRecord(
        turn=1, user_message="What did the harbourside visit cost?", answer=answer,
        tool_calls=[ToolCall(name="query_documents", arguments={"query": "harbourside cost"},
                             result_summary="harbourside_brief.md: total 18,400 NOK")],
        performance=TurnPerformance(wall_s=2.0, time_to_first_token_s=0.3, tokens_per_s=40.0),
    )])


def write_run(results: Path, run_id: str, answer: str, passed: bool) -> None:
    writer = RunWriter(results / run_id, run_id=run_id, config=CONFIG)
    transcript = conversation("harbourside_cost", answer)
    check = CheckResult(type="answer_contains", turn=1, passed=passed,
                        diagnostic="" if passed else "answer lacks <18,400> (said 14,800)")
    result = scenario_result(scenario_id="harbourside_cost", category="rag_quality",
                             transcript=transcript, checks=[check])
    writer.add(trace_of(run_id, result, transcript=transcript))
    writer.close()


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One viewer for the module: its server and one browser profile, as a person's browser."""
    tmp_path = tmp_path_factory.mktemp("inspect-view")
    results = tmp_path / "results"
    write_run(results, "run-good", "It cost 18,400 NOK.", passed=True)
    write_run(results, "run-bad", "It cost 14,800 NOK.", passed=False)
    port = free_port()
    server = subprocess.Popen(
        [str(INSPECT), "view", "--log-dir", str(results), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"inspect view did not answer on {url}") from None
                time.sleep(0.3)
        yield url, tmp_path
    finally:
        server.terminate()
        server.wait(timeout=20)


class Browser:
    """Headless Chromium driven over its DevTools pipe (`--remote-debugging-pipe`: JSON
    messages ended by NUL on fds 3 and 4), so a test waits in real time until the single-page
    viewer has fetched and drawn what it looks for — a fixed `--dump-dom` time budget read the
    page while a sample was still loading."""

    def __init__(self, profile: Path) -> None:
        assert CHROMIUM is not None, "Debian chromium is not installed (apt-get install -y chromium)"
        to_chrome, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome = os.pipe()
        os.set_inheritable(to_chrome, True)
        os.set_inheritable(from_chrome, True)

        def on_fds_3_and_4() -> None:
            os.dup2(to_chrome, 3)
            os.dup2(from_chrome, 4)

        self.process = subprocess.Popen(
            [CHROMIUM, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={profile}",
             "about:blank"],
            preexec_fn=on_fds_3_and_4, close_fds=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome)
        os.close(from_chrome)
        self._ids = 0
        self._pending = b""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]

    def call(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> dict[str, Any]:
        self._ids += 1
        message: dict[str, Any] = {"id": self._ids, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        while True:  # events arrive between replies; skip them
            while b"\0" not in self._pending:
                chunk = os.read(self._from_chrome, 1 << 16)
                if not chunk:
                    raise AssertionError("chromium closed its DevTools pipe")
                self._pending += chunk
            raw, self._pending = self._pending.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._ids:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                return dict(reply["result"])

    def text_when(self, url: str, *wanted: str, within_s: float = 60.0) -> str:
        """Open `url` and return the page's visible text (whitespace collapsed) as soon as it
        shows every `wanted` string, or whatever it shows after `within_s`."""
        self.call("Page.navigate", {"url": url}, self.session)
        deadline = time.monotonic() + within_s
        text = ""
        while time.monotonic() < deadline:
            reply = self.call("Runtime.evaluate", {
                "expression": "document.body ? document.body.innerText : ''",
                "returnByValue": True}, self.session)
            text = " ".join(str(reply["result"].get("value", "")).split())
            if all(part in text for part in wanted):
                break
            time.sleep(0.25)
        return text

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)
        os.close(self._to_chrome)
        os.close(self._from_chrome)


@pytest.fixture(scope="module")
def browser(viewer: tuple[str, Path]) -> Iterator[Browser]:
    opened = Browser(viewer[1] / "profile")
    try:
        yield opened
    finally:
        opened.close()


def test_the_viewer_lists_both_runs(viewer: tuple[str, Path], browser: Browser) -> None:
    text = browser.text_when(viewer[0] + "#/logs/", "run-good", "run-bad")
    assert "2 rows" in text and "run-good" in text and "run-bad" in text


def test_a_sample_shows_its_transcript_with_the_tool_call_and_result(
    viewer: tuple[str, Path], browser: Browser
) -> None:
    text = browser.text_when(
        viewer[0] + "#/logs/run-bad/inspect.eval/samples/sample/harbourside_cost/1/messages",
        "harbourside_brief.md",
    )
    assert "What did the harbourside visit cost?" in text
    assert 'query_documents query: "harbourside cost"' in text
    assert "harbourside_brief.md: total 18,400 NOK" in text
    assert "It cost 14,800 NOK." in text
    assert "source: verbatim" in text


def test_the_scoring_tab_shows_the_failed_checks_diagnostic(
    viewer: tuple[str, Path], browser: Browser
) -> None:
    text = browser.text_when(
        viewer[0] + "#/logs/run-bad/inspect.eval/samples/sample/harbourside_cost/1/scoring",
        "answer lacks <18,400>",  # the header shows the check's name before the tab has loaded
    )
    assert "check 1: answer_contains (t1) I answer lacks <18,400> (said 14,800)" in text
