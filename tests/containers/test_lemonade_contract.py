"""The real Lemonade Server's contract, as trialbox and GAIA use it: every route asked of
`trialbox/lemonade:dev` (Debian's lemonade-server and llama.cpp), directly and through the front
door, with the fields our code reads checked in Lemonade's own answers.

What the server must keep (or the AMD user's first run breaks): GAIA's model names served from
the bundled files; `health`'s loaded models with their window; `system-info`'s devices and the
llama.cpp backend (the device truth reads them); `pull` refused offline; streamed chat with
llama.cpp's `timings`; 384-d embeddings in GAIA's batches; `stats` and `/metrics`. What the door
must keep: a sandbox's load that the running model satisfies is answered without touching
Lemonade, any other state change needs the token, and repeatable decoding is forced there.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import docker
import httpx
import pytest
from docker.models.containers import Container
from lemonade_layout import LemonadeLayout, loaded_models

from runner.conversation import LocalSimulator
from runner.stack.hardware import served_on_from
from runner.stack.labels import RUN_LABEL
from runner.stack.lemonade_container import CPU_THREADS_ENV, start_lemonade
from runner.stack.lemonade_image import LEMONADE_VERSION

CHAT = "Gemma-4-E4B-it-GGUF"
EMBEDDER = "user.embeddinggemma-300m-GGUF"  # GAIA 0.25.1's name; Lemonade reports it unprefixed
GAIA_CHAT_LOAD = {"model_name": CHAT, "ctx_size": 65536,
                  "llamacpp_args": "--parallel 2 --kv-unified --cache-ram 0 --slot-prompt-similarity 0.5"}


def api(layout: LemonadeLayout, door: bool = True) -> str:
    return f"{layout.door_url if door else layout.lemonade_url}/api/v1"


def test_live_health_and_version_are_lemonades(real_lemonade: LemonadeLayout) -> None:
    assert httpx.get(f"{real_lemonade.lemonade_url}/live", timeout=5).json() == {"status": "ok"}
    health = httpx.get(f"{api(real_lemonade)}/health", timeout=5).json()
    assert health["status"] == "ok" and health["version"] == LEMONADE_VERSION
    loaded = {e["model_name"]: e for e in health["all_models_loaded"]}
    assert set(loaded) == {CHAT, EMBEDDER.removeprefix("user.")}
    chat = loaded[CHAT]
    # What the served-model line reads: the bundled file behind GAIA's name, at GAIA's window.
    assert chat["type"] == "llm" and chat["checkpoint"] == "/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert chat["recipe_options"]["ctx_size"] == 65536
    assert chat["recipe_options"]["llamacpp_backend"] == "system"
    assert chat["device"] == "gpu"  # Lemonade's own field lies on the CPU: never read it as truth


def _lemonade_alone(layout: LemonadeLayout, threads: str) -> Container:
    """The suite's Lemonade image started as trialbox starts it (start_lemonade's hardening),
    with `LEMONADE_CPU_THREADS=threads`, on no network at all: bound to loopback inside."""
    return start_lemonade(f"tbx-{layout.tag}-threads-{uuid.uuid4().hex[:6]}", {RUN_LABEL: layout.tag},
                          "none", image=layout.lemonade.attrs["Config"]["Image"], wait=False,
                          network_mode="none",
                          environment={"LEMONADE_CPU_THREADS": threads, "LEMONADE_HOST": "127.0.0.1"}
                          ).container


def test_by_default_the_chat_model_runs_on_llama_cpps_own_threads(real_lemonade: LemonadeLayout) -> None:
    logs = real_lemonade.lemonade.logs().decode()
    assert "llamacpp_args=--parallel 2 --kv-unified" in logs, logs[-2000:]


def test_auto_threads_decode_on_one_cpu_fewer_than_prompts(real_lemonade: LemonadeLayout) -> None:
    """start-lemond's `auto`: llama.cpp's decode threads meet at a barrier per token, so on a
    CPU shared with the Agent UIs they get one CPU fewer than prompts do."""
    container = _lemonade_alone(real_lemonade, "auto")
    try:
        cpus = int(container.exec_run(["nproc"]).output)
        wanted = f"llamacpp_args=--threads {max(1, cpus - 1)} --threads-batch {cpus} --parallel 2"
        deadline = time.monotonic() + 120
        while wanted not in (logs := container.logs().decode()) and time.monotonic() < deadline:
            container.reload()
            assert container.status == "running", logs[-2000:]
            time.sleep(0.5)
        assert wanted in logs, logs[-2000:]
    finally:
        container.remove(force=True)


def test_the_stacks_thread_setting_reaches_every_lemonade_trialbox_starts(
        real_lemonade: LemonadeLayout, monkeypatch: pytest.MonkeyPatch) -> None:
    """compose.lemonade.yaml passes TRIALBOX_LEMONADE_CPU_THREADS on; `trialbox ab` and
    scripts/bench-servers start Lemonade through start_lemonade, which must do the same."""
    monkeypatch.setenv(CPU_THREADS_ENV, "1,2")
    server = start_lemonade(f"tbx-{real_lemonade.tag}-threads", {RUN_LABEL: real_lemonade.tag},
                            real_lemonade.stack_network, wait=False)
    try:
        assert "LEMONADE_CPU_THREADS=1,2" in server.container.attrs["Config"]["Env"]
    finally:
        server.container.remove(force=True)


@pytest.mark.parametrize("setting", ["two", "0,2", "1"])
def test_a_wrong_thread_setting_stops_the_container_before_lemond_starts(
        real_lemonade: LemonadeLayout, setting: str) -> None:
    container = _lemonade_alone(real_lemonade, setting)
    try:
        assert container.wait(timeout=60)["StatusCode"] == 2
        logs = container.logs().decode()
        assert f"LEMONADE_CPU_THREADS={setting}: expected llama.cpp, auto, or DECODE,PROMPT" in logs
        assert "config.json" not in logs and "lemond" not in logs.replace("start-lemond", "")
    finally:
        container.remove(force=True)


def test_the_local_simulator_writes_with_the_chat_model_not_the_one_loaded_last(
        real_lemonade: LemonadeLayout) -> None:
    """Lemonade's `model_loaded` names the model loaded last — GAIA's embedder, loaded after its
    chat model — and a chat request to it is refused (HTTP 400): the simulated user must ask
    the chat model `all_models_loaded` lists. The layout is shared, so the test lays the trap
    itself (any earlier chat would make the chat model the last one used)."""
    embedded = httpx.post(f"{api(real_lemonade, door=False)}/embeddings", timeout=60,
                          json={"model": EMBEDDER, "input": ["a sentence GAIA would index"]})
    assert embedded.status_code == 200, embedded.text
    health = httpx.get(f"{api(real_lemonade)}/health", timeout=5).json()
    assert health["model_loaded"] == EMBEDDER.removeprefix("user.")  # the trap, as it is
    simulator = LocalSimulator(api(real_lemonade))
    assert asyncio.run(simulator.ensure_model()) == CHAT


def test_models_carry_gaias_names_and_labels(real_lemonade: LemonadeLayout) -> None:
    models = {m["id"]: m for m in httpx.get(f"{api(real_lemonade)}/models", timeout=5).json()["data"]}
    assert models[CHAT]["labels"] == ["chat"] and models[CHAT]["downloaded"] is True
    assert models["embeddinggemma-300m-GGUF"]["labels"] == ["embeddings"]
    assert {m["recipe"] for m in models.values()} == {"llamacpp"}


def test_system_info_tells_the_device_truth_on_the_cpu(real_lemonade: LemonadeLayout) -> None:
    info = httpx.get(f"{api(real_lemonade)}/system-info", timeout=10).json()
    assert info["devices"]["cpu"]["available"] is True
    assert info["recipes"]["llamacpp"]["default_backend"] == "system"
    health = httpx.get(f"{api(real_lemonade)}/health", timeout=5).json()
    for asked in ("cpu", "rocm", "vulkan"):
        served = served_on_from(asked, health, info)
        assert served.served_on == "cpu", served
        assert any("backends.system.devices=cpu" in line for line in served.evidence), served
        assert served.fell_back == (asked != "cpu")


def test_a_sandboxs_load_is_answered_by_the_door_and_changes_nothing(
        real_lemonade: LemonadeLayout) -> None:
    before = loaded_models(real_lemonade.health())
    # GAIA's own loads at every Agent UI start: satisfied by what runs, so answered at the door.
    for body in (GAIA_CHAT_LOAD, {"model_name": EMBEDDER}):
        reply = httpx.post(f"{api(real_lemonade)}/load", json=body, timeout=30)
        assert reply.status_code == 200 and reply.json()["started"] is False, reply.text
    # A load asking more than runs, and every other state change, needs the admin token.
    bigger = httpx.post(f"{api(real_lemonade)}/load", json={**GAIA_CHAT_LOAD, "ctx_size": 131072},
                        timeout=30)
    assert bigger.status_code == 403 and bigger.json()["error"]["code"] == "admin_token_required"
    for route in ("pull", "delete", "params"):
        refused = httpx.post(f"{api(real_lemonade)}/{route}", json={"model_name": CHAT}, timeout=30)
        assert refused.status_code == 403, (route, refused.text)
    unload = httpx.post(f"{api(real_lemonade)}/unload", json={"model_name": CHAT}, timeout=30)
    assert unload.status_code == 200 and unload.json()["kept_resident"] is True
    assert loaded_models(real_lemonade.health()) == before  # same processes, same windows


def test_the_admin_may_unload_and_load_through_the_door(real_lemonade: LemonadeLayout) -> None:
    admin = {"Authorization": f"Bearer {real_lemonade.admin_token}"}
    name = EMBEDDER.removeprefix("user.")
    try:
        gone = httpx.post(f"{api(real_lemonade)}/unload", json={"model_name": name}, headers=admin,
                          timeout=60)
        assert gone.status_code == 200, gone.text
        assert name not in loaded_models(real_lemonade.health())
    finally:
        back = httpx.post(f"{api(real_lemonade)}/load", json={"model_name": name}, headers=admin,
                          timeout=120)
        assert back.status_code == 200 and back.json()["status"] == "success", back.text
    assert name in loaded_models(real_lemonade.health())


def test_pull_offline_is_refused_with_a_clear_line(real_lemonade: LemonadeLayout) -> None:
    admin = {"Authorization": f"Bearer {real_lemonade.admin_token}"}
    reply = httpx.post(f"{api(real_lemonade)}/pull", json={"model_name": "Qwen3-0.6B-GGUF"},
                       headers=admin, timeout=30)
    assert reply.status_code == 400, reply.text
    assert reply.json()["code"] == "lemond_offline" and "offline" in reply.json()["error"]


def test_streamed_chat_carries_llamacpp_timings_and_is_metered(real_lemonade: LemonadeLayout) -> None:
    body = {"model": CHAT, "stream": True, "max_tokens": 12,
            "messages": [{"role": "user", "content": "Name three colours."}]}
    chunks = []
    with httpx.stream("POST", f"{api(real_lemonade)}/chat/completions", json=body, timeout=60) as reply:
        assert reply.status_code == 200
        for line in reply.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line.removeprefix("data: ")))
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    assert text.strip()
    timed = [c for c in chunks if "timings" in c]
    assert timed and timed[-1]["timings"]["predicted_n"] >= 1
    assert timed[-1]["timings"]["predicted_per_second"] > 0
    # Lemonade's streamed chunks name the file, not the model asked for: nothing may read them
    # as the model's name (the served-model line comes from health).
    assert {c.get("model") for c in chunks} <= {CHAT, "/models/SmolLM2-135M-Instruct.Q4_1.gguf"}
    # The door metered it on its own clock (this test reads its own records, no token needed).
    records = httpx.get(f"{real_lemonade.door_url}/trialbox/meter", timeout=5).json()["records"]
    streamed = [r for r in records if r["streamed"] and r["route"].endswith("chat/completions")]
    assert streamed and streamed[-1]["status"] == 200
    assert streamed[-1]["time_to_first_token_s"] > 0 and streamed[-1]["self_reported"] is not None


def test_embeddings_in_gaias_batches(real_lemonade: LemonadeLayout) -> None:
    # GAIA sends at most 25 chunks per request; its chunks run to a few hundred tokens.
    chunk = " ".join(["The quarterly budget for regional travel was revised in May."] * 20)
    reply = httpx.post(f"{api(real_lemonade)}/embeddings",
                       json={"model": EMBEDDER, "input": [f"{i}. {chunk}" for i in range(25)]},
                       timeout=120)
    assert reply.status_code == 200, reply.text
    vectors = [item["embedding"] for item in reply.json()["data"]]
    assert len(vectors) == 25 and {len(v) for v in vectors} == {384}
    norm = sum(x * x for x in vectors[0]) ** 0.5
    assert norm == pytest.approx(1.0, abs=1e-3)


def test_inputs_past_the_bundled_embedders_window_are_cut_at_the_door(
        real_lemonade: LemonadeLayout) -> None:
    """GAIA chunks for EmbeddingGemma's 2048 tokens; MiniLM's llama-server refuses an input past
    its window. Straight to Lemonade such a chunk fails (the check can fail); through the door
    it is cut to MiniLM's 256 word pieces, as llm-cpu and sentence-transformers cut it."""
    long_chunk = " ".join(f"ledger line {n}: 4,{n:03d}.50 EUR" for n in range(150))  # ~1,300 pieces
    body = {"model": EMBEDDER, "input": [long_chunk, "short text"]}
    direct = httpx.post(f"{api(real_lemonade, door=False)}/embeddings", json=body, timeout=120)
    assert direct.status_code == 500 and "too large" in direct.text, direct.text[:300]
    through = httpx.post(f"{api(real_lemonade)}/embeddings", json=body, timeout=120)
    assert through.status_code == 200, through.text[:300]
    vectors = [item["embedding"] for item in through.json()["data"]]
    assert [len(v) for v in vectors] == [384, 384]
    # Lemonade's tokenizer answers for whichever model served last: after a chat it is the chat
    # model's, whose ids would be invalid for the embedder. The door still cuts by the
    # embedder's word pieces (not by characters, which keep a third as much): the same vector.
    httpx.post(f"{api(real_lemonade)}/chat/completions", timeout=60, json={
        "model": CHAT, "max_tokens": 2, "messages": [{"role": "user", "content": "Hi"}]})
    after_chat = httpx.post(f"{api(real_lemonade)}/embeddings", json=body, timeout=120)
    assert after_chat.status_code == 200, after_chat.text[:300]
    assert [len(item["embedding"]) for item in after_chat.json()["data"]] == [384, 384]
    assert after_chat.json()["data"][0]["embedding"] == pytest.approx(vectors[0], abs=1e-5)
    # The short input went as text, untouched: its vector is the one Lemonade gives it alone.
    alone = httpx.post(f"{api(real_lemonade, door=False)}/embeddings", timeout=60,
                       json={"model": EMBEDDER, "input": ["short text"]}).json()["data"][0]["embedding"]
    assert vectors[1] == pytest.approx(alone, abs=1e-5)


def test_stats_and_metrics_report_the_last_request(real_lemonade: LemonadeLayout) -> None:
    httpx.post(f"{api(real_lemonade)}/chat/completions", timeout=60, json={
        "model": CHAT, "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]})
    stats = httpx.get(f"{api(real_lemonade)}/stats", timeout=5).json()
    assert stats["output_tokens"] >= 1 and stats["time_to_first_token"] > 0
    metrics = httpx.get(f"{real_lemonade.door_url}/metrics", timeout=5).text
    assert f'lemonade_server_info{{version="{LEMONADE_VERSION}"}} 1' in metrics


def test_repeatable_decoding_is_forced_on_the_real_server(real_lemonade: LemonadeLayout) -> None:
    """The door's per-client lease makes Lemonade decode greedily with one seed: the same
    request twice gives the same answer, and the meter labels both `repeatable`. Sampled, a
    temperature of 1.5 with no seed gives different answers, so the check can fail."""
    admin = {"Authorization": f"Bearer {real_lemonade.admin_token}"}
    body = {"model": CHAT, "max_tokens": 24, "temperature": 1.5,
            "messages": [{"role": "user", "content": "Write one sentence about rivers."}]}

    def answer() -> str:
        reply = httpx.post(f"{api(real_lemonade)}/chat/completions", json=body, timeout=60)
        assert reply.status_code == 200, reply.text
        return str(reply.json()["choices"][0]["message"]["content"])

    sampled = {answer() for _ in range(3)}
    assert len(sampled) > 1, "sampled decoding repeated itself: the check below could not fail"
    # This test's address as the door sees it: the host's, on the stack network (its gateway).
    network = docker.from_env().networks.get(real_lemonade.stack_network)
    address = network.attrs["IPAM"]["Config"][0]["Gateway"]
    lease = httpx.post(f"{real_lemonade.door_url}/trialbox/decoding", headers=admin, timeout=5,
                       json={"client": address, "mode": "repeatable", "seed": 7, "ttl_s": 60})
    assert lease.status_code == 200, lease.text
    since = time.time()
    try:
        assert len({answer() for _ in range(3)}) == 1
    finally:
        httpx.post(f"{real_lemonade.door_url}/trialbox/decoding", headers=admin, timeout=5,
                   json={"client": address, "mode": "sampled"})
    records = httpx.get(f"{real_lemonade.door_url}/trialbox/meter", params={"since": since},
                        timeout=5).json()["records"]
    assert [r["decoding"] for r in records] == ["repeatable"] * 3, records
