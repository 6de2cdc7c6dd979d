"""A Lemonade Server stand-in: a small real HTTP server for the front door's tests of what the
real server cannot show — answers with planted timings (so the meter's figures can be checked
against known delays) and a count of every state-changing request that reached it (so "never
passed on" and "the token is not forwarded" can be seen). Everything the real server can answer
is tested against it (tests/containers/test_lemonade_*.py, the isolation suite's Lemonade leg).

`python tests/integration/front_door_standin.py PORT` serves what the front door and the device
check read from a real Lemonade Server, in its shapes:

- `system-info` reports an AMD GPU (a Radeon with ROCm installed) — and `health` shows the
  loaded model running on the *CPU* backend: the silent fallback of lemonade-sdk/lemonade#2799.
- chat streams a controllable answer: a user message `delay=0.2 tokens=20 gap=0.01` waits
  0.2 s before the first token, then sends 20 one-token chunks 0.01 s apart, with llama.cpp's
  `timings` and OpenAI `usage` on the last chunk; `stall=0.004` adds one pause that long
  halfway (a known slowdown of the decode, for scripts/bench-front-door's planted check). The
  plan is read from the last message only, so the messages before it can be of any size.
- every state-changing route (`load`, `unload`, `delete`, `params`, `pull`) *does* what it
  says, by counting: `GET /standin/changes` lists them, so a test sees whether one got through.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

MODEL = "Qwen3-0.6B-GGUF"
CHANGES: list[str] = []


def _plan(body: dict[str, Any]) -> tuple[float, int, float, float]:
    messages = body.get("messages") or []
    text = str(messages[-1].get("content") or "") if messages else ""  # the plan is the last one
    found = dict(re.findall(r"(delay|tokens|gap|stall)=([0-9.]+)", text))
    return (float(found.get("delay", 0.0)), int(found.get("tokens", 8)),
            float(found.get("gap", 0.0)), float(found.get("stall", 0.0)))


async def chat(request: Request) -> Response:
    body = await request.json()
    delay, tokens, gap, stall = _plan(body)
    if not body.get("stream"):
        await asyncio.sleep(delay + gap * tokens)
        return JSONResponse({"choices": [{"message": {"role": "assistant", "content": "x " * tokens}}],
                             "usage": {"prompt_tokens": 5, "completion_tokens": tokens},
                             "timings": {"prompt_ms": delay * 1000, "predicted_n": tokens,
                                         "predicted_per_second": 1 / gap if gap else 0.0}})

    async def events() -> AsyncIterator[bytes]:
        await asyncio.sleep(delay)
        for index in range(tokens):
            if index:
                await asyncio.sleep(gap + (stall if index == tokens // 2 else 0.0))
            chunk = {"choices": [{"index": 0, "delta": {"content": "x "}}]}
            yield f"data: {json.dumps(chunk)}\n\n".encode()
        last = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": tokens},
                "timings": {"prompt_ms": delay * 1000, "predicted_n": tokens,
                            "predicted_per_second": 1 / gap if gap else 0.0}}
        yield f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode()

    return StreamingResponse(events(), media_type="text/event-stream")


async def embeddings(request: Request) -> Response:
    """One small vector per input, as Lemonade's embeddings route answers."""
    given = (await request.json()).get("input")
    texts = [given] if isinstance(given, str) else list(given or [])
    return JSONResponse({"object": "list", "model": "nomic-embed-text-v2-moe-GGUF",
                         "data": [{"object": "embedding", "index": i, "embedding": [0.5] * 4}
                                  for i in range(len(texts))],
                         "usage": {"prompt_tokens": 2 * len(texts), "total_tokens": 2 * len(texts)}})


async def health(_: Request) -> Response:
    return JSONResponse({"status": "ok", "version": "9.1.0", "model_loaded": MODEL,
                         "all_models_loaded": [{"model_name": MODEL, "type": "llm",
                                                "recipe": "llamacpp",
                                                "recipe_options": {"ctx_size": 4096,
                                                                   "llamacpp_backend": "cpu"}}]})


async def system_info(_: Request) -> Response:
    return JSONResponse({
        "OS Version": "Linux 6.8", "Processor": "AMD Ryzen AI 9 HX 370",
        "devices": {"cpu": {"name": "AMD Ryzen AI 9 HX 370", "available": True},
                    "amd_igpu": {"name": "AMD Radeon 890M", "available": True},
                    "amd_dgpu": [], "npu": {"available": False}},
        "recipes": {"llamacpp": {"default_backend": "rocm",
                                 "backends": {"rocm": {"state": "installed"},
                                              "cpu": {"state": "installed"}}}},
    })


async def change(request: Request) -> Response:
    CHANGES.append(request.url.path)
    return JSONResponse({"status": "success", "done": request.url.path})


async def changes(_: Request) -> Response:
    return JSONResponse(CHANGES)


async def live(_: Request) -> Response:
    return JSONResponse({"status": "ok", "at": time.time()})


def app() -> Starlette:
    routes = [Route("/live", live), Route("/standin/changes", changes)]
    for prefix in ("/api/v1", "/v1", "/api/v0"):
        routes += [Route(f"{prefix}/chat/completions", chat, methods=["POST"]),
                   Route(f"{prefix}/embeddings", embeddings, methods=["POST"]),
                   Route(f"{prefix}/health", health), Route(f"{prefix}/system-info", system_info),
                   Route(f"{prefix}/live", live)]
        routes += [Route(f"{prefix}/{name}", change, methods=["POST"])
                   for name in ("load", "unload", "delete", "params", "pull")]
    return Starlette(routes=routes)


if __name__ == "__main__":
    host = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
    uvicorn.run(app(), host=host, port=int(sys.argv[1]), log_level="warning")
