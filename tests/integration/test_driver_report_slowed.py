"""The driver-build report on two real runs with a known speed difference and a planted quality
difference, and on an identical pair.

Speed (real): run A is the engine fixture suite (tests/fixtures/engine_suite) with the local
backend against the shared llm-cpu server; run B is the same suite through `SlowProxy`, a small
HTTP proxy that forwards every request to that server and sleeps a fixed delay before each chat
completion — what a slower driver build looks like to the agent. Both run `--trials 3`. The
suite has 3 scenarios: too few for a result over scenarios (the report needs 6), and 3 trials
a side are too few for one scenario's exact permutation test (its smallest p is 0.1), so the
report must say "too few samples" with its n, not call the slower build — while the planted
quality loss, 9 paired trials, is found. (With --trials 5 the live run found 2 of the 3
scenarios slower and, from the machine's load between the two runs, indexing "slower" too: the
run-to-run noise the report's notes warn of; it also cost ~5 more minutes of CI.)

Quality (planted): without a judge the runs' statuses are NOT_JUDGED or checks-decided FAILs, and
a model this small cannot be made to answer worse on purpose, so the quality difference is
planted by adjusting statuses in copies of the two scorecards: every row of A becomes a judged
PASS (score 8), and the first 8 of B's 9 rows a judged FAIL (score 4), the rest PASS (7 of 9,
McNemar p 2/128, no longer passes Benjamini–Hochberg at the report's headline level 0.035 over
the 3 outcomes these runs can test: the report keeps some of alpha for its scenario screen). Turns,
speeds and traces stay exactly as the runs recorded them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from test_engine_local import _env, only_run, trialbox

from runner.records.status import Status
from runner.report import (
    Change,
    Scorecard,
    driver_report,
    read_any_scorecard,
    read_traces,
    render_driver_md,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DELAY_S = 3.0  # added before every chat completion: above the turns' own spread, cheap in CI
TRIALS = 3
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host",
              "proxy-connection", "te", "trailer", "upgrade"}


class SlowProxy:
    """A real HTTP proxy on a loopback port: forwards everything to `upstream`, streaming the
    reply through as it arrives, after sleeping `delay_s` on chat completions (the one request
    whose speed a driver build changes; health and model listings stay fast)."""

    def __init__(self, upstream: str, delay_s: float) -> None:
        self.upstream = upstream.rstrip("/")
        self.delay_s = delay_s
        self.delayed = 0  # chat completions that were slowed: proof the agent came through here
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> SlowProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _count(self) -> None:
        with self._lock:
            self.delayed += 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.0: the reply ends when the connection closes, so a streamed (SSE) body can
            # be passed through chunk by chunk without re-framing it.
            protocol_version = "HTTP/1.0"

            def log_message(self, *args: object) -> None:  # keep pytest's output clean
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if self.command == "POST" and self.path.rstrip("/").endswith("chat/completions"):
                    time.sleep(proxy.delay_s)
                    proxy._count()
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                with httpx.Client(timeout=None) as client, client.stream(
                    self.command, proxy.upstream + self.path, content=body, headers=headers
                ) as reply:
                    self.send_response(reply.status_code)
                    for key, value in reply.headers.items():
                        if key.lower() not in HOP_BY_HOP and key.lower() != "content-encoding":
                            self.send_header(key, value)
                    self.end_headers()
                    for chunk in reply.iter_bytes():
                        self.wfile.write(chunk)
                        self.wfile.flush()

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward

        return Handler


def run_suite(results: Path, llm_url: str) -> Path:
    done = subprocess.run(
        trialbox(results, llm_url, "--trials", str(TRIALS)),
        cwd=ROOT, capture_output=True, text=True, timeout=2400, env=_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return only_run(results)


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory, llm_url: str, gaia_python: Path
) -> Iterator[tuple[Path, Path, int]]:
    """(run A direct, run B through the slow proxy, chat completions the proxy slowed)."""
    direct = run_suite(tmp_path_factory.mktemp("direct"), llm_url)
    with SlowProxy(llm_url, DELAY_S) as proxy:
        slowed = run_suite(tmp_path_factory.mktemp("slowed"), proxy.url)
        delayed = proxy.delayed
    yield direct, slowed, delayed


def plant_quality(run: Path, dest: Path, failing: int) -> Path:
    """A copy of a run folder whose first `failing` rows are judged FAILs and the rest PASSes."""
    shutil.copytree(run, dest)
    card = json.loads((dest / "scorecard.json").read_text())
    for index, row in enumerate(card["scenarios"]):
        fail = index < failing
        row.update(status="FAIL" if fail else "PASS", score=4.0 if fail else 8.0,
                   decided_by="judge")
    (dest / "scorecard.json").write_text(json.dumps(card))
    return dest


def statuses(card: Scorecard) -> list[Status]:
    return [r.status for r in card.scenarios]


def test_the_proxy_slowed_every_chat_completion_of_run_b(runs: tuple[Path, Path, int]) -> None:
    direct, slowed, delayed = runs
    card = read_any_scorecard(slowed)
    turns = sum(len(r.turns) for r in card.scenarios)
    assert len(card.scenarios) == 3 * TRIALS and turns >= 3 * TRIALS
    assert delayed >= turns, f"{delayed} delayed completions for {turns} turns"
    assert card.config.trials == TRIALS == read_any_scorecard(direct).config.trials


def test_the_report_finds_the_slower_build_and_the_planted_quality_loss(
    runs: tuple[Path, Path, int], tmp_path: Path
) -> None:
    direct, slowed, _ = runs
    a_dir = plant_quality(direct, tmp_path / "a", failing=0)
    b_dir = plant_quality(slowed, tmp_path / "b", failing=8)
    a, b = read_any_scorecard(a_dir), read_any_scorecard(b_dir)
    assert statuses(a) == [Status.PASS] * 9 and statuses(b).count(Status.FAIL) == 8

    report = driver_report(a, b, read_traces(a_dir), read_traces(b_dir))
    text = render_driver_md(report)
    print(text)  # shown with `pytest -rP`: the findings of the real runs, for the closing note
    wall = next(d for d in report.speed if d.metric == "turn_wall_s" and d.scope == "all")
    assert wall.verdict is Change.TOO_FEW and "3 paired scenario(s); at least 6" in wall.note, text
    assert wall.change is not None and wall.change > 0, text  # the estimate does point slower
    per_scenario = [d for d in report.speed if d.metric == "turn_wall_s" and d.scope == "scenario"]
    assert len(per_scenario) == 3, text
    for d in per_scenario:  # tested as headline questions, but 3 vs 3 trials cannot decide
        assert d.verdict is Change.TOO_FEW and "run more trials" in d.note, text
    assert not any(d.verdict.beyond_noise for d in report.speed), text
    wall_size = next(d for d in report.detectable if d.metric == "turn_wall_s")
    # 3 scenarios can show no change of any size over scenarios, and the report says so
    # instead of printing a size it could not deliver.
    assert wall_size.scenarios == 3 and wall_size.detectable is None, text
    assert "below 6 no result over scenarios is tested" in wall_size.reason, text

    passed = next(o for o in report.outcomes if o.outcome == "passed" and o.scope == "all")
    assert (passed.pairs, passed.a_only, passed.b_only) == (9, 8, 0)
    assert passed.p_value == pytest.approx(2 / 256)
    assert passed.verdict is Change.WORSE and passed.p_adjusted is not None
    assert passed.p_adjusted < report.alpha

    assert "## Smallest detectable change\n- with 3 trial(s) of 3 scenarios" in text
    assert "passed (all scenarios, n = 9 pairs): B worse, 8 pair(s) lost and 0 gained" in text


def test_an_identical_pair_of_real_runs_is_no_detectable_change(
    runs: tuple[Path, Path, int]
) -> None:
    direct, _, _ = runs
    a, traces = read_any_scorecard(direct), read_traces(direct)
    report = driver_report(a, a, traces, traces)
    assert report.beyond_noise == []
    assert report.speed and all(d.verdict is not Change.SLOWER for d in report.speed)
    assert all(not d.verdict.beyond_noise for d in report.speed + report.scores)
    assert all(not o.verdict.beyond_noise for o in report.outcomes)
    # 3 scenarios × 3 trials could not have shown a speed change: no clean bill is given.
    assert "- no finding, and none was possible" in render_driver_md(report)


def test_the_proxy_passes_replies_through_unchanged(llm_url: str) -> None:
    with SlowProxy(llm_url, 0.0) as proxy:
        direct = httpx.get(f"{llm_url}/api/v1/models", timeout=30)
        proxied = httpx.get(f"{proxy.url}/api/v1/models", timeout=30)
    assert proxied.status_code == direct.status_code == 200
    assert proxied.json() == direct.json()

