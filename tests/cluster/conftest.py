"""Fixtures: one labelled llm-cpu container and a local Ray cluster (local_cluster.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

docker = pytest.importorskip("docker")
ray = pytest.importorskip("ray")

from local_cluster import TAG, LocalCluster  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from runner.cluster._node import QUIET_RAY_ENV  # noqa: E402


@pytest.fixture(scope="module")
def llm() -> Iterator[tuple[str, str]]:
    client = docker.from_env()
    container = client.containers.run(
        "trialbox/llm-cpu:dev", detach=True, init=True, name=f"tbx-{TAG}-llm",
        labels={"trialbox.run": TAG, "trialbox.role": "llm"},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            container.reload()
            if container.attrs["State"].get("Health", {}).get("Status") == "healthy":
                break
            assert container.status != "exited", container.logs(tail=30).decode()
            time.sleep(1)
        else:
            pytest.fail("llm-cpu did not become healthy in 180 s")
        yield container.name, f"http://{container.attrs['NetworkSettings']['IPAddress']}:13305"
    finally:
        container.remove(force=True)


@pytest.fixture(scope="module")
def cluster(llm: tuple[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    os.environ.update(QUIET_RAY_ENV)
    head = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    made = LocalCluster(head, {}, llm[0], llm[1], tmp_path_factory.mktemp("nodes"), [])
    made.add_worker("alpha", "cpu")
    made.add_worker("beta", "rocm")
    try:
        yield made
    finally:
        ray.shutdown()
        head.shutdown()
        # A killed node leaves its sandbox behind (its cleanup never ran): swept by label.
        from runner.stack.cleanup import cleanup

        for run_id in made.run_ids:
            cleanup(run_id)
