"""Per-scenario Docker sandboxes on a real engine: the real agent-ui and llm-cpu images.

One LLM server container is shared by the module (as in a real run); every scenario gets its
own Agent UI + MCP bridge containers on its own internal network. Everything carries the test's
run label and the teardown check looks for anything left with it.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

docker = pytest.importorskip("docker")

pytestmark = pytest.mark.containers

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "fixtures" / "engine_suite"
RUN_ID = f"pytest-sandbox-{int(time.time())}"
LABEL = f"trialbox.run={RUN_ID}"


def _client():  # type: ignore[no-untyped-def]
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        pytest.skip(f"no Docker engine answers ({exc}); scripts/ensure-docker starts one")
    for image in ("trialbox/agent-ui:dev", "trialbox/llm-cpu:dev"):
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            pytest.fail(f"{image} is not built — `trialbox images` (make test builds them first)")
    return client


@pytest.fixture(scope="module")
def llm_container() -> Iterator[str]:
    client = _client()
    container = client.containers.run(
        "trialbox/llm-cpu:dev", detach=True, init=True, name=f"tbx-{RUN_ID}-llm",
        labels={"trialbox.run": RUN_ID, "trialbox.role": "llm"},
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            container.reload()
            health = container.attrs["State"].get("Health", {}).get("Status")
            if health == "healthy":
                break
            assert container.status != "exited", container.logs(tail=30).decode()
            time.sleep(1)
        else:
            pytest.fail("llm-cpu did not become healthy in 180 s")
        yield container.name
    finally:
        container.remove(force=True)


def llm_address(name: str) -> str:
    container = docker.from_env().containers.get(name)
    networks = container.attrs["NetworkSettings"]["Networks"]
    return f"http://{next(iter(networks.values()))['IPAddress']}:13305"


def run(results: Path, llm: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, "-m", "runner.cli", "run", str(SUITE / "scenarios"),
        "--corpus", str(SUITE / "corpus"), "--backend", "docker", "--device", "cpu",
        "--llm-container", llm, "--llm-url", llm_address(llm), "--judge-provider", "none",
        "--simulator", "scripted", "--results", str(results), *args,
    ]  # fmt: skip
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1200)


def labelled(client, run_id: str) -> list[str]:  # type: ignore[no-untyped-def]
    """Every container, network and volume of a run, except the module's LLM server."""
    flt = {"label": f"trialbox.run={run_id}"}
    names = [c.name for c in client.containers.list(all=True, filters=flt) if not c.name.endswith("-llm")]
    names += [n.name for n in client.networks.list(filters=flt)]
    names += [v.name for v in client.volumes.list(filters=flt)]
    return names


@pytest.fixture(scope="module")
def two_scenarios(tmp_path_factory: pytest.TempPathFactory, llm_container: str) -> Path:
    results = tmp_path_factory.mktemp("results")
    done = run(results, llm_container, "-s", "lighthouse_fuel", "-s", "orchard_apples")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    return run_dir


def test_one_scenario_runs_end_to_end_in_its_own_sandbox(two_scenarios: Path) -> None:
    card = json.loads((two_scenarios / "scorecard.json").read_text())
    result = next(s for s in card["scenarios"] if s["id"] == "lighthouse_fuel")
    # No judge runs, so the exact checks decide (a 135M model usually answers wrongly): any
    # quality status will do; an infrastructure status would mean the sandbox failed.
    assert result["status"] in {"NOT_JUDGED", "PASS", "FAIL"}, result.get("error")
    assert len(result["turns"]) == 2 and all(t["answer"].strip() for t in result["turns"])
    trace = json.loads((two_scenarios / result["trace"]).read_text())
    assert trace["transcript"]["indexed"][0]["chunks"] >= 1
    assert (trace["transcript"]["agent_id"], trace["transcript"]["gaia_version"]) == ("gaia", "0.25.1")
    stats = json.loads((two_scenarios / "artifacts" / "lighthouse_fuel" / "llm-stats.json").read_text())
    assert stats.get("output_tokens", 0) > 0, stats  # the LLM server answered
    for name in ("gaia_chat.db", "agent-ui.log", "mcp.log"):
        assert (two_scenarios / "artifacts" / "lighthouse_fuel" / name).stat().st_size > 0


def test_two_sandboxes_do_not_see_each_other(two_scenarios: Path) -> None:
    def content(scenario_id: str) -> str:
        db = sqlite3.connect(two_scenarios / "artifacts" / scenario_id / "gaia_chat.db")
        try:
            rows = db.execute("SELECT content FROM messages").fetchall()
            rows += db.execute("SELECT * FROM documents").fetchall()
            sessions = db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
        finally:
            db.close()
        assert sessions == 1, f"{scenario_id} sees {sessions} sessions"
        return " ".join(map(str, rows)).lower()

    lighthouse, orchard = content("lighthouse_fuel"), content("orchard_apples")
    assert "lighthouse_log" in lighthouse and "orchard_report" not in lighthouse
    assert "orchard_report" in orchard and "lighthouse_log" not in orchard


def test_teardown_leaves_nothing_labelled(two_scenarios: Path) -> None:
    card = json.loads((two_scenarios / "scorecard.json").read_text())
    assert labelled(docker.from_env(), card["run_id"]) == []


def test_the_agent_ui_reaches_only_the_llm_server(llm_container: str) -> None:
    """Inside a sandbox the Agent UI resolves `llm` and nothing on the default bridge."""
    import asyncio

    from runner.sandbox.docker import DockerBackend

    backend = DockerBackend(RUN_ID, llm_container, SUITE / "corpus")
    # The same LLM server on the default bridge: a real server, but not through the sandbox net.
    other_route = llm_address(llm_container)

    async def probe() -> tuple[int, int]:
        async with backend.open("isolation_probe") as box:
            code = "import urllib.request as u, sys\n" \
                   "def get(url):\n" \
                   "    try: return u.urlopen(url, timeout=3).status\n" \
                   "    except Exception: return 0\n" \
                   f"print(get('http://llm:13305/live'), get('{other_route}/live'))"
            out = box.ui.exec_run(["python", "-c", code]).output.decode().split()
            return int(out[-2]), int(out[-1])

    llm_status, outside_status = asyncio.run(probe())
    assert llm_status == 200
    assert outside_status == 0
    assert labelled(docker.from_env(), RUN_ID) == []
