"""Fixtures: the module's llm-cpu container (tests/conftest.py) and a local Ray cluster
(local_cluster.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

docker = pytest.importorskip("docker")
ray = pytest.importorskip("ray")

from local_cluster import LocalCluster  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from runner.cluster._node import QUIET_RAY_ENV  # noqa: E402

if TYPE_CHECKING:
    from labelled_containers import LlmCpu


@pytest.fixture(scope="module")
def llm_cpu_environment() -> dict[str, str]:
    """An admin token, as `trialbox up` gives one: the cluster's runs decode repeatably
    (local_cluster.py), which the nodes' runners lease with it at the front door."""
    return {"TRIALBOX_LLM_ADMIN_TOKEN": "cluster-tests-admin-token-0123456789"}


@pytest.fixture(scope="module")
def llm(llm_cpu: LlmCpu) -> tuple[str, str]:
    """The module's llm-cpu server (`llm_cpu`, tests/conftest.py) as nodes are given it:
    (container name, URL on Docker's bridge)."""
    return llm_cpu.name, llm_cpu.url


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
        from runner.run.cleanup import cleanup

        for run_id in made.run_ids:
            cleanup(run_id)
