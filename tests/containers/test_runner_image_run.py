"""A whole run from the pinned runner image: `trialbox bench --in-container` without the build.

The stack gets a project and port of its own; the runner container (compose service `runner`)
creates the sandboxes as its siblings through the Docker socket and writes the results into a
host folder as the calling user.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

docker = pytest.importorskip("docker")

from runner.bench import run_in_runner_container  # noqa: E402
from runner.stack.cleanup import cleanup  # noqa: E402
from runner.stack.compose import down, up_llm  # noqa: E402

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


def test_a_run_from_the_runner_image_leaves_results_on_the_host(
    stack: tuple[str, str, int], tmp_path: Path
) -> None:
    run_id, llm_container, port = stack
    code = run_in_runner_container("cpu", llm_container, ["-s", "budget_line_from_json"], tmp_path,
                                   stack_run_id=run_id, port=port)
    assert code == 0
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    card = json.loads((run_dir / "scorecard.json").read_text())
    (result,) = card["scenarios"]
    failed = [c for c in result["checks"] + [c for t in result["turns"] for c in t["checks"]]
              if not c["passed"]]
    assert result["status"] == ("FAIL" if failed else "NOT_JUDGED"), failed
    assert all(t["answer"].strip() for t in result["turns"])
    assert (run_dir / "artifacts" / "budget_line_from_json" / "gaia_chat.db").is_file()
    assert (run_dir / "scorecard.json").stat().st_uid == os.getuid()  # the caller owns the results
    # The runner image carries inspect-ai: an in-container run writes the viewer's log too.
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(run_dir / "inspect.eval"))
    assert log.status == "success" and [s.id for s in log.samples or []] == ["budget_line_from_json"]
    engine_run = card["run_id"]
    client = docker.from_env()
    assert client.containers.list(all=True, filters={"label": f"trialbox.run={engine_run}"}) == []
    assert client.networks.list(filters={"label": f"trialbox.run={engine_run}"}) == []
