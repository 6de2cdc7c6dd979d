"""Faults and abuse, for real: `trialbox run` interrupted, killed and starved of its parts.

Each probe runs the real CLI against real Docker sandboxes (the engine fixture suite) and a
labelled llm-cpu container this module starts itself, at a fixed address on a network of its
own (so a stopped and restarted LLM server comes back where the run expects it). Every probe
asserts the outcome a user relies on: the exit code, the statuses, nothing labelled with the
run left behind (containers, networks, volumes, host firewall rules), nothing finished lost,
and `--resume` completing. The mini-soak at the end is scripts/soak's own code at size 6.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

docker = pytest.importorskip("docker")

pytestmark = [pytest.mark.containers, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "fixtures" / "engine_suite"
LABEL = f"pytest-faults-{int(time.time())}"
#: Statuses of a scenario that ran to its end without a judge (the suite's checks decide FAIL).
FINAL = {"NOT_JUDGED", "FAIL", "PASS"}
#: The exit code of an interrupted run and of a run stopped by its infrastructure.
EXIT_INFRA = 3


def _load_soak() -> ModuleType:
    """scripts/soak is a script without a .py suffix: load it as a module (one implementation
    of the fault injector and the leftover check for the script and these tests)."""
    loader = importlib.machinery.SourceFileLoader("trialbox_soak", str(ROOT / "scripts" / "soak"))
    spec = importlib.util.spec_from_loader("trialbox_soak", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    loader.exec_module(module)
    return module


soak = _load_soak()


@pytest.fixture(scope="module")
def llm() -> Iterator[Any]:
    client = docker.from_env()
    for image in ("trialbox/agent-ui:dev", soak.LLM_IMAGE):
        client.images.get(image)  # ImageNotFound: `trialbox images` (make test builds them first)
    server = soak.start_llm(LABEL, client)
    try:
        yield server
    finally:
        soak.remove_llm(server, client)
        assert soak.leftovers(LABEL, client, keep_llm=False) == []


def command(llm: Any, results: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "runner.cli", "run", str(SUITE / "scenarios"), "--corpus", str(SUITE / "corpus"),
            "--backend", "docker", "--device", "cpu", "--llm-container", llm.name, "--llm-url", llm.url,
            "--judge-provider", "none", "--simulator", "scripted", "--results", str(results), *args]  # fmt: skip


def start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    with log.open("w") as sink:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)


def finish(process: subprocess.Popen[bytes], log: Path, timeout_s: float = 900) -> tuple[int, str]:
    code = process.wait(timeout=timeout_s)
    return code, log.read_text()


def resume(run_dir: Path, log: Path, *args: str) -> tuple[int, str]:
    argv = [sys.executable, "-m", "runner.cli", "run", "--resume", str(run_dir), *args]
    return finish(start(argv, log), log)


def run_dir_of(results: Path, process: subprocess.Popen[bytes], timeout_s: float = 120) -> Path:
    """The run folder `trialbox run` made under ``results`` (waits for it)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        made = [p for p in results.iterdir() if p.is_dir()] if results.is_dir() else []
        if made:
            return made[0]
        assert process.poll() is None, "trialbox ended before it made a run folder"
        time.sleep(0.1)
    raise AssertionError(f"no run folder under {results} within {timeout_s} s")


def wait_until(what: str, ready: Callable[[], bool], process: subprocess.Popen[bytes],
               timeout_s: float = 300) -> None:  # fmt: skip
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        assert process.poll() is None, f"trialbox ended (exit {process.returncode}) before {what}"
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout_s} s")


def statuses(run_dir: Path) -> dict[str, str]:
    return soak.results_of(run_dir)


def networks_of(run_id: str) -> list[Any]:
    return docker.from_env().networks.list(filters={"label": f"trialbox.run={run_id}"})


def running_sandboxes(run_id: str) -> list[Any]:
    return soak.sandboxes(run_id, docker.from_env())


def assert_nothing_left(run_id: str) -> None:
    assert soak.leftovers(run_id) == [], f"left behind by run {run_id}"


# -- Ctrl-C while sandboxes are being created ------------------------------------------------


@pytest.mark.parametrize("delay_s", [0.0, 0.4, 1.5])
def test_ctrl_c_during_sandbox_start_leaks_nothing(llm: Any, tmp_path: Path, delay_s: float) -> None:
    """SIGINT the moment the first sandbox network exists (and a little later): creation
    threads still at work must finish and be torn down; all three starts were in flight."""
    results = tmp_path / "results"
    process = start(command(llm, results, "--concurrency", "3"), tmp_path / "run.log")
    run_dir = run_dir_of(results, process)
    wait_until("the first sandbox network", lambda: bool(networks_of(run_dir.name)), process)
    time.sleep(delay_s)
    process.send_signal(signal.SIGINT)
    code, out = finish(process, tmp_path / "run.log", timeout_s=180)
    assert code == EXIT_INFRA, out[-3000:]
    assert "interrupted" in out and "--resume" in out
    assert set(statuses(run_dir).values()) <= {"NOT_RUN"} | FINAL, statuses(run_dir)
    assert "NOT_RUN" in statuses(run_dir).values()
    assert_nothing_left(run_dir.name)


# -- SIGTERM / SIGKILL mid-run, then --resume ------------------------------------------------


def test_sigterm_mid_run_then_resume_completes(llm: Any, tmp_path: Path) -> None:
    results = tmp_path / "results"
    argv = command(llm, results, "--scenario", "lighthouse_fuel", "--scenario", "orchard_apples",
                   "--concurrency", "2")  # fmt: skip
    process = start(argv, tmp_path / "run.log")
    run_dir = run_dir_of(results, process)
    wait_until("a running sandbox", lambda: bool(running_sandboxes(run_dir.name)), process)
    process.send_signal(signal.SIGTERM)
    code, out = finish(process, tmp_path / "run.log", timeout_s=180)
    assert code == EXIT_INFRA, out[-3000:]
    assert "NOT_RUN" in statuses(run_dir).values()
    assert_nothing_left(run_dir.name)

    code, out = resume(run_dir, tmp_path / "resume.log")
    assert code == 0, out[-3000:]
    assert set(statuses(run_dir)) == {"lighthouse_fuel", "orchard_apples"}
    assert set(statuses(run_dir).values()) <= FINAL, statuses(run_dir)
    assert soak.traces_on_disk(run_dir) == {"lighthouse_fuel", "orchard_apples"}
    assert_nothing_left(run_dir.name)


def test_sigkill_mid_run_then_resume_sweeps_and_completes(llm: Any, tmp_path: Path) -> None:
    """`kill -9` leaves containers, networks and firewall rules; `--resume` removes them by
    label first (no "name already in use") and completes."""
    results = tmp_path / "results"
    process = start(command(llm, results, "--scenario", "lighthouse_fuel"), tmp_path / "run.log")
    run_dir = run_dir_of(results, process)
    wait_until("a running sandbox", lambda: bool(running_sandboxes(run_dir.name)), process)
    process.kill()
    process.wait(timeout=30)
    assert soak.leftovers(run_dir.name), "a killed run leaves its sandbox behind (else this probes nothing)"

    code, out = resume(run_dir, tmp_path / "resume.log")
    assert code == 0, out[-3000:]
    assert "already in use" not in out
    assert "left over from the interrupted run" in out
    assert set(statuses(run_dir).values()) <= FINAL, statuses(run_dir)
    assert_nothing_left(run_dir.name)


# -- parts dying under a run -----------------------------------------------------------------


def _conversation_begun(run_id: str) -> bool:
    """True once the first turn is under way: the sandbox's chat DB holds a message."""
    probe = ("import sqlite3; c = sqlite3.connect('/home/gaia/.gaia/chat/gaia_chat.db'); "
             "print(c.execute('select count(*) from messages').fetchone()[0])")  # fmt: skip
    for container in running_sandboxes(run_id):
        if container.labels.get("trialbox.role") != "agent-ui":
            continue
        try:
            done = container.exec_run(["python", "-c", probe])
        except docker.errors.APIError:
            return False
        return done.exit_code == 0 and done.output.decode().strip() not in ("", "0")
    return False


def test_agent_ui_killed_mid_scenario_is_a_clear_infra_error_at_once(
    llm: Any, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    process = start(command(llm, results, "--scenario", "orchard_followup"), tmp_path / "run.log")
    run_dir = run_dir_of(results, process)
    wait_until("the first turn", lambda: _conversation_begun(run_dir.name), process)
    for container in running_sandboxes(run_dir.name):
        if container.labels.get("trialbox.role") == "agent-ui":
            container.kill()
    killed = time.monotonic()
    code, out = finish(process, tmp_path / "run.log")
    noticed_s = time.monotonic() - killed
    assert code == EXIT_INFRA, out[-3000:]
    card = json.loads((run_dir / "scorecard.json").read_text())
    (row,) = card["scenarios"]
    assert row["status"] == "INFRA_ERROR", row
    assert row["error"] and "409" not in row["error"], row["error"]  # a cause, not an HTTP code
    print("UI killed mid-scenario:", row["error"])
    assert row["error"].startswith("SandboxError: the Agent UI container") and "exit code 137" in row["error"]
    # What the sandbox still had is kept to debug it (issue 20): its logs and the trace's turns so far.
    assert (run_dir / "artifacts" / "orchard_followup" / "agent-ui.log").is_file()
    trace = _trace(run_dir, "orchard_followup")
    assert trace["transcript"] is not None and trace["result"]["status"] == "INFRA_ERROR"
    assert noticed_s < 60, f"the death took {noticed_s:.0f} s to notice: it must not be waited out"
    assert_nothing_left(run_dir.name)


def test_llm_stopped_mid_run_ends_with_exit_3_and_docker_start_works(llm: Any, tmp_path: Path) -> None:
    client = docker.from_env()
    results = tmp_path / "results"
    # --timeout: the scenario in flight ends at its limit whatever GAIA's LLM client retries
    # (it took ~2 min to give up); what is pinned here is the next one's health check.
    process = start(command(llm, results, "--concurrency", "1", "--timeout", "45"), tmp_path / "run.log")
    run_dir = run_dir_of(results, process)
    wait_until("a running sandbox", lambda: bool(running_sandboxes(run_dir.name)), process)
    client.containers.get(llm.name).stop(timeout=2)
    try:
        code, out = finish(process, tmp_path / "run.log")
        assert code == EXIT_INFRA, out[-3000:]
        assert "the LLM server stopped answering" in out, out[-3000:]
        assert "NOT_RUN" in statuses(run_dir).values(), statuses(run_dir)
        assert_nothing_left(run_dir.name)
        attached = client.containers.get(llm.name).attrs["NetworkSettings"]["Networks"]
        assert set(attached) == {llm.network}, f"dangling sandbox networks on the LLM: {set(attached)}"
    finally:
        client.containers.get(llm.name).start()  # raises on a dangling network reference
        soak.wait_healthy(llm)


def test_a_timeout_shorter_than_any_start_leaks_nothing(llm: Any, tmp_path: Path) -> None:
    """--timeout 0.3 cancels every sandbox mid-creation (issue 10: 6 containers, 3 networks)."""
    results = tmp_path / "results"
    process = start(command(llm, results, "--concurrency", "3", "--timeout", "0.3"), tmp_path / "run.log")
    run_dir = run_dir_of(results, process)
    code, out = finish(process, tmp_path / "run.log", timeout_s=300)
    assert code == EXIT_INFRA, out[-3000:]
    assert set(statuses(run_dir).values()) == {"TIMEOUT"}, statuses(run_dir)
    assert_nothing_left(run_dir.name)


# -- a small soak --------------------------------------------------------------------------


def test_mini_soak_with_random_kills_loses_nothing_and_leaves_nothing(llm: Any, tmp_path: Path) -> None:
    """Seed 5 draws kill-agent, SIGINT, SIGKILL (at random moments): the three kinds of fault
    the probes above do not combine. TRIALBOX_SOAK_SEED picks another sequence."""
    tally = soak.soak(llm, runs=6, concurrency=3, seed=int(os.environ.get("TRIALBOX_SOAK_SEED", "5")),
                      max_faults=3, work=tmp_path, say=print)  # fmt: skip
    print(tally.table())
    assert tally.injected >= 1, "no fault was injected: the soak probed nothing"
    assert tally.lost == []
    assert tally.leftovers == []
    assert tally.completed, tally.final
    assert tally.survived == tally.injected
    assert set(tally.final.values()) <= FINAL


# -- nothing a conversation produced is lost ----------------------------------------------------


def _settings_in_process(llm: Any, results: Path, scenario_id: str) -> Any:
    from runner.run.settings import RunSettings, Selection, new_run_id

    return RunSettings(run_id=new_run_id(), suite_paths=[SUITE / "scenarios"], corpus_root=SUITE / "corpus",
                       results_root=results, selection=Selection(ids=[scenario_id]), device="cpu",
                       llm_url=llm.url, llm_container=llm.name, judge_provider="none",
                       simulator_mode="scripted", warm_pool=False)  # fmt: skip


def _trace(run_dir: Path, key: str) -> dict[str, Any]:
    return dict(json.loads((run_dir / "traces" / f"{key}.json").read_text()))


def test_agent_ui_killed_right_after_the_last_turn_keeps_the_judged_conversation(
    llm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Agent UI is killed (for real) the moment the last turn is done, before its artifacts
    are collected: the conversation is kept and checked, and the row says what happened after."""
    import asyncio

    from runner.run import launch
    from runner.sandbox.docker import DockerSandbox

    collect = DockerSandbox.collect

    async def killed_first(box: DockerSandbox, dest: Path) -> list[str]:
        await asyncio.to_thread(box.ui.kill)
        await asyncio.to_thread(box.ui.wait, timeout=30)
        return await collect(box, dest)

    monkeypatch.setattr(DockerSandbox, "collect", killed_first)
    settings = _settings_in_process(llm, tmp_path / "results", "lighthouse_fuel")
    card = asyncio.run(launch.run(settings, print))
    (row,) = card.scenarios
    assert row.status.value in FINAL, row
    # Said in the row, which is written again once the sandbox is left (after it was recorded).
    assert any(n.startswith("after the conversation finished: ") and "the Agent UI container" in n
               for n in row.notes), row.notes
    assert row.checks or any(t.checks for t in row.turns), "the kept conversation was checked"
    trace = _trace(settings.run_dir, "lighthouse_fuel")
    assert trace["transcript"] is not None and len(trace["transcript"]["turns"]) == 2
    assert (settings.run_dir / "artifacts" / "lighthouse_fuel" / "agent-ui.log").is_file()
    assert_nothing_left(settings.run_id)


def test_a_timeout_keeps_the_turns_done_before_it_and_the_artifacts(
    llm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The simulated user stalls before turn 2 and the scenario's real deadline is brought
    forward to now: TIMEOUT, with turn 1 and the sandbox's logs in the trace's folder."""
    import asyncio

    from runner.conversation.simulate import ScriptedSimulator
    from runner.run import conversations, launch

    deadlines: list[asyncio.Timeout] = []
    real_timeout = asyncio.timeout

    def recorded(delay: float | None) -> asyncio.Timeout:
        made = real_timeout(delay)
        if delay == 577:
            deadlines.append(made)
        return made

    speak = ScriptedSimulator.user_message

    async def stall_at_turn_2(self: Any, scenario: Any, turn: Any, history: Any) -> Any:
        if turn.turn == 2:
            deadlines[-1].reschedule(asyncio.get_running_loop().time())
            await asyncio.sleep(600)
        return await speak(self, scenario, turn, history)

    monkeypatch.setattr(conversations.asyncio, "timeout", recorded)
    monkeypatch.setattr(ScriptedSimulator, "user_message", stall_at_turn_2)
    settings = _settings_in_process(llm, tmp_path / "results", "orchard_followup")
    settings.timeout_s = 577
    card = asyncio.run(launch.run(settings, print))
    monkeypatch.undo()
    (row,) = card.scenarios
    assert row.status.value == "TIMEOUT", row
    trace = _trace(settings.run_dir, "orchard_followup")
    assert trace["transcript"] is not None, "the turn done before the timeout was dropped"
    assert [t["turn"] for t in trace["transcript"]["turns"]] == [1]
    assert trace["transcript"]["turns"][0]["answer"]
    folder = settings.run_dir / "artifacts" / "orchard_followup"
    assert (folder / "agent-ui.log").is_file() and (folder / "mcp.log").is_file()
    assert trace["result"]["status"] == "TIMEOUT"
    assert_nothing_left(settings.run_id)


def test_a_resume_of_a_live_run_is_refused_at_once_and_the_live_run_finishes_untouched(
    llm: Any, tmp_path: Path
) -> None:
    """Issue 20: a second process resuming a live run swept its sandboxes (both exited 0). The
    run folder's lock refuses it (exit 2, one line) before it touches anything."""
    results = tmp_path / "results"
    process = start(command(llm, results, "--scenario", "lighthouse_fuel"), tmp_path / "run.log")
    run_dir = run_dir_of(results, process)
    wait_until("a running sandbox", lambda: bool(running_sandboxes(run_dir.name))
               and (run_dir / "run.json").is_file(), process)  # fmt: skip
    sandboxes = {c.id for c in running_sandboxes(run_dir.name)}
    code, out = resume(run_dir, tmp_path / "resume.log")
    assert code == 2, out[-3000:]
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1 and "in use by a live run" in lines[0] and "Traceback" not in out, out
    if process.poll() is None:  # the live run's sandbox is still there: nothing was swept
        still = {c.id for c in running_sandboxes(run_dir.name)}
        assert still & sandboxes or process.poll() is not None, "the refused resume swept the live run"
    code, out = finish(process, tmp_path / "run.log")
    assert code == 0, out[-3000:]
    assert set(statuses(run_dir).values()) <= FINAL, statuses(run_dir)
    assert_nothing_left(run_dir.name)
