"""The LLM's front door for a real Lemonade Server: one policy point and one meter, whatever serves.

`python -m trialbox_llm.front_door --upstream http://lemonade:13305 [--host H] [--port P]`

Under `--device rocm|npu` the sandboxes do not reach Lemonade itself: this pass-through proxy
is the only LLM endpoint on their networks (compose/compose.rocm.yaml, compose.npu.yaml), and
Lemonade sits behind it on the stack network. It applies what llm-cpu applies to itself:

- inference (chat/completions, completions, responses, embeddings, reranking) and status
  (health, models, system-info, stats, live) pass, byte for byte, streams included; chat
  requests are metered per client (`meter`), so ROCm and NPU runs are measured exactly as CPU
  runs are;
- state-changing routes need the admin token (`admin.AdminGuard`, the same rules): a `load`
  the running model already satisfies is answered here as a success (GAIA loads at every
  start and must keep working), an `unload` is answered "kept resident" (it would cut off the
  other sandboxes), and `pull`, `delete`, `params`, `install`, `uninstall` or any other
  non-GET route are refused with 403 unless the token comes with them. The token is never
  passed on to Lemonade.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from trialbox_llm.admin import (
    AdminGuard,
    AdminRequiredError,
    AdminTokenError,
    token_from_environment,
)
from trialbox_llm.meter import METER_PATH, Meter, Timing, client_of, meter_route, split_lines
from trialbox_llm.routes import API_PREFIXES, UNLOAD_NOTE

log = logging.getLogger("trialbox_llm.front_door")

_TIMEOUT = httpx.Timeout(connect=10.0, read=None, write=60.0, pool=None)
#: Routes that pass without a token (after the API prefix).
METERED = frozenset({"chat/completions", "completions", "responses", "embeddings", "reranking"})
PASSING = METERED | frozenset({"embeddings", "reranking", "health", "models", "system-info",
                               "stats", "live"})
#: Headers not passed on: hop-by-hop ones, the length (re-computed) and the admin token.
_DROPPED = frozenset({"host", "content-length", "connection", "keep-alive", "transfer-encoding",
                      "te", "trailer", "upgrade", "proxy-authorization", "authorization"})


@dataclass
class FrontDoor:
    """The proxy's state: where Lemonade is, who is admin, the meter."""

    upstream: str
    admin: AdminGuard = field(default_factory=AdminGuard)
    meter: Meter = field(default_factory=Meter)
    http: httpx.AsyncClient = field(default_factory=lambda: httpx.AsyncClient(timeout=_TIMEOUT))


def split_route(path: str) -> tuple[str, str]:
    """(`/api/v1`, `chat/completions`) for `/api/v1/chat/completions`; ('', path) otherwise."""
    for prefix in API_PREFIXES:
        if path.startswith(prefix + "/"):
            return prefix, path[len(prefix) + 1:]
    return "", path.lstrip("/")


def _headers(request: Request) -> dict[str, str]:
    return {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED}


def _error(status: int, message: str, type_: str, code: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": type_, "code": code}}, status)


async def _load_is_satisfied(door: FrontDoor, prefix: str, body: dict[str, Any]) -> str | None:
    """The loaded model's name when Lemonade already runs what this load asks, else None."""
    name = body.get("model_name") or body.get("model")
    if not isinstance(name, str):
        return None
    health = await door.http.get(f"{door.upstream}{prefix or '/api/v1'}/health")
    if health.status_code != 200:
        return None
    for entry in health.json().get("all_models_loaded") or []:
        if not isinstance(entry, dict) or entry.get("model_name") != name:
            continue
        running = (entry.get("recipe_options") or {}).get("ctx_size")
        asked = body.get("ctx_size")
        if asked is None or (isinstance(running, int) and isinstance(asked, int)
                             and asked <= running):
            return name
    return None


async def _policy(door: FrontDoor, request: Request, prefix: str, route: str,
                  raw: bytes) -> Response | None:
    """An answer given here instead of Lemonade's (a refusal or a no-op), or None to pass."""
    if route in PASSING or (request.method in ("GET", "HEAD") and route != METER_PATH):
        return None
    authorization = request.headers.get("authorization")
    if door.admin.is_admin(authorization):
        return None
    body: dict[str, Any] = {}
    with contextlib.suppress(json.JSONDecodeError, UnicodeDecodeError):
        parsed = json.loads(raw or b"{}")
        body = parsed if isinstance(parsed, dict) else {}
    if route == "load" and (name := await _load_is_satisfied(door, prefix, body)):
        return JSONResponse({"status": "success", "model_name": name, "started": False,
                             "message": f"Already loaded with settings that satisfy this load: "
                             f"{name}"})
    if route == "unload":
        return JSONResponse({"status": "success", "kept_resident": True, "note": UNLOAD_NOTE,
                             "message": "Kept resident (shared server)"})
    try:
        door.admin.require(authorization, f"{request.method} {request.url.path}")
    except AdminRequiredError as exc:
        log.warning("refused without the admin token: %s", exc.action)
        return _error(403, str(exc), "forbidden", "admin_token_required")
    return None  # pragma: no cover - require() raised or the caller is admin


async def proxy(request: Request) -> Response:
    door: FrontDoor = request.app.state.door
    prefix, route = split_route(request.url.path)
    raw = await request.body()
    refused = await _policy(door, request, prefix, route, raw)
    if refused is not None:
        return refused
    url = f"{door.upstream}{request.url.path}"
    if request.url.query:
        url += f"?{request.url.query}"
    timing = None
    if route in METERED and request.method == "POST":
        model, streamed = _model_and_stream(raw)
        timing = Timing(door.meter, client_of(request), request.url.path, model, streamed)
    outgoing = door.http.build_request(request.method, url, content=raw, headers=_headers(request))
    try:
        if timing is not None:
            timing.sending()
        upstream = await door.http.send(outgoing, stream=True)
    except httpx.HTTPError as exc:
        if timing is not None:
            timing.close(502)
        return _error(502, f"the LLM server behind the front door did not answer: {exc!r}",
                      "server_error", "upstream_unreachable")
    headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _DROPPED
               and k.lower() != "content-encoding"}
    return StreamingResponse(_relay(upstream, timing), status_code=upstream.status_code,
                             headers=headers, background=BackgroundTask(upstream.aclose))


def _model_and_stream(raw: bytes) -> tuple[str | None, bool]:
    try:
        body = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None, False
    if not isinstance(body, dict):
        return None, False
    model = body.get("model")
    return (model if isinstance(model, str) else None), bool(body.get("stream"))


async def _relay(upstream: httpx.Response, timing: Timing | None) -> AsyncIterator[bytes]:
    """Pass the (decoded) body on; a metered answer is read line by line on the way."""
    pending = b""
    whole: list[bytes] = []
    try:
        async for chunk in upstream.aiter_bytes():
            if timing is not None:
                if timing.streamed:
                    lines, pending = split_lines(pending, chunk)
                    for line in lines:
                        timing.line(line)
                else:
                    whole.append(chunk)
            yield chunk
    finally:
        await upstream.aclose()
        if timing is not None:
            if not timing.streamed and upstream.status_code == 200:
                timing.body(b"".join(whole))
            timing.close(upstream.status_code)


def build_app(door: FrontDoor) -> Starlette:
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await door.http.aclose()

    app = Starlette(routes=[Route(METER_PATH, meter_route, methods=["GET"]),
                            Route("/{path:path}", proxy, methods=methods)], lifespan=lifespan)
    app.state.door = door
    app.state.meter, app.state.meter_guard = door.meter, door.admin
    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trialbox_llm.front_door",
        description="trialbox's front door in front of a Lemonade Server: admin gate + meter.")
    parser.add_argument("--upstream", required=True, help="Lemonade's origin, e.g. http://lemonade:13305")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=13305)
    args = parser.parse_args(argv)
    try:
        token = token_from_environment(os.environ)
    except AdminTokenError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    door = FrontDoor(args.upstream.rstrip("/"), AdminGuard(token))
    uvicorn.run(build_app(door), host=args.host, port=args.port, log_level="info",
                access_log=False, timeout_graceful_shutdown=5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
