"""The decisions of a cluster run that need no node: how many jobs wait for a slot, the
admission that lets exactly the cluster's slots run (past 16), when the headline says nodes
differ, and which nodes' served models refuse a resume. Real objects throughout (a real
ClusterConversations admitting, a real RunWriter in a temporary folder); no cluster needed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from runner.cluster._conversations import ClusterConversations
from runner.cluster._node import NodeConfig, make_config
from runner.cluster._run import engine_admits, model_changes, read_plan, record_nodes
from runner.records.status import Status
from runner.report import RunConfig, RunWriter, ScenarioResult
from runner.report._identity import served_model_of
from runner.report._models import NodeIdentity, node_differences
from runner.run.errors import UsageError
from runner.run.settings import RunSettings, new_run_id
from runner.stack.hardware import HardwareFingerprint

SUITE = Path(__file__).resolve().parents[1] / "fixtures" / "engine_suite"


def _health(checkpoint: str) -> dict[str, object]:
    """An llm-cpu /api/v1/health reply serving `checkpoint` under GAIA's default name."""
    return {"status": "ok", "model_loaded": "Gemma-4-E4B-it-GGUF", "server": {"name": "trialbox-llm-cpu"},
            "all_models_loaded": [{"model_name": "Gemma-4-E4B-it-GGUF", "type": "llm",
                                   "checkpoint": f"/models/{checkpoint}"}]}


SMOL_HEALTH = _health("SmolLM2-135M-Instruct.Q4_1.gguf")
SMOL = served_model_of(SMOL_HEALTH)
OTHER_HEALTH = _health("Qwen3-0.6B.Q8_0.gguf")


def _fingerprint(kernel: str = "6.11.0") -> HardwareFingerprint:
    return HardwareFingerprint(cpu_model="AMD Ryzen AI 9 HX 370", cpu_cores=24,
                               memory_bytes=32 << 30, kernel=kernel)


def _node(name: str, *, kernel: str = "6.11.0", device: str = "cpu",
          served: str | None = SMOL) -> NodeIdentity:
    config = _config(name, kernel=kernel, device=device)
    return NodeIdentity(name=name, node_id=f"id-{name}", host=f"host-{name}", device=device,
                        fingerprint_id=config.fingerprint_id, driver=config.driver,
                        hardware=config.fingerprint.model_dump(mode="json"), served_model=served)


def _config(name: str, *, kernel: str = "6.11.0", device: str = "cpu") -> NodeConfig:
    return make_config(device=device, slots=1, llm_container="llm", llm_url="http://10.0.0.2:13305",
                       cache_dir=Path("/tmp/cache"), name=name, fingerprint=_fingerprint(kernel))


def _row(scenario: str, node: NodeIdentity | None) -> ScenarioResult:
    return ScenarioResult(id=scenario, status=Status.NOT_JUDGED, node=node)


def _settings(tmp_path: Path) -> RunSettings:
    return RunSettings(run_id=new_run_id(), suite_paths=[SUITE / "scenarios"],
                       corpus_root=SUITE / "corpus", results_root=tmp_path)


def test_the_engine_lets_every_planned_job_wait_for_a_slot() -> None:
    # Past RunSettings' 16: 5 nodes × 8 slots have 40 jobs running at once.
    assert engine_admits(40) == 40
    assert engine_admits(3) == 3
    assert engine_admits(0) == 1


def test_admission_runs_exactly_the_clusters_slots_past_16(tmp_path: Path) -> None:
    """24 slots: 24 jobs are admitted at once, the 25th waits until one ends."""
    conversations = ClusterConversations("unused", _settings(tmp_path))
    conversations._capacity, conversations._polled_at = 24, time.monotonic()

    async def scenario() -> tuple[int, bool, bool]:
        admitted = await asyncio.gather(*(conversations._admit() for _ in range(24)))
        assert admitted == [None] * 24
        waiting = asyncio.create_task(conversations._admit())
        await asyncio.sleep(0.3)
        blocked = not waiting.done()
        conversations._in_flight -= 1  # as converse's finally when a job ends
        conversations._freed.set()
        await asyncio.wait_for(waiting, 1.0)
        return conversations._in_flight, blocked, waiting.result() is None

    in_flight, blocked, admitted_after = asyncio.run(scenario())
    assert (in_flight, blocked, admitted_after) == (24, True, True)


def test_the_headline_says_nothing_when_nodes_are_alike() -> None:
    rows = [_row("a", _node("alpha")), _row("b", _node("beta")), _row("c", None)]
    assert node_differences(rows) is None  # two names, one machine type and one model
    assert node_differences([_row("a", None)]) is None  # a local run


def test_the_headline_names_each_difference_and_its_nodes() -> None:
    rows = [_row("a", _node("alpha")), _row("b", _node("beta", kernel="6.14.0")),
            _row("c", _node("gamma", device="rocm", served="Gemma-4 by Lemonade Server 9.1.4"))]
    line = node_differences(rows)
    assert line is not None and line.startswith("nodes differ: ")
    assert "hardware" in line and "on beta" in line
    assert "device cpu on alpha/beta, rocm on gamma" in line
    assert f"served model Gemma-4 by Lemonade Server 9.1.4 on gamma, {SMOL} on alpha/beta" in line
    only_model = [_row("a", _node("alpha")), _row("b", _node("beta", served=None))]
    assert node_differences(only_model) == (
        f"nodes differ: served model {SMOL} on alpha, unknown on beta — the figures mix them; "
        "`--per-node` runs and compares each node")


def _writer(tmp_path: Path, rows: list[ScenarioResult], served: dict[str, str | None]) -> RunWriter:
    config = RunConfig(extra={"cluster": {"served_models": served}})
    return RunWriter(tmp_path, run_id="20260101-000000-abcd", config=config, results=rows)


def test_a_resume_on_the_same_models_is_not_refused(tmp_path: Path) -> None:
    writer = _writer(tmp_path, [_row("a", _node("alpha"))], {"alpha": SMOL, "beta": SMOL})
    assert SMOL == "SmolLM2-135M-Instruct Q4_1 by trialbox llm-cpu"
    assert model_changes(writer, [(_config("alpha"), SMOL_HEALTH), (_config("beta"), SMOL_HEALTH)]) == []
    # A node whose server does not say (down, or an error) is its health probe's to report.
    assert model_changes(writer, [(_config("alpha"), {"error": "ConnectError"})]) == []


def test_a_resume_names_each_node_now_serving_another_model(tmp_path: Path) -> None:
    writer = _writer(tmp_path, [_row("a", _node("alpha"))], {"alpha": SMOL})
    changes = model_changes(writer, [(_config("alpha"), SMOL_HEALTH), (_config("beta"), OTHER_HEALTH)])
    assert changes == [f"node beta now serves {served_model_of(OTHER_HEALTH)}; this run started with {SMOL}"]


def test_the_scorecard_describes_alike_nodes_once_and_unlike_ones_each(tmp_path: Path) -> None:
    config = RunConfig(hardware={"cpu_model": "the controller's"})
    record_nodes(config, [(_config("alpha"), SMOL_HEALTH), (_config("beta"), SMOL_HEALTH)], 40)
    assert config.hardware == _fingerprint().model_dump(mode="json")
    assert (config.device, config.concurrency) == ("cpu", 40)
    unlike = RunConfig()
    record_nodes(unlike, [(_config("alpha"), SMOL_HEALTH),
                          (_config("beta", kernel="6.14.0", device="rocm"), {})], 2)
    assert set(unlike.hardware["per_node"]) == {"alpha", "beta"}
    assert unlike.device == "cpu + rocm"
    assert unlike.served_model == f"{SMOL} + unknown"


def test_per_node_resume_of_a_folder_of_no_per_node_run_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"not a folder of a --per-node run .* resume it without --per-node"):
        read_plan(tmp_path)
    (tmp_path / "per-node.json").write_text("{")
    with pytest.raises(UsageError, match="not a readable --per-node plan"):
        read_plan(tmp_path)
