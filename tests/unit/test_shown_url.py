"""A judge's or LLM server's URL is printed without the user name and password put in it
(issue 34): `--judge-url http://user:SECRET@127.0.0.1:9/v1` reached errors, the judge line and
the calibration report with SECRET in them."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from runner.judge import JudgeUnreachable, OpenAIBackend, from_env_and_flags
from runner.judge._ask import StructuredRequest
from runner.judge._calibration import CalibrationReport
from runner.run.errors import EXIT_INFRA, EXIT_USAGE
from runner.system.urls import shown_url

ROOT = Path(__file__).resolve().parents[2]
TRIALBOX = Path(sys.executable).with_name("trialbox")
SECRET = "SECRET-pw-never-printed"
# Port 9 (discard) on loopback: nothing listens, so every request is refused at once.
URL = f"http://user:{SECRET}@127.0.0.1:9/v1"


@pytest.mark.parametrize(("url", "shown"), [
    (URL, "http://***@127.0.0.1:9/v1"),
    ("https://token@judge.example/v1", "https://***@judge.example/v1"),
    ("http://127.0.0.1:13305/api/v1", "http://127.0.0.1:13305/api/v1"),  # nothing to hide
    ("http://u:p@ss/w@rd@host:1/v1", "http://***@host:1/v1"),  # unencoded @ and / in it
    ("http://host/v1?next=a@b", "http://host/v1?next=a@b"),  # an @ in the query is not userinfo
    (f"http://user:{SECRET}@[::1", "http://***@[::1"),  # does not parse: still masked
    (f"user:{SECRET}@127.0.0.1:9", "***@127.0.0.1:9"),  # no scheme
])
def test_the_user_name_and_password_are_hidden(url: str, shown: str) -> None:
    assert shown_url(url) == shown


def test_the_judge_line_and_the_calibration_report_hide_them() -> None:
    choices = from_env_and_flags(env={}, judge="openai", judge_model="judge", judge_url=URL)
    assert SECRET not in " ".join(choices.header_lines())
    report = CalibrationReport(judge_model="judge", judge_server=URL, passed=False, deadline_s=1,
                               elapsed_s=1, failure="1 of 1 examples wrong", results=[])
    assert "at http://***@127.0.0.1:9/v1" in str(report) and SECRET not in str(report)


def test_a_judge_error_names_the_url_without_them() -> None:
    import asyncio

    async def once() -> None:
        backend = OpenAIBackend(URL, "judge", timeout_s=5)
        try:
            await backend.complete(StructuredRequest("S", [{"role": "user", "content": "C"}],
                                                     "claim_labels", {"type": "object"}))
        finally:
            await backend.aclose()

    with pytest.raises(JudgeUnreachable, match="cannot connect") as raised:
        asyncio.run(once())
    assert "http://***@127.0.0.1:9/v1" in str(raised.value) and SECRET not in str(raised.value)


def calibrate(url: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("TRIALBOX_JUDGE", "ANTHROPIC"))}
    return subprocess.run(
        [str(TRIALBOX), "calibrate", "--judge-provider", "openai", "--judge-url", url,
         "--judge-model", "judge"],
        cwd=ROOT, env=clean | {"COLUMNS": "200"}, capture_output=True, text=True, timeout=120)


def test_calibrate_never_prints_them() -> None:
    done = calibrate(URL)  # nothing answers on port 9: the address is wrong, exit 2
    output = done.stdout + done.stderr
    assert done.returncode == EXIT_USAGE, output
    assert "http://***@127.0.0.1:9/v1" in output and SECRET not in output, output


def test_a_url_refused_by_the_cli_is_named_without_them() -> None:
    done = calibrate(f"ftp://user:{SECRET}@127.0.0.1:9/v1")
    output = done.stdout + done.stderr
    assert done.returncode == EXIT_USAGE, output
    assert "--judge-url" in output and SECRET not in output, output


def run_with_judge(url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("TRIALBOX_JUDGE", "ANTHROPIC"))}
    suite = ROOT / "tests" / "fixtures" / "engine_suite"
    return subprocess.run(
        [str(TRIALBOX), "run", str(suite / "scenarios"), "--corpus", str(suite / "corpus"),
         "--backend", "local", "--target-url", "http://127.0.0.1:9", "--judge-provider",
         "openai", "--judge-url", url, "--judge-model", "judge", "--simulator", "scripted",
         "--results", str(tmp_path)],
        cwd=ROOT, env=clean | {"COLUMNS": "200"}, capture_output=True, text=True, timeout=120)


def test_a_run_whose_judge_is_not_there_is_exit_2_without_them(tmp_path: Path) -> None:
    # Nothing listens on port 9 of loopback: the address is the run's configuration (exit 2,
    # README's exit codes), and the password in it is not printed.
    done = run_with_judge(URL, tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == EXIT_USAGE, output
    assert "cannot be reached" in output, output
    assert SECRET not in output and "Traceback" not in output, output


def test_a_run_whose_judge_server_fails_once_reached_is_exit_3_without_them(tmp_path: Path) -> None:
    # A server that answers every request with a body that is no chat reply: reached, it
    # failed — the machine's state, not the run's configuration (exit 3).
    class Garbage(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b"<html>not a judge</html>"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Garbage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://user:{SECRET}@127.0.0.1:{server.server_address[1]}/v1"
        done = run_with_judge(url, tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    output = done.stdout + done.stderr
    assert done.returncode == EXIT_INFRA, output
    assert "judge's server failed during calibration" in output, output
    assert SECRET not in output and "Traceback" not in output, output
