"""A whole run from the pinned runner image: `trialbox bench --in-container` without the build.

The stack gets a project and port of its own; the runner container (compose service `runner`)
creates the sandboxes as its siblings through the Docker socket and writes the results into a
host folder that belongs to the caller. While it runs, a watcher records who the runner's
processes run as and what is attached to every sandbox network: the runner is uid 10001 (the
caller is root here), in the host's network namespace, and never on a sandbox network.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

docker = pytest.importorskip("docker")

from runner.bench.make_bench import run_in_runner_container  # noqa: E402
from runner.run.cleanup import cleanup  # noqa: E402
from runner.stack.compose import down, project_name, up_llm  # noqa: E402

pytestmark = pytest.mark.containers


@pytest.fixture
def stack() -> Iterator[tuple[str, str, int]]:
    try:
        docker.from_env().ping()
    except docker.errors.DockerException as exc:
        pytest.skip(f"no Docker engine answers ({exc}); scripts/ensure-docker starts one")
    run_id = f"pytest-runner-{secrets.token_hex(3)}"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    try:
        llm = up_llm("cpu", run_id=run_id, port=port, timeout_s=240)
        yield run_id, llm.container, port
    finally:
        down("cpu", run_id)
        cleanup(run_id)


@dataclass
class Seen:
    """What the watcher saw while the run ran."""

    runner_uids: set[str] = field(default_factory=set)
    runner_networks: set[str] = field(default_factory=set)
    runner_ids: set[str] = field(default_factory=set)
    sandbox_roles: set[str] = field(default_factory=set)  # roles of what sat on sandbox networks
    sandbox_attached: set[str] = field(default_factory=set)
    sandbox_networks: int = 0


def watch(project: str, llm_container: str, stop: threading.Event, seen: Seen) -> None:
    client = docker.from_env()
    llm = str(client.containers.get(llm_container).id)
    runners = {"label": [f"com.docker.compose.project={project}", "trialbox.role=runner"]}
    while not stop.wait(0.5):
        try:
            for runner in client.containers.list(filters=runners):
                seen.runner_ids.add(str(runner.id))
                seen.runner_networks.update(runner.attrs["NetworkSettings"]["Networks"])
                top = runner.top(ps_args="-o pid,uid")  # Docker needs the pid to pick the container's
                column = top["Titles"].index("UID")
                seen.runner_uids.update(row[column] for row in top["Processes"] or [])  # None: it is exiting
            for network in client.networks.list(filters={"label": "trialbox.scenario"}):
                network.reload()
                if llm not in {c.id for c in network.containers}:
                    continue  # another session's sandbox (the machine is shared)
                seen.sandbox_networks += 1
                for container in network.containers:
                    seen.sandbox_attached.add(str(container.id))
                    seen.sandbox_roles.add(container.labels.get("trialbox.role", "?"))
        except docker.errors.APIError:
            continue  # a container or network went between listing and reading it


def test_a_run_from_the_runner_image_leaves_results_on_the_host(
    stack: tuple[str, str, int], tmp_path: Path
) -> None:
    run_id, llm_container, port = stack
    seen, stop = Seen(), threading.Event()
    watcher = threading.Thread(target=watch, args=(project_name(run_id), llm_container, stop, seen), daemon=True)
    watcher.start()
    try:
        code = run_in_runner_container("cpu", llm_container, ["-s", "budget_line_from_json"], tmp_path,
                                       stack_run_id=run_id, port=port)
    finally:
        stop.set()
        watcher.join(timeout=10)
    assert code == 0
    # The runner ran as uid 10001 (never root), in the host's network namespace ...
    assert seen.runner_ids, "the watcher never saw the runner container"
    assert seen.runner_uids == {"10001"}, seen.runner_uids
    assert seen.runner_networks == {"host"}, seen.runner_networks
    # ... and the sandbox networks it made held the sandbox and the LLM, never the runner.
    assert seen.sandbox_networks, "the watcher never saw a sandbox network"
    assert not seen.sandbox_attached & seen.runner_ids
    assert seen.sandbox_roles <= {"agent-ui", "llm"}, seen.sandbox_roles
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    card = json.loads((run_dir / "scorecard.json").read_text())
    (result,) = card["scenarios"]
    failed = [c for c in result["checks"] + [c for t in result["turns"] for c in t["checks"]]
              if not c["passed"]]
    assert result["status"] == ("FAIL" if failed else "NOT_JUDGED"), failed
    assert all(t["answer"].strip() for t in result["turns"])
    assert (run_dir / "artifacts" / "budget_line_from_json" / "gaia_chat.db").is_file()
    assert (run_dir / "scorecard.json").stat().st_uid == os.getuid()  # the caller owns the results
    assert all(p.stat().st_uid == os.getuid() for p in run_dir.rglob("*"))
    assert [p.name for p in tmp_path.iterdir()] == [run_dir.name]  # the runner's own folder went
    # The runner image carries inspect-ai: an in-container run writes the viewer's log too.
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(run_dir / "inspect.eval"))
    assert log.status == "success" and [s.id for s in log.samples or []] == ["budget_line_from_json"]
    engine_run = card["run_id"]
    client = docker.from_env()
    assert client.containers.list(all=True, filters={"label": f"trialbox.run={engine_run}"}) == []
    assert client.networks.list(filters={"label": f"trialbox.run={engine_run}"}) == []
