"""Per-scenario Docker sandboxes on a real engine: the real agent-ui and llm-cpu images.

One LLM server container is shared by the module (as in a real run); every scenario gets its
own container (the Agent UI, its MCP bridge forked inside it) on its own internal network. Everything carries the test's
run label and the teardown check looks for anything left with it.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from labelled_containers import LlmCpu

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


@pytest.fixture(scope="module", autouse=True)
def engine_and_images() -> None:
    """A Docker engine answers and both images are built, before the module's LLM server starts."""
    _client()


def run(results: Path, llm: LlmCpu, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, "-m", "runner.cli", "run", str(SUITE / "scenarios"),
        "--corpus", str(SUITE / "corpus"), "--backend", "docker", "--device", "cpu",
        "--llm-container", llm.name, "--llm-url", llm.url, "--judge-provider", "none",
        "--simulator", "scripted", "--results", str(results), *args,
    ]  # fmt: skip
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1200)


def labelled(client, run_id: str) -> list[str]:  # type: ignore[no-untyped-def]
    """Every container, network and volume of a run (the module's LLM server has its own label)."""
    flt = {"label": f"trialbox.run={run_id}"}
    names = [c.name for c in client.containers.list(all=True, filters=flt)]
    names += [n.name for n in client.networks.list(filters=flt)]
    names += [v.name for v in client.volumes.list(filters=flt)]
    return names


@pytest.fixture(scope="module")
def two_scenarios(tmp_path_factory: pytest.TempPathFactory, llm_cpu: LlmCpu) -> Path:
    results = tmp_path_factory.mktemp("results")
    done = run(results, llm_cpu, "-s", "lighthouse_fuel", "-s", "orchard_apples")
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
    # This sandbox's own requests, metered at the LLM's front door (trialbox_llm/meter.py).
    assert stats["source"] == "front_door" and stats["requests"] > 0, stats
    assert all(r["client"] == stats["client"] for r in stats["records"])
    assert sum(r["completion_tokens"] or 0 for r in stats["records"]) > 0, stats
    performance = [t["performance"] for t in trace["transcript"]["turns"]]
    assert all(p["source"] == "front_door" and p["llm_calls"] >= 1 for p in performance), performance
    assert all(p["time_to_first_token_s"] > 0 and p["output_tokens"] > 0 for p in performance)
    for name in ("gaia_chat.db", "agent-ui.log", "mcp.log"):
        assert (two_scenarios / "artifacts" / "lighthouse_fuel" / name).stat().st_size > 0
    # One container's log, split again: each process's own lines, the bridge's without prefix.
    ui_log = (two_scenarios / "artifacts" / "lighthouse_fuel" / "agent-ui.log").read_text()
    bridge_log = (two_scenarios / "artifacts" / "lighthouse_fuel" / "mcp.log").read_text()
    assert "Uvicorn running on http://127.0.0.1:4200" in ui_log and "[mcp] " not in ui_log
    assert "Uvicorn running on http://0.0.0.0:8765" in bridge_log and "4200 (Press" not in bridge_log


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


def test_the_agent_ui_reaches_only_the_llm_server(llm_cpu: LlmCpu) -> None:
    """Inside a sandbox the Agent UI resolves `llm` and nothing on the default bridge."""
    import asyncio

    from runner.sandbox.docker import DockerBackend

    backend = DockerBackend(RUN_ID, llm_cpu.name, SUITE / "corpus")
    # The same LLM server on the default bridge: a real server, but not through the sandbox net.
    other_route = llm_cpu.url

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


# -- the Agent UI's port is reachable by its own bridge only ---------------------------------


def test_no_one_but_the_sandboxs_bridge_reaches_the_agent_ui(llm_cpu: LlmCpu) -> None:
    """GAIA's UI has no authentication: it listens on its container's loopback, where only
    the bridge (same network namespace) reaches it. From the host: no UI port at all, and the
    bridge refuses a request without this sandbox's token. trialbox's own switches go
    through `docker exec` and still work."""
    import asyncio

    import httpx

    from runner.sandbox.docker import MCP_PORT, UI_PORT, DockerBackend

    backend = DockerBackend(RUN_ID, llm_cpu.name, SUITE / "corpus")
    llm = docker.from_env().containers.get(llm_cpu.name)

    async def probe() -> dict[str, object]:
        async with backend.open("ui_port_probe") as box:
            address = box.mcp_url.split("//")[1].split(":")[0]
            seen: dict[str, object] = {}
            async with httpx.AsyncClient(timeout=5) as http:
                for name, url in (("ui", f"http://{address}:{UI_PORT}/api/sessions"),):
                    try:
                        seen[name] = (await http.get(url)).status_code
                    except httpx.ConnectError:
                        seen[name] = "refused"
                seen["mcp_without_token"] = (await http.post(f"http://{address}:{MCP_PORT}/mcp", json={})).status_code
                wrong = {"Authorization": "Bearer " + "0" * 48}
                seen["mcp_wrong_token"] = (await http.post(f"http://{address}:{MCP_PORT}/mcp", json={},
                                                           headers=wrong)).status_code  # fmt: skip
            # A neighbour on the sandbox network (the LLM server) cannot reach it either.
            code = ("import urllib.request as u\n"
                    f"try: print(u.urlopen('http://{address}:{UI_PORT}/api/health', timeout=3).status)\n"
                    "except Exception as e: print('refused', type(e).__name__)\n")
            seen["from_llm"] = llm.exec_run(["python3", "-c", code]).output.decode().strip()
            health = await box.ui_request("GET", "/api/health")
            seen["exec"] = (health.status, health.json().get("status"))
            return seen

    seen = asyncio.run(probe())
    assert seen["ui"] == "refused"
    assert seen["mcp_without_token"] == 401 and seen["mcp_wrong_token"] == 401
    assert str(seen["from_llm"]).startswith("refused"), seen["from_llm"]
    assert seen["exec"] == (200, "ok")
    assert labelled(docker.from_env(), RUN_ID) == []


# -- leaks whatever the timing; collect keeps what it can -------------------------------------


@pytest.mark.parametrize("after_s", [0.0, 0.05, 0.3, 1.0, 3.0])
def test_a_cancelled_start_leaves_nothing_whatever_the_moment(llm_cpu: LlmCpu, after_s: float) -> None:
    import asyncio

    from runner.sandbox.docker import DockerBackend

    backend = DockerBackend(RUN_ID, llm_cpu.name, SUITE / "corpus")
    key = f"cancel_{str(after_s).replace('.', '_')}"

    async def start_and_cancel() -> None:
        async def hold() -> None:
            async with backend.open(key):
                await asyncio.sleep(600)

        task = asyncio.create_task(hold())
        await asyncio.sleep(after_s)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(start_and_cancel())
    assert labelled(docker.from_env(), RUN_ID) == []
    attached = docker.from_env().containers.get(llm_cpu.name).attrs["NetworkSettings"]["Networks"]
    assert all(not name.startswith("tbx-") for name in attached), attached


def test_collect_after_the_agent_ui_died_keeps_the_rest_and_says_why(
    llm_cpu: LlmCpu, tmp_path: Path
) -> None:
    import asyncio

    from runner.sandbox import SandboxError
    from runner.sandbox.docker import DockerBackend

    backend = DockerBackend(RUN_ID, llm_cpu.name, SUITE / "corpus")
    backend.watch_interval_s = 3600  # collect by hand here; the watchdog is test_faults.py's

    async def kill_then_collect() -> list[str]:
        problems: list[str] = []
        # Leaving the sandbox says the death too, though the watchdog never looked.
        with pytest.raises(SandboxError, match="the Agent UI container .* mid-scenario"):
            async with backend.open("collect_after_kill") as box:
                box.ui.kill()
                problems = await box.collect(tmp_path / "artifacts")
        return problems

    problems = asyncio.run(kill_then_collect())
    assert len(problems) == 1 and problems[0].startswith("gaia_chat.db: the Agent UI container is exited"), problems
    assert (tmp_path / "artifacts" / "collect-errors.txt").read_text().strip() == problems[0]
    for name in ("agent-ui.log", "mcp.log", "llm-stats.json"):
        assert (tmp_path / "artifacts" / name).is_file(), name
    assert labelled(docker.from_env(), RUN_ID) == []


#: Prints the pid of the sandbox's bridge: the process with the UI's command line (a fork keeps
#: it) whose parent has it too.
FIND_BRIDGE = """
import os
def parent(pid):
    return open(f"/proc/{pid}/stat").read().rsplit(") ", 1)[1].split()[1]
def launch(pid):
    return b"gaia.ui.server" in open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")  # an argument
pids = [p for p in os.listdir("/proc") if p.isdigit() and launch(p)]
print(*[p for p in pids if parent(p) in pids])
"""


def test_a_bridge_that_ends_mid_scenario_ends_the_sandbox_and_says_so(llm_cpu: LlmCpu) -> None:
    """The bridge is a process of the UI's container now: its end stops the container (the UI
    with it) and the watchdog names the bridge, instead of MCP calls failing one by one."""
    import asyncio

    from runner.sandbox import SandboxError
    from runner.sandbox.docker import DockerBackend

    backend = DockerBackend(RUN_ID, llm_cpu.name, SUITE / "corpus")
    backend.watch_interval_s = 0.5

    async def end_the_bridge() -> None:
        async with backend.open("bridge_ends") as box:
            # The bridge: the UI's child that runs the pair's launch (GAIA's daemon runs its own).
            found = box.ui.exec_run(["python", "-c", FIND_BRIDGE]).output.decode().split()
            assert len(found) == 1, found
            killed = box.ui.exec_run(["python", "-c", f"import os; os.kill({found[0]}, 15)"])
            assert killed.exit_code == 0, killed.output
            await asyncio.sleep(30)  # the watchdog cancels this long before

    with pytest.raises(SandboxError, match="its MCP bridge ended, and the Agent UI with it mid-scenario"):
        asyncio.run(end_the_bridge())
    assert labelled(docker.from_env(), RUN_ID) == []


def test_a_stopped_llm_server_is_detached_and_starts_again(llm_cpu: LlmCpu) -> None:
    """Teardown force-disconnects the LLM even when it is stopped (it is not listed among the
    network's endpoints then); a reference left by a killed run is repaired by the sweep."""
    import asyncio

    from runner.sandbox.docker import DockerBackend, repair_llm_networks

    client = docker.from_env()
    backend = DockerBackend(RUN_ID, llm_cpu.name, SUITE / "corpus")
    llm = client.containers.get(llm_cpu.name)
    own = set(llm.attrs["NetworkSettings"]["Networks"])

    async def stop_llm_inside() -> None:
        async with backend.open("llm_stopped"):
            llm.stop(timeout=2)

    try:
        asyncio.run(stop_llm_inside())
        llm.reload()
        assert set(llm.attrs["NetworkSettings"]["Networks"]) == own
        # A run killed outright: its network is removed by someone else while the stopped LLM
        # still names it — `docker start` would fail until repaired.
        net = client.networks.create(f"tbx-{RUN_ID}-dangling", internal=True, labels={"trialbox.run": RUN_ID})
        net.connect(llm_cpu.name)
        net.remove()
        assert repair_llm_networks(client, llm_cpu.name) == [f"tbx-{RUN_ID}-dangling"]
    finally:
        llm.start()
    deadline = time.monotonic() + 180
    while True:
        llm.reload()
        if llm.attrs["State"].get("Health", {}).get("Status") == "healthy":
            break
        assert time.monotonic() < deadline, "the LLM server did not come back"
        time.sleep(1)
    assert labelled(client, RUN_ID) == []
