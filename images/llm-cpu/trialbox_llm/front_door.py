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
import functools
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpcore
import httpx
import uvicorn
from pydantic import ValidationError
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
from trialbox_llm.decoding import DECODING_PATH, FORCED_ROUTES, Decoding
from trialbox_llm.embedding_cache import (
    EmbeddingCache,
    ModelAnswer,
    add_cache_option,
    cache_mib,
    servable_texts,
    through_cache,
)
from trialbox_llm.embedding_cache import answer as cached_answer
from trialbox_llm.embedding_inputs import TokenizerError, fit_through_lemonade
from trialbox_llm.meter import METER_PATH, Meter, Timing, client_of, inputs_of, meter_route
from trialbox_llm.routes import API_PREFIXES, UNLOAD_NOTE, decoding_route
from trialbox_llm.slots import SLOT_FIELD, Pin, SlotPins
from trialbox_llm.upstream import UPSTREAM_PATH, InFlight, UpstreamReport, UpstreamRequest

log = logging.getLogger("trialbox_llm.front_door")

_TIMEOUT = httpx.Timeout(connect=10.0, read=None, write=60.0, pool=None)
_RELAY_TIMEOUT = {"timeout": {"connect": 10.0, "read": None, "write": 60.0, "pool": None}}
_RELAY_ERRORS = (httpcore.NetworkError, httpcore.TimeoutException, httpcore.ProtocolError,
                 httpcore.UnsupportedProtocol, OSError)
#: Routes that pass without a token (after the API prefix).
METERED = frozenset({"chat/completions", "completions", "responses", "embeddings", "reranking"})
PASSING = METERED | frozenset({"embeddings", "reranking", "health", "models", "system-info",
                               "stats", "live"})
#: Headers not passed on: hop-by-hop ones, the length (re-computed) and the admin token; and the
#: client's accept-encoding: the door asks Lemonade for a plain answer (it reads it to meter),
#: which it passes on as it came.
_DROPPED = frozenset({b"host", b"content-length", b"connection", b"keep-alive",
                      b"transfer-encoding", b"te", b"trailer", b"upgrade", b"proxy-authorization",
                      b"authorization", b"accept-encoding"})


@dataclass
class FrontDoor:
    """The proxy's state: where Lemonade is, who is admin, the meter."""

    upstream: str
    admin: AdminGuard = field(default_factory=AdminGuard)
    meter: Meter = field(default_factory=Meter)
    #: Per-client repeatable decoding, set by the runner for a speed comparison (`decoding`).
    decoding: Decoding = field(default_factory=Decoding)
    #: Embedding inputs are cut to this many tokens, as sentence-transformers cuts them, when the
    #: upstream serves a small bundled embedder under GAIA's name (`--embed-max-tokens`; None:
    #: passed as sent). See trialbox_llm.embedding_inputs.
    embed_max_tokens: int | None = None
    #: The embedder's opening and closing special token ids (`--embed-special`): how the door
    #: knows Lemonade's tokenizer answered for the embedder (embedding_inputs says why).
    embed_special: tuple[int, int] = (101, 102)
    #: Vectors Lemonade already computed, served again by content (`--embedding-cache-mib`;
    #: None: off, as for `trialbox ab`). Exact because Lemonade's embedder has one slot, so a
    #: vector never depends on its batch (start-lemond; trialbox_llm/embedding_cache.py).
    embedding_cache: EmbeddingCache | None = None
    #: Slots of Lemonade's chat model (`--chat-slots`, as start-lemond loads it: `--parallel
    #: 2`); None: pinned chats pass as sent. With it, a chat GAIA pins to slot 0 is moved off
    #: a slot another sandbox's answer holds, as llm-cpu moves it (trialbox_llm/slots.py).
    chat_slots: int | None = None
    slots: SlotPins = field(default_factory=SlotPins)
    #: The door's own questions to Lemonade (is a load already satisfied?).
    http: httpx.AsyncClient = field(default_factory=lambda: httpx.AsyncClient(timeout=_TIMEOUT))
    #: The sandboxes' requests, relayed on kept-alive connections with httpcore (httpx's
    #: transport) alone: a relay needs none of httpx's cookies, redirects or decoding, which
    #: cost time on every request and chunk (scripts/bench-front-door). No connection limit:
    #: every sandbox's request goes on at once, as it would reach Lemonade without the door.
    pool: httpcore.AsyncConnectionPool = field(default_factory=lambda: httpcore.AsyncConnectionPool(
        max_connections=None, max_keepalive_connections=256))

    #: The name meter records give the server answering now (`trialbox ab`: A or B; else
    #: empty, and records name none).
    label: str = ""
    #: Requests between arrival and their last byte (a switch of upstream waits for none).
    in_flight: InFlight = field(default_factory=InFlight)
    #: Switches of upstream since the door started.
    switches: int = 0

    @functools.cached_property
    def host(self) -> bytes:
        """The Host header for Lemonade: its `host:port`."""
        return httpx.URL(self.upstream).netloc

    def serve_from(self, asked: UpstreamRequest) -> None:
        """From now on, requests go to `asked.upstream` (the caller waited for none in flight)."""
        self.upstream, self.label = asked.upstream.rstrip("/"), asked.label
        self.embed_max_tokens = asked.embed_max_tokens
        self.__dict__.pop("host", None)  # the cached Host header named the old server
        self.switches += 1

    def report(self) -> UpstreamReport:
        return UpstreamReport(upstream=self.upstream, label=self.label or self.upstream,
                              embed_max_tokens=self.embed_max_tokens,
                              in_flight=self.in_flight.count, switches=self.switches)


def split_route(path: str) -> tuple[str, str]:
    """(`/api/v1`, `chat/completions`) for `/api/v1/chat/completions`; ('', path) otherwise."""
    for prefix in API_PREFIXES:
        if path.startswith(prefix + "/"):
            return prefix, path[len(prefix) + 1:]
    return "", path.lstrip("/")


def _headers(request: Request, host: bytes, content: bytes) -> list[tuple[bytes, bytes]]:
    """The request's headers as Lemonade gets them (ASGI names them in lower case)."""
    kept = [(k, v) for k, v in request.scope["headers"] if k not in _DROPPED]
    return [(b"host", host), *kept, (b"content-length", b"%d" % len(content)),
            (b"accept-encoding", b"identity")]


def _error(status: int, message: str, type_: str, code: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": type_, "code": code}}, status)


#: Lemonade's prefix for user models: it resolves `user.X` to the user model `X` and reports the
#: loaded model as `X` (GAIA 0.25.1 loads its embedder as `user.embeddinggemma-300m-GGUF`).
USER_MODEL_PREFIX = "user."


def _same_model(loaded: str, asked: str) -> bool:
    """Does a load of `asked` name the model Lemonade reports loaded as `loaded`?"""
    return loaded in (asked, asked.removeprefix(USER_MODEL_PREFIX))


async def _load_is_satisfied(door: FrontDoor, prefix: str, body: dict[str, Any]) -> str | None:
    """The loaded model's name when Lemonade already runs what this load asks, else None."""
    name = body.get("model_name") or body.get("model")
    if not isinstance(name, str):
        return None
    health = await door.http.get(f"{door.upstream}{prefix or '/api/v1'}/health")
    if health.status_code != 200:
        return None
    for entry in health.json().get("all_models_loaded") or []:
        if not isinstance(entry, dict) or not _same_model(str(entry.get("model_name")), name):
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
    door.in_flight.enter()
    release = _once(door.in_flight.leave)
    try:
        return await _pass_on(door, request, prefix, route, raw, release)
    except BaseException:
        release()
        raise


def _place(door: FrontDoor, client: str, raw: bytes) -> tuple[bytes, Pin | None]:
    """The chat request with its pinned slot moved where `door.slots` places it, and the pin
    (None, and the request as it came, when it pins no slot). The body is parsed only when it
    names a slot: GAIA's requests do, and the parse costs well under a millisecond."""
    if SLOT_FIELD.encode() not in raw:
        return raw, None
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return raw, None
    if not isinstance(body, dict):
        return raw, None
    placed, pin = door.slots.apply(client, body, door.chat_slots)
    if pin is None or placed[SLOT_FIELD] == body.get(SLOT_FIELD):
        return raw, pin
    return json.dumps(placed).encode(), pin


def _then(first: Callable[[], None], then: Callable[[], None]) -> Callable[[], None]:
    """`first`, then `then`, at most once however often called (an answer can end twice)."""

    def both() -> None:
        try:
            first()
        finally:
            then()

    return _once(both)


def _once(action: Callable[[], None]) -> Callable[[], None]:
    """`action`, done at most once however often it is called (an answer can end twice)."""
    done = False

    def call() -> None:
        nonlocal done
        if not done:
            done = True
            action()

    return call


async def _pass_on(door: FrontDoor, request: Request, prefix: str, route: str, raw: bytes,
                   release: Callable[[], None]) -> Response:
    """Send the request on to the server answering now and relay its answer."""
    url = f"{door.upstream}{request.url.path}"
    if request.url.query:
        url += f"?{request.url.query}"
    timing = None
    if route == "embeddings" and request.method == "POST":
        if door.embedding_cache is not None:
            answered = await _embeddings_through_cache(door, request, prefix, raw)
            if answered is not None:
                release()
                return answered
        if door.embed_max_tokens:
            raw = await _fit_embeddings(door, prefix, raw)
    if route in METERED and request.method == "POST":
        # Model and stream flag are read from the body only once the answer is over (see
        # `_finish`): parsing an agent's request (tens of KB) here would delay its first token.
        client = client_of(request)
        timing = Timing(door.meter, client, request.url.path, None, streamed=False)
        timing.upstream = door.label or None
        if route in FORCED_ROUTES:  # one dict lookup unless the runner set a policy
            raw, timing.decoding = door.decoding.apply_raw(client, raw)
        if route == "chat/completions" and door.chat_slots:
            raw, pin = _place(door, client, raw)
            if pin is not None:
                timing.slot = pin.slot
                release = _then(functools.partial(door.slots.end, pin), release)
    outgoing = httpcore.Request(request.method, url, content=raw, extensions=_RELAY_TIMEOUT,
                                headers=_headers(request, door.host, raw))
    try:
        if timing is not None:
            timing.sending()
        upstream = await door.pool.handle_async_request(outgoing)
    except _RELAY_ERRORS as exc:
        if timing is not None:
            _describe(timing, raw)
            timing.close(502)
        release()
        return _error(502, f"the LLM server behind the front door did not answer: {exc!r}",
                      "server_error", "upstream_unreachable")
    headers = [(k.lower(), v) for k, v in upstream.headers if k.lower() not in _DROPPED]
    if timing is not None:
        timing.streamed = any(k == b"content-type" and v.startswith(b"text/event-stream")
                              for k, v in headers)
    response = StreamingResponse(_relay(upstream, timing, raw, release),
                                 status_code=upstream.status,
                                 background=BackgroundTask(_finish, upstream, timing, raw, release))
    response.raw_headers = headers  # Lemonade's, as they came (repeated ones included)
    return response


async def _fit_embeddings(door: FrontDoor, prefix: str, raw: bytes) -> bytes:
    """The embeddings request with every input longer than the embedder's window cut to it
    (token ids from Lemonade's own tokenizer); the request as sent when nothing needs cutting,
    when it is not JSON, or when the tokenizer does not answer (Lemonade then says what is
    wrong itself)."""
    try:
        body = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return raw
    if not isinstance(body, dict) or door.embed_max_tokens is None:
        return raw
    try:
        fitted = await fit_through_lemonade(door.http, f"{door.upstream}{prefix or '/api/v1'}",
                                            body, door.embed_max_tokens, door.embed_special)
    except (TokenizerError, httpx.HTTPError) as exc:
        log.warning("embedding inputs not cut (the tokenizer did not answer): %s", exc)
        return raw
    if not fitted.truncated:
        return raw
    log.info("cut %d of %d embedding inputs to %d tokens", fitted.truncated, fitted.texts,
             door.embed_max_tokens)
    return json.dumps(fitted.body).encode()


async def _embeddings_through_cache(door: FrontDoor, request: Request, prefix: str,
                                    raw: bytes) -> Response | None:
    """The answer to an embeddings request from the cache and, for the inputs it lacks, from
    Lemonade; None when the cache may not answer it (not plain text inputs asking for float
    vectors, or the tokenizer did not answer): then it passes on as usual.

    Inputs are cut first, as `_fit_embeddings` cuts them, and kept by what Lemonade is sent
    (the text, or the token ids of a cut one): how a long input is cut depends on which model
    Lemonade's tokenizer last answered for, and a vector is exact only for the input it was
    computed from. A refusal goes back as Lemonade gave it; an answer not in the shape expected
    is not merged: the whole request goes to Lemonade then, and nothing is kept."""
    assert door.embedding_cache is not None
    try:
        body = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    texts = servable_texts(body) if isinstance(body, dict) else None
    model = body.get("model") if isinstance(body, dict) else None
    if texts is None or not isinstance(model, str):
        return None
    try:
        fitted = await fit_through_lemonade(
            door.http, f"{door.upstream}{prefix or '/api/v1'}", body,
            door.embed_max_tokens or sys.maxsize, door.embed_special)
    except (TokenizerError, httpx.HTTPError) as exc:
        log.warning("embeddings not looked up in the cache (the tokenizer did not answer): %s", exc)
        return None
    items = fitted.body["input"]
    keys: list[str] = []  # each input's cache key, in order (a text may come twice)
    sent: dict[str, Any] = {}  # cache key -> the input as Lemonade is sent it
    counts: dict[str, int | None] = {}
    for item, tokens in zip([items] if isinstance(items, str) else items, fitted.tokens,
                            strict=True):
        key = item if isinstance(item, str) else "token ids " + ",".join(map(str, item))
        keys.append(key)
        sent[key], counts[key] = item, tokens
    timing = Timing(door.meter, client_of(request), request.url.path, model, streamed=False)
    timing.upstream = door.label or None
    timing.inputs = len(texts)
    url = f"{door.upstream}{request.url.path}"

    async def embed(keys: list[str]) -> tuple[ModelAnswer, tuple[int | None, ...]]:
        timing.sending()
        answer = await door.http.post(url, json={**body, "input": [sent[k] for k in keys]})
        return answer, _tokens_each([counts[k] for k in keys], answer)

    # What else decides a vector: the server answering, and the model asked for (with or
    # without GAIA's `user.` prefix, the same one).
    served = f"{door.upstream} {model.removeprefix(USER_MODEL_PREFIX)}"
    try:
        outcome = await through_cache(door.embedding_cache, served, keys, embed)
        upstream = outcome.model_answer
        if upstream is not None and upstream.status_code == 200 and outcome.cached:
            upstream, _ = await embed(keys)
    except httpx.HTTPError as exc:
        timing.close(502)
        return _error(502, f"the LLM server behind the front door did not answer: {exc!r}",
                      "server_error", "upstream_unreachable")
    if outcome.vectors is None:
        assert isinstance(upstream, httpx.Response)
        if upstream.status_code == 200:
            timing.body(upstream.content)
        timing.close(upstream.status_code)
        return Response(upstream.content, upstream.status_code,
                        media_type=upstream.headers.get("content-type"))
    if not outcome.embedded:
        timing.sending()
    timing.cached_inputs = outcome.cached
    content = json.dumps(cached_answer(model, outcome.vectors)).encode()
    timing.body(content)
    timing.close(200)
    return Response(content, 200, media_type="application/json")


def _tokens_each(counts: list[int | None], answer: ModelAnswer) -> tuple[int | None, ...]:
    """Each input's tokens: as the embedder's tokenizer counted them, else the answer's
    `usage` shared out evenly over the inputs not counted (exact for one; only `usage` of a
    later cached answer reads it)."""
    if None not in counts:
        return tuple(counts)
    try:
        total = json.loads(answer.content)["usage"]["prompt_tokens"]
    except (ValueError, UnicodeDecodeError, KeyError, TypeError):
        return tuple(counts)
    if not isinstance(total, int):
        return tuple(counts)
    unknown = counts.count(None)
    left = max(0, total - sum(c for c in counts if c is not None))
    shares = iter(left // unknown + (i < left % unknown) for i in range(unknown))
    return tuple(next(shares) if c is None else c for c in counts)


def _describe(timing: Timing, raw: bytes) -> None:
    """The model a request named and its inputs (embeddings, reranking), read from its body
    once the answer is over (parsing it on the way in would delay the first token)."""
    try:
        body = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return
    model = body.get("model") if isinstance(body, dict) else None
    timing.model = model if isinstance(model, str) else None
    timing.inputs = inputs_of(timing.route, body)


async def _relay(upstream: httpcore.Response, timing: Timing | None,
                 raw: bytes, release: Callable[[], None]) -> AsyncIterator[bytes]:
    """Pass the body on as it comes; a metered stream's chunks are shown to the clock first.

    The record is written after the response's last byte (`_finish`, the response's background
    task); only an answer cut short (the client gone, Lemonade failing) is closed here."""
    whole: list[bytes] = []
    complete = False
    try:
        async for chunk in upstream.aiter_stream():
            if timing is not None:
                if timing.streamed:
                    timing.chunk(chunk)
                else:
                    whole.append(chunk)
            yield chunk
        complete = True
    finally:
        if timing is not None and whole and upstream.status == 200:
            timing.answer = b"".join(whole)
        if not complete:
            await _finish(upstream, timing, raw, release)


async def _finish(upstream: httpcore.Response, timing: Timing | None, raw: bytes,
                  release: Callable[[], None]) -> None:
    """After the answer: release the upstream connection, then write the meter's record."""
    try:
        await upstream.aclose()
    finally:
        if timing is not None and not timing.closed:
            _describe(timing, raw)
            timing.close(upstream.status)
        release()


async def upstream_route(request: Request) -> JSONResponse:
    """`GET /trialbox/upstream` says which server answers; `POST` switches it (admin token),
    once nothing is in flight (module trialbox_llm.upstream)."""
    door: FrontDoor = request.app.state.door
    if request.method == "POST":
        if not door.admin.is_admin(request.headers.get("authorization")):
            return _error(403, f"POST {UPSTREAM_PATH} changes the server every sandbox is "
                          "answered by, so it needs the admin token (`Authorization: Bearer "
                          "<token>`; trialbox has it)", "forbidden", "admin_token_required")
        try:
            asked = UpstreamRequest.model_validate_json(await request.body())
        except ValidationError as exc:
            first = exc.errors()[0]
            return _error(400, f"invalid {UPSTREAM_PATH} request: "
                          f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}",
                          "invalid_request_error", "invalid_upstream")
        if not await door.in_flight.drained(asked.drain_s):
            return _error(409, f"{door.in_flight.count} request(s) still in flight after "
                          f"{asked.drain_s:g} s; the server was not switched",
                          "conflict", "requests_in_flight")
        door.serve_from(asked)
        log.info("now served by %s (%s)", door.label or door.upstream, door.upstream)
    return JSONResponse(door.report().model_dump())


def build_app(door: FrontDoor) -> Starlette:
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await door.http.aclose()
        await door.pool.aclose()

    app = Starlette(routes=[Route(METER_PATH, meter_route, methods=["GET"]),
                            Route(DECODING_PATH, decoding_route, methods=["GET", "POST"]),
                            Route(UPSTREAM_PATH, upstream_route, methods=["GET", "POST"]),
                            Route("/{path:path}", proxy, methods=methods)], lifespan=lifespan)
    app.state.door = door
    app.state.meter, app.state.meter_guard = door.meter, door.admin
    app.state.decoding = door.decoding
    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trialbox_llm.front_door",
        description="trialbox's front door in front of a Lemonade Server: admin gate + meter.")
    parser.add_argument("--upstream", required=True, help="Lemonade's origin, e.g. http://lemonade:13305")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=13305)
    parser.add_argument("--embed-max-tokens", type=int, default=None, help=(
        "cut each embedding input to this many tokens, as sentence-transformers does (for a "
        "bundled embedder with a smaller window than the one GAIA chunks for); default: as sent"))
    parser.add_argument("--chat-slots", type=int, default=None, help=(
        "the slots Lemonade's chat model runs (start-lemond: 2); with it, a chat pinned to a "
        "slot another client's answer holds is moved to an idle one (trialbox_llm/slots.py); "
        "default: pinned chats pass as sent"))
    parser.add_argument("--embed-special", default="101,102", help=(
        "the embedder's opening and closing special token ids, OPEN,CLOSE (the bundled MiniLM's: "
        "101,102)"))
    add_cache_option(parser)
    args = parser.parse_args(argv)
    cache_size = cache_mib(parser, args.embedding_cache_mib)
    try:
        token = token_from_environment(os.environ)
    except AdminTokenError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if args.chat_slots is not None and args.chat_slots < 1:
        parser.error("--chat-slots must be 1 or more (the slots Lemonade's chat model runs)")
    if args.embed_max_tokens is not None and args.embed_max_tokens < 2:
        parser.error("--embed-max-tokens must be 2 or more (the special tokens alone take 2)")
    try:
        opening, closing = (int(part) for part in args.embed_special.split(","))
    except ValueError:
        parser.error(f"--embed-special {args.embed_special!r}: give two token ids, OPEN,CLOSE")
    door = FrontDoor(args.upstream.rstrip("/"), AdminGuard(token),
                     embed_max_tokens=args.embed_max_tokens, embed_special=(opening, closing),
                     embedding_cache=EmbeddingCache(cache_size << 20) if cache_size else None,
                     chat_slots=args.chat_slots)
    if door.embedding_cache is not None:
        log.info("embeddings cache on: %d MiB", cache_size)
    uvicorn.run(build_app(door), host=args.host, port=args.port, log_level="info",
                access_log=False, timeout_graceful_shutdown=5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
