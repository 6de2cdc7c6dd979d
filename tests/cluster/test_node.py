"""A node's parts that need no sandbox: its config and labels, the corpus shipment, and
`join`/`leave` against a real Ray head (a real `ray start --block` process joins and leaves)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
from ray.cluster_utils import Cluster

from runner.cluster import NodeError, join, leave, load_node_config
from runner.cluster._node import NODE_CONFIG_ENV, QUIET_RAY_ENV, driver_label, make_config
from runner.cluster._remote import _on_node
from runner.cluster._ship import pack, unpack
from runner.stack.hardware import HardwareFingerprint

SUITE = Path(__file__).resolve().parents[1] / "fixtures" / "engine_suite"


def _fingerprint(**drivers: str) -> HardwareFingerprint:
    return HardwareFingerprint(cpu_model="AMD Ryzen AI 9 HX 370", cpu_cores=24,
                               memory_bytes=32 << 30, kernel="6.11.0", **drivers)


def test_labels_name_the_driver_build_in_ray_label_syntax() -> None:
    rocm = _fingerprint(amdgpu_driver="6.10.5 (dkms)", rocm_version="6.4.1-120")
    assert driver_label(rocm) == "amdgpu-6.10.5--dkms-_rocm-6.4.1-120"
    assert driver_label(_fingerprint()) == "none"
    config = make_config(device="rocm", slots=2, llm_container="llm", llm_url="http://10.0.0.2:13305/",
                         cache_dir=Path("/tmp/c"), name="lab box #3", fingerprint=rocm)
    assert config.resources() == {"trialbox": 2.0, "device:rocm": 2.0}
    assert config.labels()["trialbox-node"] == "lab-box--3"
    assert config.llm_url == "http://10.0.0.2:13305"
    other = make_config(device="rocm", slots=2, llm_container="llm", llm_url="u", cache_dir=Path("/tmp/c"),
                        fingerprint=_fingerprint(amdgpu_driver="6.12.0"))
    assert other.fingerprint_id != config.fingerprint_id and len(other.fingerprint_id) == 12


def test_bad_node_settings_are_refused() -> None:
    with pytest.raises(NodeError, match="device 'gpu' is not a device"):
        make_config(device="gpu", slots=1, llm_container="l", llm_url="u", cache_dir=Path("/tmp"))
    with pytest.raises(NodeError, match="at least 1 sandbox slot"):
        make_config(device="cpu", slots=0, llm_container="l", llm_url="u", cache_dir=Path("/tmp"))
    with pytest.raises(NodeError, match="--llm-container needs --device"):
        join("127.0.0.1:1", llm_container="llm", state_dir=Path("/tmp/never-used"))


def test_a_job_without_a_node_config_is_told_how_to_join(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NODE_CONFIG_ENV, raising=False)
    with pytest.raises(NodeError, match="not started by `trialbox node join`"):
        load_node_config()
    broken = tmp_path / "node.json"
    broken.write_text('{"name": "x"}')
    monkeypatch.setenv(NODE_CONFIG_ENV, str(broken))
    with pytest.raises(NodeError, match=f"{broken}: not a readable node config"):
        load_node_config()


def test_the_corpus_ships_by_content_and_unpacks_once(tmp_path: Path) -> None:
    first, second = pack(SUITE / "corpus", "corpus"), pack(SUITE / "corpus", "corpus")
    assert first.digest == second.digest  # same files, same name: no stale copy, no re-unpack
    folder = unpack(first, tmp_path)
    assert unpack(second, tmp_path) == folder
    shipped = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    original = sorted(str(p.relative_to(SUITE / "corpus")) for p in (SUITE / "corpus").rglob("*") if p.is_file())
    assert shipped == original
    assert (folder / "manifest.json").read_bytes() == (SUITE / "corpus" / "manifest.json").read_bytes()
    changed = tmp_path / "changed"
    changed.mkdir()
    (changed / "a.md").write_text("one")
    before = pack(changed, "corpus").digest
    (changed / "a.md").write_text("two")
    assert pack(changed, "corpus").digest != before


def test_a_simulator_on_the_controllers_llm_server_moves_to_the_nodes() -> None:
    assert _on_node("http://127.0.0.1:13305/api/v1", "http://127.0.0.1:13305", "http://n:13305") == "http://n:13305/api/v1"
    assert _on_node("https://api.example/v1", "http://127.0.0.1:13305", "http://n:13305") == "https://api.example/v1"
    assert _on_node(None, "http://127.0.0.1:13305", "http://n:13305") is None


@pytest.fixture(scope="module")
def head() -> Iterator[Cluster]:
    os.environ.update(QUIET_RAY_ENV)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    ray.init(address=cluster.address)
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def _node(name: str) -> dict | None:
    return next((n for n in ray.nodes() if n["Alive"] and n.get("Labels", {}).get("trialbox-node") == name), None)


def test_join_announces_the_node_and_leave_stops_it(head: Cluster, tmp_path: Path) -> None:
    said: list[str] = []
    state = join(head.address, device="npu", slots=2, llm_container="tbx-some-llm",
                 llm_url="http://127.0.0.1:9/", name="lab-07", state_dir=tmp_path, say=said.append)
    try:
        deadline = time.monotonic() + 60
        while _node("lab-07") is None and time.monotonic() < deadline:
            time.sleep(0.5)
        node = _node("lab-07")
        assert node is not None, "the joined node never showed up in the cluster"
        assert node["Resources"]["trialbox"] == 2 and node["Resources"]["device:npu"] == 2
        assert node["Labels"]["trialbox-device"] == "npu"
        config = load_node_config(state.config_path)
        assert node["Labels"]["trialbox-fingerprint"] == config.fingerprint_id
        assert config.llm_container == "tbx-some-llm" and config.llm_url == "http://127.0.0.1:9"
        assert any('"device:npu": 2.0' in line and "trialbox-driver=" in line for line in said), said
        with pytest.raises(NodeError, match="already a node"):
            join(head.address, device="npu", llm_container="x", llm_url="u", state_dir=tmp_path)
    finally:
        assert leave(tmp_path, say=said.append)
    deadline = time.monotonic() + 60
    while _node("lab-07") is not None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _node("lab-07") is None, "the node is still in the cluster after leave"
    assert not leave(tmp_path, say=said.append)
    assert "not a node" in said[-1]
    assert json.loads(state.config_path.read_text())["name"] == "lab-07"


def test_join_to_an_address_without_a_head_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(NodeError, match="is 127.0.0.1:1 a Ray head|did not start"):
        join("127.0.0.1:1", device="cpu", llm_container="l", llm_url="u", state_dir=tmp_path,
             timeout_s=15, node_ip="127.0.0.1")
    assert not (tmp_path / "state.json").exists()


def test_per_node_without_a_matching_node_stops_before_anything_runs(head: Cluster, tmp_path: Path) -> None:
    from runner.cluster import run_per_node
    from runner.run.errors import InfraError
    from runner.run.settings import RunSettings

    settings = RunSettings(run_id="20261130-000000-abcd", suite_paths=[SUITE / "scenarios"],
                           corpus_root=SUITE / "corpus", results_root=tmp_path)
    with pytest.raises(InfraError, match="no node matches --on device=rocm — join one"):
        asyncio.run(run_per_node(settings, head.address, {"device": "rocm"}, print))
    assert not any(tmp_path.iterdir())


def test_sigterm_stops_a_cluster_run_like_ctrl_c() -> None:
    from runner.cluster import run_blocking

    async def work() -> str:
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.sleep(30)
        return "not reached"

    with pytest.raises(KeyboardInterrupt):
        run_blocking(work())

    async def quick() -> str:
        return "done"

    assert run_blocking(quick()) == "done"
