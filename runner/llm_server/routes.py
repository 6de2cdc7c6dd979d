"""The Lemonade API (`/api/v1`, `/v1`, `/api/v0`) in front of the llama.cpp servers.

Model management (`load`, `unload`, `pull`) and status (`health`, `models`, `system-info`,
`stats`) are answered here; `chat/completions` and `embeddings` are proxied to the model's
llama-server byte for byte (streams included), so GAIA sees llama.cpp's own OpenAI responses,
`timings` and all, exactly as Lemonade would pass them through.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from runner.llm_server import stats as stats_extraction
from runner.llm_server.backend import BackendError, LlamaBackend, LoadedModel
from runner.llm_server.catalog import ModelKind, ModelSpec, UnknownModelError, alias_map, resolve
from runner.llm_server.force_tool import ForceTool
from runner.llm_server.llamacpp_args import LlamaArgsError, parse_llamacpp_args
from runner.llm_server.schemas import (
    ErrorResponse,
    Health,
    LoadedModelEntry,
    LoadRequest,
    ModelEntry,
    ModelList,
    PullRequest,
    RecipeOptions,
    ServerIdentity,
    Stats,
    UnloadRequest,
)
from runner.llm_server.system_info import collect

log = logging.getLogger(__name__)

API_PREFIXES = ("/api/v1", "/v1", "/api/v0")

#: Generations can be long; only connecting to our own loopback server should be quick.
_UPSTREAM_TIMEOUT = httpx.Timeout(connect=10.0, read=None, write=60.0, pool=None)


class ApiError(Exception):
    """Turned into an OpenAI/Lemonade error body with this HTTP status."""

    def __init__(self, status: int, message: str, type_: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code = status, message, type_, code

    def response(self) -> JSONResponse:
        return JSONResponse(ErrorResponse.of(self.message, self.type, self.code), self.status)


@dataclass
class ServerState:
    """Everything the routes share: the backend, who we are, and the last completion's stats."""

    backend: LlamaBackend
    identity: ServerIdentity
    models_dir: Path
    llama_version: str
    force_tool: ForceTool | None = None
    last_stats: Stats = field(default_factory=Stats)
    last_loaded_chat: str | None = None
    http: httpx.AsyncClient = field(
        default_factory=lambda: httpx.AsyncClient(timeout=_UPSTREAM_TIMEOUT)
    )


def resolve_or_404(name: str | None) -> ModelSpec:
    try:
        return resolve(name)
    except UnknownModelError as exc:
        raise ApiError(404, str(exc), "not_found", "model_not_found") from exc


async def read_json(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ApiError(400, f"request body is not JSON: {exc}", "invalid_request_error") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object", "invalid_request_error")
    return body


def parse_body(model: type[BaseModel], body: dict[str, Any]) -> Any:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise ApiError(400, f"invalid request: {exc}", "invalid_request_error") from exc


def loaded_entry(model: LoadedModel) -> LoadedModelEntry:
    return LoadedModelEntry(
        model_name=model.loaded_as,
        checkpoint=model.spec.file,
        type=model.spec.kind.value,
        recipe_options=RecipeOptions(ctx_size=model.ctx_size, llamacpp_args=model.llamacpp_args),
        max_context_window=model.spec.max_context_window,
        served_model=model.spec.name,
        slots=model.slots,
        ignored_llamacpp_args=model.args.ignored,
        load_seconds=round(model.load_seconds, 3),
    )


def model_entries(state: ServerState) -> list[ModelEntry]:
    entries = []
    for spec in state.backend.catalog:
        path = state.backend.model_path(spec)
        size_gb = round(path.stat().st_size / 1e9, 3) if path.is_file() else 0.0
        running = state.backend.get(spec)
        for name in spec.names:
            entries.append(
                ModelEntry(
                    id=name,
                    checkpoint=spec.file,
                    type=spec.kind.value,
                    downloaded=path.is_file(),
                    labels=list(spec.labels),
                    max_context_window=spec.max_context_window,
                    context_length=running.ctx_size if running else spec.default_ctx_size,
                    size=size_gb,
                    served_model=spec.name,
                    alias=name != spec.name,
                )
            )
    return entries


# --- status routes -------------------------------------------------------------------------


async def live(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


async def health(request: Request) -> JSONResponse:
    state: ServerState = request.app.state.llm
    loaded = state.backend.loaded()
    chat_names = [m.loaded_as for m in loaded if m.spec.kind is ModelKind.CHAT]
    body = Health(
        version=state.identity.lemonade_api
        + "+"
        + state.identity.name
        + "."
        + state.identity.version,
        model_loaded=state.last_loaded_chat
        if state.last_loaded_chat in chat_names
        else (chat_names[0] if chat_names else None),
        all_models_loaded=[loaded_entry(m) for m in loaded],
        max_models={"llm": 1, "embedding": 1, "reranking": 0, "audio": 0, "image": 0},
        server=state.identity,
        aliases=alias_map(state.backend.catalog),
        force_tool=state.force_tool.tool if state.force_tool else None,
    )
    return JSONResponse(body.model_dump())


async def models(request: Request) -> JSONResponse:
    # Every model is on disk, so `show_all=true` (the whole catalog) and the default
    # (downloaded models only) are the same list.
    state: ServerState = request.app.state.llm
    return JSONResponse(ModelList(data=model_entries(state)).model_dump())


async def system_info(request: Request) -> JSONResponse:
    state: ServerState = request.app.state.llm
    info = await asyncio.to_thread(collect, state.models_dir, state.identity, state.llama_version)
    return JSONResponse(info.model_dump(by_alias=True))


async def stats(request: Request) -> JSONResponse:
    state: ServerState = request.app.state.llm
    return JSONResponse(state.last_stats.model_dump())


# --- model management ----------------------------------------------------------------------


async def load(request: Request) -> JSONResponse:
    state: ServerState = request.app.state.llm
    payload: LoadRequest = parse_body(LoadRequest, await read_json(request))
    spec = resolve_or_404(payload.name)
    try:
        args = parse_llamacpp_args(payload.llamacpp_args)
    except LlamaArgsError as exc:
        raise ApiError(400, str(exc), "invalid_request_error") from exc
    if payload.llamacpp_backend not in (None, "cpu"):
        args.ignored.append(f"llamacpp_backend={payload.llamacpp_backend} (only cpu exists here)")
    model = await asyncio.to_thread(
        state.backend.load,
        spec,
        payload.name or spec.name,
        payload.ctx_size,
        args,
        payload.llamacpp_args or "",
    )
    if spec.kind is ModelKind.CHAT:
        state.last_loaded_chat = model.loaded_as
    return JSONResponse(
        {
            "status": "success",
            "message": f"Loaded model: {model.loaded_as} (served by {spec.name})",
            "model_name": model.loaded_as,
            "served_model": spec.name,
            "ctx_size": model.ctx_size,
        }
    )


async def unload(request: Request) -> JSONResponse:
    state: ServerState = request.app.state.llm
    payload: UnloadRequest = parse_body(UnloadRequest, await read_json(request))
    if payload.name is None:  # Lemonade: no name unloads everything
        await asyncio.to_thread(state.backend.close)
        return JSONResponse({"status": "success", "message": "Unloaded all models"})
    spec = resolve_or_404(payload.name)
    if not await asyncio.to_thread(state.backend.unload, spec):
        raise ApiError(
            404, f"Model '{payload.name}' is not loaded", "not_found", "model_not_loaded"
        )
    return JSONResponse({"status": "success", "message": f"Unloaded model: {payload.name}"})


async def pull(request: Request) -> Response:
    state: ServerState = request.app.state.llm
    payload: PullRequest = parse_body(PullRequest, await read_json(request))
    spec = resolve_or_404(payload.name)
    if not state.backend.model_path(spec).is_file():
        raise ApiError(
            500,
            f"{spec.file} is missing from {state.models_dir}; run scripts/fetch-models",
            "server_error",
        )
    message = f"{payload.name} is bundled with this server ({spec.name}); nothing to download"
    if not payload.stream:
        return JSONResponse({"status": "success", "message": message})
    size = state.backend.model_path(spec).stat().st_size
    progress = {
        "file": spec.file,
        "file_index": 1,
        "total_files": 1,
        "bytes_downloaded": size,
        "bytes_total": size,
        "percent": 100,
    }
    events = (
        f"event: progress\ndata: {json.dumps(progress)}\n\n"
        f"event: complete\ndata: {json.dumps({'model_name': payload.name, 'message': message})}\n\n"
    )
    return Response(events, media_type="text/event-stream")


# --- proxied inference ---------------------------------------------------------------------


async def model_for(state: ServerState, body: dict[str, Any], kind: ModelKind) -> LoadedModel:
    requested = body.get("model")
    spec = resolve_or_404(requested if isinstance(requested, str) else None)
    if spec.kind is not kind:
        raise ApiError(
            400,
            f"Model '{requested}' is a {spec.kind.value} model and cannot serve this route",
            "invalid_request_error",
        )
    return await asyncio.to_thread(state.backend.ensure_loaded, spec, requested)


async def chat_completions(request: Request) -> Response:
    state: ServerState = request.app.state.llm
    body = await read_json(request)
    model = await model_for(state, body, ModelKind.CHAT)
    url = f"{model.url}/v1/chat/completions"
    if state.force_tool is not None and state.force_tool.applies_to(body):
        return await forced_tool_call(state, url, body, state.force_tool)
    if body.get("stream"):
        return await stream_upstream(state, url, body)
    upstream = await state.http.post(url, json=body)
    if upstream.status_code == 200:
        record_stats(state, upstream.content)
    return passthrough(upstream)


async def embeddings(request: Request) -> Response:
    state: ServerState = request.app.state.llm
    body = await read_json(request)
    model = await model_for(state, body, ModelKind.EMBEDDING)
    upstream = await state.http.post(f"{model.url}/v1/embeddings", json=body)
    return passthrough(upstream)


async def forced_tool_call(
    state: ServerState, url: str, body: dict[str, Any], force: ForceTool
) -> Response:
    """TRIALBOX_LLM_FORCE_TOOL: the model writes the arguments, we return them as a tool call."""
    upstream = await state.http.post(url, json=force.arguments_request(body))
    if upstream.status_code != 200:
        return passthrough(upstream)
    record_stats(state, upstream.content)
    answer = upstream.json()
    if body.get("stream"):
        return Response("".join(force.stream_events(answer)), media_type="text/event-stream")
    return JSONResponse(force.completion(answer))


def passthrough(upstream: httpx.Response) -> Response:
    media_type = upstream.headers.get("content-type", "application/json")
    return Response(upstream.content, upstream.status_code, media_type=media_type)


def record_stats(state: ServerState, content: bytes) -> None:
    try:
        body = json.loads(content)
    except json.JSONDecodeError:
        return
    found = stats_extraction.stats_from_response(body) if isinstance(body, dict) else None
    if found is not None:
        state.last_stats = found


async def stream_upstream(state: ServerState, url: str, body: dict[str, Any]) -> Response:
    """Open the upstream stream first so an error status reaches the client as an error."""
    upstream_request = state.http.build_request("POST", url, json=body)
    upstream = await state.http.send(upstream_request, stream=True)
    if upstream.status_code != 200:
        await upstream.aread()
        await upstream.aclose()
        return passthrough(upstream)
    return StreamingResponse(
        relay(state, upstream),
        status_code=200,
        media_type=upstream.headers.get("content-type", "text/event-stream"),
        headers={"Cache-Control": "no-cache"},
    )


async def relay(state: ServerState, upstream: httpx.Response) -> AsyncIterator[bytes]:
    """Forward the bytes unchanged while reading each complete line for the final timings."""
    pending = b""
    found: Stats | None = None
    try:
        async for chunk in upstream.aiter_raw():
            yield chunk
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                found = stats_extraction.merge(
                    found, stats_extraction.stats_from_sse_line(line.decode("utf-8", "replace"))
                )
    finally:
        await upstream.aclose()
        if found is not None:
            state.last_stats = found


# --- app -----------------------------------------------------------------------------------

Handler = Callable[[Request], Awaitable[Response]]


def guarded(handler: Handler) -> Handler:
    """Turn our errors into Lemonade error bodies instead of bare 500 pages."""

    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except ApiError as exc:
            return exc.response()
        except BackendError as exc:
            log.error("%s", exc)
            return ApiError(500, str(exc), "server_error").response()
        except httpx.HTTPError as exc:
            log.error("llama.cpp did not answer: %r", exc)
            return ApiError(
                502, f"llama.cpp backend did not answer: {exc!r}", "server_error"
            ).response()

    return run


_ROUTES: list[tuple[str, Handler, list[str]]] = [
    ("/live", live, ["GET"]),
    ("/health", health, ["GET"]),
    ("/models", models, ["GET"]),
    ("/system-info", system_info, ["GET"]),
    ("/stats", stats, ["GET"]),
    ("/load", load, ["POST"]),
    ("/unload", unload, ["POST"]),
    ("/pull", pull, ["POST"]),
    ("/chat/completions", chat_completions, ["POST"]),
    ("/embeddings", embeddings, ["POST"]),
]


def build_app(state: ServerState, on_shutdown: Callable[[], Any] | None = None) -> Starlette:
    routes = [Route("/live", guarded(live), methods=["GET"])]
    for prefix in API_PREFIXES:
        routes += [Route(prefix + path, guarded(fn), methods=m) for path, fn, m in _ROUTES]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await state.http.aclose()
        if on_shutdown is not None:
            await asyncio.to_thread(on_shutdown)

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.llm = state
    return app
