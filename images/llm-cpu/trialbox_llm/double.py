"""An instant double of the model behind the server, for measuring the harness alone.

`python -m trialbox_llm --double` serves the same Lemonade API through the same routes, but each
"model" is a small in-process stand-in for llama.cpp's own HTTP server (the one the routes
proxy to): chat answers a fixed text at once, embeddings are fixed unit vectors, `/tokenize`
counts words. Nothing is loaded, so it starts in well under a second and costs no CPU while the
harness alone is measured (scripts/bench-harness).

It must never be mistaken for a model: `/health` names it `trialbox-llm-double`, its `engine`
and `note` say so, and every chat answer is the same fixed text (`FIXED_ANSWER`).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from trialbox_llm.backend import LlamaBackend, LoadedModel, free_loopback_port
from trialbox_llm.catalog import ModelKind, ModelSpec
from trialbox_llm.llamacpp_args import LlamaArgs
from trialbox_llm.schemas import ServerIdentity

#: What `/health` says instead of the model server's identity.
DOUBLE_NAME = "trialbox-llm-double"
DOUBLE_ENGINE = "instant double (no model: fixed answers, no llama.cpp)"
DOUBLE_NOTE = (
    "NOT A MODEL: trialbox's instant LLM double for harness benchmarks (scripts/bench-harness). "
    "Every chat answer is the same fixed text and embeddings are fixed vectors; no result "
    "obtained against it says anything about a model."
)
FIXED_ANSWER = "This is a fixed answer from trialbox's instant LLM double, not from a model."
#: The fixed answer's size in tokens, as reported in `usage` and `timings`.
FIXED_ANSWER_TOKENS = 16
#: MiniLM's vector size: GAIA's RAG stores vectors of the embedder's width.
EMBEDDING_DIMENSIONS = 384
#: What the double reports as each model's window and slot count (llama.cpp's `/slots`).
DOUBLE_CTX = 65536
DOUBLE_SLOTS = 8


def identity(version: str, lemonade_api: str) -> ServerIdentity:
    """The double's `/health` identity: the same API level (GAIA checks it), another name."""
    return ServerIdentity(name=DOUBLE_NAME, version=version, engine=DOUBLE_ENGINE,
                          lemonade_api=lemonade_api, note=DOUBLE_NOTE)


def _words(text: str) -> int:
    return max(1, len(text.split()))


def _prompt_tokens(body: dict[str, Any]) -> int:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return 0
    contents = [str(m.get("content") or "") for m in messages if isinstance(m, dict)]
    return sum(_words(text) for text in contents)


def _timings(prompt_tokens: int) -> dict[str, float | int]:
    # Zero-duration timings in llama.cpp's shape, so the server's /stats stays well-formed.
    return {"prompt_n": prompt_tokens, "prompt_ms": 0.0, "predicted_n": FIXED_ANSWER_TOKENS,
            "predicted_ms": 0.0, "predicted_per_second": 0.0}


def _completion(body: dict[str, Any], model: str) -> dict[str, Any]:
    prompt = _prompt_tokens(body)
    return {
        "id": "chatcmpl-double", "object": "chat.completion", "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": FIXED_ANSWER}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": FIXED_ANSWER_TOKENS,
                  "total_tokens": prompt + FIXED_ANSWER_TOKENS},
        "timings": _timings(prompt),
    }


async def _stream(body: dict[str, Any], model: str) -> AsyncIterator[bytes]:
    base = {"id": "chatcmpl-double", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}
    first = {**base, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                         "content": FIXED_ANSWER},
                                  "finish_reason": None}]}
    prompt = _prompt_tokens(body)
    last = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": FIXED_ANSWER_TOKENS,
                      "total_tokens": prompt + FIXED_ANSWER_TOKENS},
            "timings": _timings(prompt)}
    for chunk in (first, last):
        yield f"data: {json.dumps(chunk)}\n\n".encode()
    yield b"data: [DONE]\n\n"


def upstream_app(spec: ModelSpec) -> Starlette:
    """The routes of llama.cpp's server that trialbox_llm.routes calls, answered at once."""

    async def chat(request: Request) -> Response:
        body = await request.json()
        if body.get("stream"):
            return StreamingResponse(_stream(body, spec.name), media_type="text/event-stream")
        return JSONResponse(_completion(body, spec.name))

    async def embeddings(request: Request) -> Response:
        body = await request.json()
        raw = body.get("input")
        items = raw if isinstance(raw, list) else [raw]
        vector = [1.0] + [0.0] * (EMBEDDING_DIMENSIONS - 1)  # unit length, as MiniLM's are
        data = [{"object": "embedding", "index": i, "embedding": vector}
                for i in range(len(items))]
        tokens = sum(_words(str(item)) for item in items)
        return JSONResponse({"object": "list", "model": spec.name, "data": data,
                             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    async def tokenize(request: Request) -> Response:
        body = await request.json()
        count = _words(str(body.get("content") or ""))
        return JSONResponse({"tokens": list(range(1, count + 1))})

    async def slots(_: Request) -> Response:
        return JSONResponse([{"id": i, "n_ctx": DOUBLE_CTX} for i in range(DOUBLE_SLOTS)])

    async def models(_: Request) -> Response:
        return JSONResponse({"data": [{"id": spec.name,
                                       "meta": {"n_ctx_train": spec.max_context_window}}]})

    return Starlette(routes=[
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/embeddings", embeddings, methods=["POST"]),
        Route("/tokenize", tokenize, methods=["POST"]),
        Route("/slots", slots, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
    ])


class _ThreadServer:
    """One uvicorn server on a loopback port, in a thread (where xllamacpp runs its own)."""

    def __init__(self, app: Starlette, port: int) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                access_log=False, lifespan="off")
        # uvicorn installs signal handlers only in the main thread: this one leaves them alone.
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=lambda: asyncio.run(self.server.serve()),
                                       name=f"double-{port}", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the instant double could not listen on 127.0.0.1:{port}")
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)


class DoubleBackend(LlamaBackend):
    """LlamaBackend whose models are instant stand-ins: same load rules, no model files."""

    def check_files(self) -> None:
        """The double reads no model file."""

    def served_model(self, spec: ModelSpec) -> str:
        # Reports read the served model from /health: it must name the double, never a model.
        return f"{DOUBLE_NAME} (no model; stands in for {spec.name})"

    def is_downloaded(self, spec: ModelSpec) -> bool:
        return True  # nothing to download: a client must not try to pull a model for it

    def _start(self, spec: ModelSpec, loaded_as: str, ctx: int, args: LlamaArgs) -> LoadedModel:
        port = free_loopback_port()
        server = _ThreadServer(upstream_app(spec), port)
        model = LoadedModel(spec, loaded_as, ctx, port, args, server)
        model.context_per_request = DOUBLE_CTX if spec.kind is ModelKind.CHAT else ctx
        model.slot_count = DOUBLE_SLOTS if spec.kind is ModelKind.CHAT else 1
        model.trained_context = spec.max_context_window
        return model

    @staticmethod
    def _stop(model: LoadedModel) -> None:
        server = model.server
        model.server = None
        if isinstance(server, _ThreadServer):
            server.stop()
