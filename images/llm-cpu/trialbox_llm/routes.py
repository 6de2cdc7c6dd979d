"""The Lemonade API (`/api/v1`, `/v1`, `/api/v0`) in front of the llama.cpp servers.

Model management (`load`, `unload`, `pull`) and status (`health`, `models`, `system-info`,
`stats`) are answered here; `chat/completions` and `embeddings` are proxied to the model's
llama-server byte for byte (streams included), so GAIA sees llama.cpp's own OpenAI responses,
`timings` and all, exactly as Lemonade would pass them through. Embedding inputs longer than
the embedder's limit are cut first (`embedding_inputs`), as sentence-transformers cuts them.

One server, several clients. trialbox runs many GAIA Agent UIs against this one server at
once, and each of them manages "its" models: it loads the chat model and the embedder when it
starts, reloads when it thinks a window is too small, and unloads the embedder before loading
it again. Lemonade obeys every such call; here that would let one sandbox cut off another's
request in mid-answer. So this server keeps its models resident and shared:

- `POST /load` of a model that already runs with what the request asks (a window at least as
  large, every named flag as running) changes nothing and answers success; GAIA's own loads
  always are such loads, because the models start with GAIA's flags and its chat window.
- a load that does need a restart waits until no request is in flight on that model, holding
  new ones back meanwhile (`in_flight`); if they do not finish in time it is refused with HTTP
  409 `model_busy` and the model keeps serving as it was.
- `POST /unload` keeps the model running and answers success with `kept_resident: true` and
  a note. Stopping it would break the other clients' requests, and the model would be loaded
  again by their next request anyway; freeing its memory is never what a client of a shared
  server needs. The answer says so plainly instead of pretending the model is gone, and
  `/health` keeps listing it because it still runs.

Requests that would change what the other clients use (a load that restarts a model,
Lemonade's `params` and `delete`) need the admin token; see `admin` for which and why.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from trialbox_llm import stats as stats_extraction
from trialbox_llm.admin import AdminGuard, AdminRequiredError
from trialbox_llm.backend import BackendError, LlamaBackend, LoadedModel, effective_args
from trialbox_llm.catalog import ModelKind, ModelSpec, UnknownModelError, alias_map, resolve
from trialbox_llm.decoding import DECODING_PATH, Decoding, DecodingReport, DecodingRequest
from trialbox_llm.embedding_cache import EmbeddingCache, servable_texts, through_cache
from trialbox_llm.embedding_cache import answer as cached_answer
from trialbox_llm.embedding_inputs import TokenizerError, fit_to_limit
from trialbox_llm.force_tool import ForceTool
from trialbox_llm.in_flight import InFlight, ModelBusyError, Use
from trialbox_llm.llamacpp_args import LlamaArgs, LlamaArgsError, parse_llamacpp_args
from trialbox_llm.meter import (
    METER_PATH,
    Meter,
    Timing,
    client_of,
    inputs_of,
    meter_route,
    split_lines,
)
from trialbox_llm.schemas import (
    EmbeddingCounts,
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
    StatsReport,
    UnloadRequest,
)
from trialbox_llm.slots import SLOT_FIELD, SlotPins
from trialbox_llm.system_info import collect

log = logging.getLogger(__name__)

API_PREFIXES = ("/api/v1", "/v1", "/api/v0")

#: Generations can be long; only connecting to our own loopback server should be quick.
_UPSTREAM_TIMEOUT = httpx.Timeout(connect=10.0, read=None, write=60.0, pool=None)

#: How long a restart waits for the requests in flight on its model (`--drain-timeout`).
DEFAULT_DRAIN_TIMEOUT_S = 300.0

UNLOAD_NOTE = (
    "This server is shared by several clients, so it keeps its models resident: unloading "
    "would cut off the requests of the others. The model still runs with the settings "
    "/health reports."
)


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
    # A 135M model rarely stops by itself: without a cap one answer can run to the context
    # limit (minutes on two cores). None = no cap, as real Lemonade.
    max_output_tokens: int | None = None
    last_stats: Stats = field(default_factory=Stats)
    last_loaded_chat: str | None = None
    drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S
    #: Who may change shared state (`admin`); the default refuses everyone.
    admin: AdminGuard = field(default_factory=AdminGuard)
    embedding_counts: EmbeddingCounts = field(default_factory=EmbeddingCounts)
    #: Every chat request, per client (`meter`): what the runner reads a turn's figures from.
    meter: Meter = field(default_factory=Meter)
    #: Per-client repeatable decoding, set by the runner for a speed comparison (`decoding`).
    decoding: Decoding = field(default_factory=Decoding)
    #: Where a pinned chat runs (GAIA pins slot 0 on every chat): off a slot another client holds.
    slots: SlotPins = field(default_factory=SlotPins)
    #: Vectors already computed, served again by content (`--embedding-cache-mib`; None: off).
    embedding_cache: EmbeddingCache | None = None
    http: httpx.AsyncClient = field(
        default_factory=lambda: httpx.AsyncClient(timeout=_UPSTREAM_TIMEOUT)
    )
    _in_flight: dict[str, InFlight] = field(default_factory=dict)

    def in_flight(self, spec: ModelSpec) -> InFlight:
        """The requests in flight on `spec` (created on first use, on the event loop)."""
        if spec.name not in self._in_flight:
            self._in_flight[spec.name] = InFlight(spec.name)
        return self._in_flight[spec.name]


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


def loaded_entry(state: ServerState, model: LoadedModel) -> LoadedModelEntry:
    return LoadedModelEntry(
        model_name=model.loaded_as,
        checkpoint=model.spec.file,
        type=model.spec.kind.value,
        recipe_options=RecipeOptions(ctx_size=model.ctx_size, llamacpp_args=model.args.as_flags()),
        max_context_window=model.max_context_window,
        served_model=state.backend.served_model(model.spec),
        slots=model.slots,
        llama_servers=model.server_count,
        context_per_request=model.context_per_request,
        max_input_tokens=input_limit(model),
        in_flight=state.in_flight(model.spec).count,
        ignored_llamacpp_args=model.args.ignored,
        load_seconds=round(model.load_seconds, 3),
        loaded_at=model.loaded_at,
    )


def input_limit(model: LoadedModel) -> int | None:
    """Longest embedding input, special tokens included: the model's own limit, and never
    more than the running window (llama.cpp refuses longer inputs outright)."""
    if model.spec.kind is not ModelKind.EMBEDDING:
        return None
    return min(model.spec.max_input_tokens or model.ctx_size, model.ctx_size)


def model_entries(state: ServerState) -> list[ModelEntry]:
    entries = []
    for spec in state.backend.catalog:
        path = state.backend.model_path(spec)
        downloaded = state.backend.is_downloaded(spec)
        size_gb = round(path.stat().st_size / 1e9, 3) if path.is_file() else 0.0
        running = state.backend.get(spec)
        for name in spec.names:
            entries.append(
                ModelEntry(
                    id=name,
                    checkpoint=spec.file,
                    type=spec.kind.value,
                    downloaded=downloaded,
                    labels=list(spec.labels),
                    max_context_window=spec.max_context_window,
                    context_length=running.ctx_size if running else spec.default_ctx_size,
                    size=size_gb,
                    served_model=state.backend.served_model(spec),
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
        all_models_loaded=[loaded_entry(state, m) for m in loaded],
        max_models={"llm": 1, "embedding": 1, "reranking": 0, "audio": 0, "image": 0},
        server=state.identity,
        aliases=alias_map(state.backend.catalog),
        force_tool=state.force_tool.tool if state.force_tool else None,
        max_output_tokens=state.max_output_tokens,
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
    report = StatsReport(**state.last_stats.model_dump(), embeddings=state.embedding_counts)
    return JSONResponse(report.model_dump())


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
    name = payload.name or spec.name
    model = await asyncio.to_thread(state.backend.reuse, spec, name, payload.ctx_size, args)
    started = model is None
    if model is None:  # nothing running satisfies this load: (re)start it, alone
        state.admin.require(
            request.headers.get("authorization"),
            f"Loading {name} with settings the running model does not have (a restart)",
        )
        model = await restart(state, spec, name, payload.ctx_size, args)
    if spec.kind is ModelKind.CHAT:
        state.last_loaded_chat = model.loaded_as
    verb = "Loaded" if started else "Already loaded with settings that satisfy this load"
    return JSONResponse(
        {
            "status": "success",
            "message": f"{verb}: {model.loaded_as} (served by {spec.name}, "
            f"ctx_size {model.ctx_size})",
            "model_name": model.loaded_as,
            "served_model": state.backend.served_model(spec),
            "ctx_size": model.ctx_size,
            "llamacpp_args": model.args.as_flags(),
            "ignored_llamacpp_args": effective_args(spec, args).ignored,
            "started": started,
        }
    )


async def restart(
    state: ServerState, spec: ModelSpec, name: str, ctx_size: int | None, args: LlamaArgs
) -> LoadedModel:
    """(Re)start `spec` once no request is in flight on it; 409 when they do not finish."""
    try:
        async with state.in_flight(spec).exclusive(state.drain_timeout_s):
            return await asyncio.to_thread(state.backend.load, spec, name, ctx_size, args)
    except ModelBusyError as exc:
        raise ApiError(409, str(exc), "model_busy", "model_busy") from exc


async def unload(request: Request) -> JSONResponse:
    """Keep the model running and say so (see the module docstring for why)."""
    state: ServerState = request.app.state.llm
    payload: UnloadRequest = parse_body(UnloadRequest, await read_json(request))
    if payload.name is None:  # Lemonade: no name unloads everything
        running = [m.loaded_as for m in state.backend.loaded()]
    else:
        spec = resolve_or_404(payload.name)
        model = state.backend.get(spec)
        if model is None:
            raise ApiError(
                404, f"Model '{payload.name}' is not loaded", "not_found", "model_not_loaded"
            )
        running = [model.loaded_as]
    log.info("unload of %s asked; kept resident (shared server)", payload.name or "all models")
    return JSONResponse(
        {
            "status": "success",
            "message": f"Kept resident: {', '.join(running) or 'no model loaded'}",
            "kept_resident": True,
            "models": running,
            "note": UNLOAD_NOTE,
        }
    )


async def pull(request: Request) -> Response:
    state: ServerState = request.app.state.llm
    payload: PullRequest = parse_body(PullRequest, await read_json(request))
    spec = resolve_or_404(payload.name)
    if not state.backend.is_downloaded(spec):
        raise ApiError(
            500,
            f"{spec.file} is missing from {state.models_dir}; run scripts/fetch-models",
            "server_error",
        )
    message = f"{payload.name} is bundled with this server ({spec.name}); nothing to download"
    if not payload.stream:
        return JSONResponse({"status": "success", "message": message})
    path = state.backend.model_path(spec)
    size = path.stat().st_size if path.is_file() else 0
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


async def not_implemented_admin(request: Request) -> JSONResponse:
    """Lemonade's `params` and `delete`: they would change shared state, so only an admin
    learns that this server does not implement them (its models are bundled and fixed)."""
    state: ServerState = request.app.state.llm
    route = request.url.path.rsplit("/", 1)[-1]
    state.admin.require(request.headers.get("authorization"), f"POST /{route}")
    raise ApiError(
        501,
        f"/{route} is not implemented by trialbox's llm-cpu: its models are bundled with the "
        "image and their settings are changed with /load",
        "not_implemented",
        "not_implemented",
    )


# --- proxied inference ---------------------------------------------------------------------


def spec_for(body: dict[str, Any], kind: ModelKind) -> ModelSpec:
    requested = body.get("model")
    spec = resolve_or_404(requested if isinstance(requested, str) else None)
    if spec.kind is not kind:
        raise ApiError(
            400,
            f"Model '{requested}' is a {spec.kind.value} model and cannot serve this route",
            "invalid_request_error",
        )
    return spec


async def use_model(
    state: ServerState, body: dict[str, Any], kind: ModelKind
) -> tuple[LoadedModel, Use]:
    """The running model for this request, held (`Use`) so no restart cuts it off; the
    caller releases the hold when it has finished talking to llama.cpp."""
    spec = spec_for(body, kind)
    use = await state.in_flight(spec).enter()
    try:
        requested = body.get("model")
        model = await asyncio.to_thread(state.backend.ensure_loaded, spec, str(requested))
    except BaseException:
        use.release()
        raise
    return model, use


def cap_output(body: dict[str, Any], cap: int | None) -> dict[str, Any]:
    """Limit the tokens a completion may generate to `cap` (the request's own limit wins
    when it is lower). The cap is reported in /health, so a run records it."""
    if cap is None:
        return body
    asked = [body[key] for key in ("max_tokens", "max_completion_tokens", "n_predict")
             if isinstance(body.get(key), int) and body[key] > 0]
    body.pop("max_completion_tokens", None)
    body.pop("n_predict", None)
    body["max_tokens"] = min([cap, *asked])
    return body


async def chat_completions(request: Request) -> Response:
    state: ServerState = request.app.state.llm
    body = cap_output(await read_json(request), state.max_output_tokens)
    requested = body.get("model")
    client = client_of(request)
    timing = Timing(state.meter, client, request.url.path,
                    requested if isinstance(requested, str) else None, bool(body.get("stream")))
    body, timing.decoding = state.decoding.apply(client, body)
    try:
        return await _chat_completions(state, body, timing)
    except ApiError as exc:
        timing.close(exc.status)
        raise
    except BaseException:
        timing.close(502)
        raise


async def _chat_completions(state: ServerState, body: dict[str, Any], timing: Timing) -> Response:
    model, use = await use_model(state, body, ModelKind.CHAT)
    body, pin = state.slots.apply(timing.client, body, model.slot_count)
    origin = model.url
    if pin is not None:
        timing.slot = pin.slot
        origin, body[SLOT_FIELD] = model.place(pin.slot)
    elif model.server_count > 1 and model.slot_count:
        # Split over several llama-servers, a request that pins no slot still runs on one:
        # the server of the idle slot used least recently, so it waits behind no answer.
        pin = state.slots.any_slot(model.slot_count)
        origin = model.place(pin.slot)[0]
    if pin is not None:
        use.on_release(functools.partial(state.slots.end, pin))
    url = f"{origin}/v1/chat/completions"
    force = state.force_tool if state.force_tool and state.force_tool.applies_to(body) else None
    timing.sending()
    if body.get("stream") and force is None:
        return await stream_upstream(state, url, body, use, timing)  # releases `use` at its end
    try:
        if force is not None:
            response = await forced_tool_call(state, url, body, force, timing)
            timing.close(response.status_code)
            return response
        upstream = await state.http.post(url, json=body)
    finally:
        use.release()
    if upstream.status_code == 200:
        record_stats(state, upstream.content)
        timing.body(upstream.content)
    timing.close(upstream.status_code)
    return passthrough(upstream)


async def embeddings(request: Request) -> Response:
    state: ServerState = request.app.state.llm
    body = await read_json(request)
    requested = body.get("model")
    timing = Timing(state.meter, client_of(request), request.url.path,
                    requested if isinstance(requested, str) else None, streamed=False)
    timing.inputs = inputs_of(request.url.path, body)
    try:
        model, use = await use_model(state, body, ModelKind.EMBEDDING)
    except ApiError as exc:
        timing.close(exc.status)
        raise
    try:
        texts = servable_texts(body) if state.embedding_cache is not None else None
        if texts is not None:
            return await _embeddings_through_cache(state, model, body, texts, timing)
        upstream, _ = await _embed(state, model, body, timing)
    except BaseException:
        timing.close(502)
        raise
    finally:
        use.release()
    if upstream.status_code == 200:
        timing.body(upstream.content)
    timing.close(upstream.status_code)
    return passthrough(upstream)


async def _embed(state: ServerState, model: LoadedModel, body: dict[str, Any],
                 timing: Timing) -> tuple[httpx.Response, tuple[int | None, ...]]:
    """The model's answer to `body`, its inputs cut to the embedder's window first, and each
    input's tokens as embedded."""
    limit = input_limit(model) or model.ctx_size
    fitted = await fit_to_limit(state.http, model.url, body, limit)
    count_embedding_inputs(state, fitted.texts, fitted.truncated, limit)
    timing.sending()
    upstream = await state.http.post(f"{model.url}/v1/embeddings", json=fitted.body)
    return upstream, fitted.tokens


async def _embeddings_through_cache(state: ServerState, model: LoadedModel, body: dict[str, Any],
                                    texts: list[str], timing: Timing) -> Response:
    """Answer what the cache holds, send only the rest to the model, keep what it answers.

    The answer is the model's shape with every vector in input order. A refusal of the model
    goes back as it came; an answer not in the shape expected is not merged: the whole request
    goes to the model then, as it would without a cache. Nothing is kept from either."""
    assert state.embedding_cache is not None
    outcome = await through_cache(
        state.embedding_cache, model.spec.name, texts,
        lambda inputs: _embed(state, model, {**body, "input": inputs}, timing))
    if outcome.vectors is None:
        upstream = outcome.model_answer
        assert isinstance(upstream, httpx.Response)
        if upstream.status_code == 200 and outcome.cached:
            upstream, _ = await _embed(state, model, body, timing)
        if upstream.status_code == 200:
            timing.body(upstream.content)
        timing.close(upstream.status_code)
        return passthrough(upstream)
    if not outcome.embedded:
        timing.sending()
    timing.cached_inputs = outcome.cached
    asked = body.get("model")
    answered = cached_answer(asked if isinstance(asked, str) else model.spec.name,
                             outcome.vectors)
    content = json.dumps(answered).encode()
    timing.body(content)
    timing.close(200)
    return Response(content, 200, media_type="application/json")


def count_embedding_inputs(state: ServerState, texts: int, truncated: int, limit: int) -> None:
    counts = state.embedding_counts
    counts.inputs += texts
    counts.truncated += truncated
    counts.max_input_tokens = limit
    if truncated:
        log.info(
            "embeddings: %d of %d input(s) cut to %d tokens (as sentence-transformers does)",
            truncated,
            texts,
            limit,
        )


async def forced_tool_call(
    state: ServerState, url: str, body: dict[str, Any], force: ForceTool,
    timing: Timing | None = None,
) -> Response:
    """TRIALBOX_LLM_FORCE_TOOL: the model writes the arguments, we return them as a tool call."""
    upstream = await state.http.post(url, json=force.arguments_request(body))
    if upstream.status_code != 200:
        return passthrough(upstream)
    record_stats(state, upstream.content)
    if timing is not None:
        timing.body(upstream.content)
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


async def stream_upstream(
    state: ServerState, url: str, body: dict[str, Any], use: Use, timing: Timing | None = None
) -> Response:
    """Open the upstream stream first so an error status reaches the client as an error.

    `use` is released when the stream ends, however it ends: by the relay when its last byte
    is sent or the client goes away, and by the response's background task as a backstop.
    """
    try:
        upstream_request = state.http.build_request("POST", url, json=body)
        upstream = await state.http.send(upstream_request, stream=True)
        if upstream.status_code != 200:
            await upstream.aread()
            await upstream.aclose()
            use.release()
            if timing is not None:
                timing.close(upstream.status_code)
            return passthrough(upstream)
    except BaseException:
        use.release()
        raise
    return StreamingResponse(
        relay(state, upstream, use, timing),
        status_code=200,
        media_type=upstream.headers.get("content-type", "text/event-stream"),
        headers={"Cache-Control": "no-cache"},
        background=BackgroundTask(use.release),
    )


async def relay(
    state: ServerState, upstream: httpx.Response, use: Use | None = None,
    timing: Timing | None = None,
) -> AsyncIterator[bytes]:
    """Forward the bytes unchanged while reading each complete line for the final timings
    (and, for the meter, the first token's arrival)."""
    pending = b""
    found: Stats | None = None
    try:
        async for chunk in upstream.aiter_raw():
            lines, pending = split_lines(pending, chunk)
            if timing is not None:  # before forwarding: the clock reads when the bytes came
                for line in lines:
                    timing.line(line)
            yield chunk
            for line in lines:
                found = stats_extraction.merge(found, stats_extraction.stats_from_sse_line(line))
    finally:
        if use is not None:
            use.release()
        await upstream.aclose()
        if found is not None:
            state.last_stats = found
        if timing is not None:
            timing.close(upstream.status_code)


async def decoding_route(request: Request) -> JSONResponse:
    """`POST /trialbox/decoding` sets one client's policy; `GET` lists the live ones. Both need
    the admin token: a sandbox must neither change another's decoding nor its own (what the
    runner recorded for the run must be what its sandboxes got)."""
    decoding: Decoding = request.app.state.decoding
    guard: AdminGuard = request.app.state.meter_guard
    if not guard.is_admin(request.headers.get("authorization")):
        return ApiError(403, f"{request.method} {DECODING_PATH} decides how other clients' "
                        "requests are decoded, so it needs the admin token (`Authorization: "
                        "Bearer <token>`; trialbox has it)", "forbidden",
                        "admin_token_required").response()
    if request.method == "POST":
        try:
            asked = DecodingRequest.model_validate_json(await request.body())
        except ValidationError as exc:
            return ApiError(400, f"invalid {DECODING_PATH} request: {exc}",
                            "invalid_request_error").response()
        decoding.set(asked)
    return JSONResponse(DecodingReport(policies=decoding.live()).model_dump())


# --- app -----------------------------------------------------------------------------------

Handler = Callable[[Request], Awaitable[Response]]


def guarded(handler: Handler) -> Handler:
    """Turn our errors into Lemonade error bodies instead of bare 500 pages."""

    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except ApiError as exc:
            return exc.response()
        except AdminRequiredError as exc:
            log.warning("refused without the admin token: %s", exc.action)
            return ApiError(403, str(exc), "forbidden", "admin_token_required").response()
        except ModelBusyError as exc:
            return ApiError(409, str(exc), "model_busy", "model_busy").response()
        except TokenizerError as exc:
            log.error("%s", exc)
            return ApiError(502, str(exc), "server_error").response()
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
    ("/params", not_implemented_admin, ["POST"]),
    ("/delete", not_implemented_admin, ["POST"]),
    ("/chat/completions", chat_completions, ["POST"]),
    ("/embeddings", embeddings, ["POST"]),
]


def build_app(state: ServerState, on_shutdown: Callable[[], Any] | None = None) -> Starlette:
    routes = [Route("/live", guarded(live), methods=["GET"]),
              Route(METER_PATH, meter_route, methods=["GET"]),
              Route(DECODING_PATH, decoding_route, methods=["GET", "POST"])]
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
    app.state.meter, app.state.meter_guard = state.meter, state.admin
    app.state.decoding = state.decoding
    return app
