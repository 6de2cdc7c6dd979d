"""The warm pool on real Docker: a run cancelled while its pool is full leaves nothing behind.

The engine runs four trials of one scenario at concurrency 1, so the pool keeps two sandboxes
ready ahead of the one in use. The simulated user of the first trial takes its time (it never
says its first message: a slow user, so the timing of the test does not depend on the model's
speed). Once all three sandboxes are ready, the run is cancelled (what Ctrl-C does).
Nothing may be left with the run's label — containers, networks — and no host firewall rule
of runner/sandbox/_firewall.py may name the run. No label sweep runs here (`trialbox run`
adds one after every run): the pool and the backend must clean up by themselves.

While it is full, the pool yields: the kernel's CPU weight of the two spares' containers (read
from their cgroups) is the least, and that of the sandbox handed to the first trial — made
ahead too, then claimed — is raised to the normal sandbox weight. And each spare holds its
scenario's empty session already, made by the pool: the Agent UI lists exactly that one, with
the title, agent and device the conversation would have made it with.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from runner.records.status import Status
from runner.records.transcript import TurnRecord, UserMessage
from runner.report import RunConfig, RunWriter, declared_order
from runner.run.conversations import LiveConversations
from runner.run.engine import Engine
from runner.run.settings import Backend, RunSettings, Selection, new_run_id
from runner.sandbox._hardening import (
    ROLES,
    SANDBOX_CPU_SHARES,
    SPARE_CPU_SHARES,
    claimed_cpu,
    container_options,
)
from runner.sandbox.docker import RUN_LABEL, DockerBackend
from runner.scenarios import load_suite

if TYPE_CHECKING:
    from labelled_containers import LlmCpu

docker = pytest.importorskip("docker")

pytestmark = pytest.mark.containers

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "fixtures" / "engine_suite"
SCENARIO = "lighthouse_fuel"
FULL_WITHIN_S = 600


class SlowUser:
    """A simulated user who never gets round to saying anything."""

    async def user_message(self, scenario: Any, turn: Any, history: Sequence[TurnRecord]) -> UserMessage:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def leftovers(run_id: str) -> list[str]:
    client = docker.from_env()
    selector: dict[str, str | list[str] | bool] = {"label": f"{RUN_LABEL}={run_id}"}
    found = [f"container {c.name}" for c in client.containers.list(all=True, filters=selector)]
    found += [f"network {n.name}" for n in client.networks.list(filters=selector)]
    return found


CGROUP_V1 = Path("/sys/fs/cgroup/cpu").is_dir()


def kernel_weight(shares: int) -> int:
    """What the kernel holds for Docker's ``cpu_shares``: cgroup v1 ``cpu.shares`` itself;
    cgroup v2 ``cpu.weight`` as runc converts it."""
    return shares if CGROUP_V1 else 1 + (shares - 2) * 9999 // 262142


def _cgroup_file(cid: str, v1: str, v2: str) -> Path:
    places = ([f"/sys/fs/cgroup/cpu/docker/{cid}/{v1}"] if CGROUP_V1 else
              [f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/{v2}", f"/sys/fs/cgroup/docker/{cid}/{v2}"])
    return next(Path(p) for p in places if Path(p).exists())


def cpu_weights(run_id: str) -> dict[str, set[int]]:
    """Per job key, the CPU weights of its containers, read from their cgroups."""
    client = docker.from_env()
    weights: dict[str, set[int]] = {}
    for container in client.containers.list(filters={"label": f"{RUN_LABEL}={run_id}"}):
        found = _cgroup_file(str(container.id), "cpu.shares", "cpu.weight")
        weights.setdefault(container.labels["trialbox.scenario"], set()).add(int(found.read_text()))
    return weights


def cpu_caps(run_id: str) -> dict[str, dict[str, int]]:
    """Per job key, each role's CPU quota (µs per period), read from the kernel."""
    client = docker.from_env()
    caps: dict[str, dict[str, int]] = {}
    for container in client.containers.list(filters={"label": f"{RUN_LABEL}={run_id}"}):
        cid = str(container.id)
        if CGROUP_V1:
            quota = int(_cgroup_file(cid, "cpu.cfs_quota_us", "").read_text())
        else:
            quota = int(_cgroup_file(cid, "", "cpu.max").read_text().split()[0])
        caps.setdefault(container.labels["trialbox.scenario"], {})[container.labels["trialbox.role"]] = quota
    return caps


async def sessions_in_spares(pool: Any) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Per ready spare: the session the pool made, and what its Agent UI lists (id, title, device)."""
    found = []
    for key in pool.ready:
        slot = pool._slots[key]
        _, box = slot.task.result()
        listed = (await box.ui_request("GET", "/api/sessions")).json()["sessions"]
        found.append((slot.prepared.session["id"], [(s["id"], s["title"], s["device"]) for s in listed]))
    return found


def firewall_rules(run_id: str) -> list[str]:
    listing = subprocess.run(["iptables", "-S", "INPUT"], capture_output=True, text=True, check=True)
    return [line for line in listing.stdout.splitlines() if f"trialbox.run={run_id} " in line]


def test_a_run_cancelled_with_a_full_pool_leaves_no_container_network_or_rule(
    tmp_path: Path, llm_cpu: LlmCpu
) -> None:
    settings = RunSettings(
        run_id=new_run_id(), suite_paths=[SUITE / "scenarios"], corpus_root=SUITE / "corpus",
        results_root=tmp_path, selection=Selection(ids=[SCENARIO]), backend=Backend.DOCKER,
        device="cpu", llm_url=llm_cpu.url, llm_container=llm_cpu.name, judge_provider="none",
        simulator_mode="scripted", concurrency=1, trials=4,
    )  # fmt: skip
    suite = load_suite([SUITE / "scenarios"], SUITE / "corpus")
    scenarios = [s for s in suite.scenarios if s.id == SCENARIO]
    backend = DockerBackend(settings.run_id, llm_cpu.name, SUITE / "corpus")
    live = LiveConversations(settings, backend, SlowUser())
    writer = RunWriter(settings.run_dir, run_id=settings.run_id, config=RunConfig(),
                       order=declared_order([SCENARIO]))
    engine = Engine(settings, scenarios, live, None, writer, say=lambda line: None)
    seen: dict[str, object] = {}

    async def run_then_cancel() -> None:
        task = asyncio.create_task(engine.run())
        deadline = time.monotonic() + FULL_WITHIN_S
        # Full: the first job has its sandbox and the pool holds two more, ready.
        while not (live.pool is not None and len(live.pool.ready) == 2 and len(live.pool.waiting) == 2):
            assert not task.done(), f"the run ended before its pool was full: {task.result()}"
            assert time.monotonic() < deadline, f"the pool was not full within {FULL_WITHIN_S} s"
            await asyncio.sleep(0.2)
        seen["containers"] = len([c for c in leftovers(settings.run_id) if c.startswith("container")])
        seen["rules"] = len(firewall_rules(settings.run_id))
        seen["weights"] = cpu_weights(settings.run_id)
        seen["caps"] = cpu_caps(settings.run_id)
        seen["sessions"] = await sessions_in_spares(live.pool)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(run_then_cancel())
        # What was there to clean up: three sandboxes of one container, each network two rules.
        weights = seen.pop("weights")
        caps = seen.pop("caps")
        sessions = seen.pop("sessions")
        assert len(sessions) == 2 and all(listed == [(made, f"trialbox: {SCENARIO}", "cpu")]
                                          for made, listed in sessions), sessions  # type: ignore[union-attr]
        assert seen == {"containers": 3, "rules": 6}
        # The first trial's sandbox (handed over) at the sandbox weight, the spares yielding.
        assert weights == {f"{SCENARIO}__trial1": {kernel_weight(SANDBOX_CPU_SHARES)},
                           f"{SCENARIO}__trial2": {kernel_weight(SPARE_CPU_SHARES)},
                           f"{SCENARIO}__trial3": {kernel_weight(SPARE_CPU_SHARES)}}, weights
        # ... and under the sandbox cap once claimed, the spares under their start cap.
        claimed = {role: claimed_cpu(role)["cpu_quota"] for role in ROLES}
        starting = {role: container_options(role, spare=True)["cpu_quota"] for role in ROLES}
        assert caps == {f"{SCENARIO}__trial1": claimed, f"{SCENARIO}__trial2": starting,
                        f"{SCENARIO}__trial3": starting}, caps
        assert leftovers(settings.run_id) == []
        assert firewall_rules(settings.run_id) == []
        statuses = {r.key: r.status for r in writer.results}
        assert len(statuses) == 4 and Status.NOT_RUN in statuses.values()
    finally:
        backend.sweep()  # only if the test failed: leave the machine clean


def test_a_spare_claimed_before_it_is_ready_finishes_its_start_uncapped(llm_cpu: LlmCpu) -> None:
    """Claimed while still starting, a spare gets the sandbox's weight at once (it no longer
    yields) but keeps its start cap until it is ready — its job only waits for it meanwhile —
    and gets the sandbox's cap the moment ``ready`` returns, before anything of the agent runs."""
    backend = DockerBackend(new_run_id(), llm_cpu.name, SUITE / "corpus")
    run_id = backend.run_id
    seen: dict[str, Any] = {}

    async def claim_early() -> None:
        begun = await backend.start(SCENARIO, ahead=True)
        try:
            await backend.hand_over(begun)  # the containers exist; GAIA is still importing
            seen["weights_claimed"] = cpu_weights(run_id)
            seen["caps_claimed"] = cpu_caps(run_id)
            seen["ready_then"] = "ui_ready_s" in begun.sandbox.timings
            await backend.ready(begun)
            seen["caps_ready"] = cpu_caps(run_id)
        finally:
            await backend.stop(begun)

    try:
        asyncio.run(claim_early())
        assert seen["ready_then"] is False  # it really was claimed mid-start
        assert seen["weights_claimed"] == {SCENARIO: {kernel_weight(SANDBOX_CPU_SHARES)}}
        starting = {role: container_options(role, spare=True)["cpu_quota"] for role in ROLES}
        claimed = {role: claimed_cpu(role)["cpu_quota"] for role in ROLES}
        assert seen["caps_claimed"] == {SCENARIO: starting}
        assert seen["caps_ready"] == {SCENARIO: claimed} != seen["caps_claimed"]
        assert leftovers(run_id) == []
    finally:
        backend.sweep()
