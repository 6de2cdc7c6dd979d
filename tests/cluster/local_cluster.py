"""The local Ray cluster the cluster tests use: a head and two worker nodes as processes on
this machine, each with its own node config and `device:` resource, sharing the one Docker engine and one llm-cpu
container this module starts. Node "beta" is labelled rocm for placement; its LLM server is
really the CPU one, so its sessions use the cpu device (the server's truth) and its results,
decoded repeatably, can equal a local run's."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ray.cluster_utils import Cluster

from runner.cluster._node import DEVICE_LABEL, NODE_CONFIG_ENV, QUIET_RAY_ENV, make_config
from runner.run.settings import Backend, RunSettings, new_run_id

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "fixtures" / "engine_suite"
TAG = f"pytest-cluster-{int(time.time())}"


@dataclass
class LocalCluster:
    cluster: Cluster
    nodes: dict[str, object]  # name → ray._private.node.Node
    llm_container: str
    llm_url: str
    configs: Path
    run_ids: list[str]

    @property
    def address(self) -> str:
        return self.cluster.address

    def add_worker(self, name: str, device: str) -> object:
        """A worker node as `trialbox node join` would announce it."""
        config = make_config(device="cpu", slots=1, llm_container=self.llm_container,
                             llm_url=self.llm_url, name=name, cache_dir=self.configs / name)
        path = self.configs / f"{name}.json"
        path.write_text(config.model_dump_json())
        node = self.cluster.add_node(
            num_cpus=1, resources={"trialbox": 1, f"device:{device}": 1},
            labels=config.labels() | {DEVICE_LABEL: device},
            env_vars={NODE_CONFIG_ENV: str(path), **QUIET_RAY_ENV})
        self.nodes[name] = node
        return node

    def settings(self, results: Path) -> RunSettings:
        run_id = new_run_id()
        self.run_ids.append(run_id)
        return RunSettings(run_id=run_id, suite_paths=[SUITE / "scenarios"],
                           corpus_root=SUITE / "corpus", results_root=results,
                           backend=Backend.DOCKER, device="cpu", llm_url=self.llm_url,
                           llm_container=self.llm_container, judge_provider="none",
                           simulator_mode="scripted",
                           # Greedy with one seed at the front door, on the nodes as locally:
                           # sampled answers differ from run to run (a check passed on one
                           # and failed on the other), so only repeatable runs can be equal.
                           repeatable_decoding=True)


