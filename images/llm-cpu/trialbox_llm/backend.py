"""llama.cpp, in process, through xllamacpp: one llama-server per loaded model on loopback.

Why this shape: xllamacpp embeds llama.cpp's own HTTP server (the same code Lemonade launches as
`llama-server`), but its router mode is compiled out, so each model gets its own
`xllamacpp.Server` on a private loopback port and the Lemonade front proxies to it. Loading is
blocking C++ work; callers run it in a thread, under one lock so two loads never race.
Whether requests are still in flight on a model is the front's business (`in_flight`): the
backend only refuses to restart a model unless the caller says nothing uses it.
"""

from __future__ import annotations

import gc
import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx

from trialbox_llm.catalog import ModelKind, ModelSpec, catalog_for
from trialbox_llm.embedder_settings import EmbedderSettings
from trialbox_llm.llamacpp_args import LlamaArgs, parse_llamacpp_args

log = logging.getLogger(__name__)


class BackendError(RuntimeError):
    """A model could not be started; the message says which file and why."""


@dataclass
class LoadedModel:
    """A running llama-server, what it was started with, and what llama.cpp says it runs."""

    spec: ModelSpec
    #: The name the last load asked for (an alias or the real name); `/health` reports it.
    loaded_as: str
    ctx_size: int
    port: int
    args: LlamaArgs
    server: object = field(repr=False)
    load_seconds: float = 0.0
    #: When this llama-server started (UTC, ISO 8601): it changes only when the model restarts.
    loaded_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    #: The window llama.cpp gives each request (its `/slots` `n_ctx`): llama.cpp caps a slot at
    #: the trained window, so this can be smaller than `ctx_size`. None if it did not say.
    context_per_request: int | None = None
    #: The trained window llama.cpp read from the GGUF (`/v1/models` `meta.n_ctx_train`).
    trained_context: int | None = None
    #: How many slots llama.cpp runs (its `/slots`), i.e. requests it answers at once.
    slot_count: int | None = None
    #: Every llama-server holding this model's slots, in slot order: `(port, slots)` each. One
    #: server unless the chat model is split (`LlamaBackend.chat_servers`); empty: only `port`.
    servers: tuple[tuple[int, int], ...] = ()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def place(self, slot: int) -> tuple[str, int]:
        """The llama-server that holds server-wide slot `slot`, and the slot's number there."""
        first = 0
        for port, count in self.servers:
            if slot < first + count:
                return f"http://127.0.0.1:{port}", slot - first
            first += count
        return self.url, slot

    @property
    def server_count(self) -> int:
        """How many llama-servers hold this model's slots."""
        return max(1, len(self.servers))

    @property
    def slots(self) -> int:
        return self.slot_count or self.args.parallel or 1

    @property
    def max_context_window(self) -> int:
        return self.trained_context or self.spec.max_context_window


def free_loopback_port() -> int:
    """A port the kernel says is free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def effective_ctx_size(spec: ModelSpec, requested: int | None) -> int | None:
    """The window a load asks for, as this model can run it: never beyond the trained window
    for the embedder (BERT has 512 positions); a chat window is taken as asked."""
    if requested is not None and spec.kind is ModelKind.EMBEDDING:
        return min(requested, spec.max_context_window)
    return requested


def effective_args(spec: ModelSpec, args: LlamaArgs) -> LlamaArgs:
    """The flags that take effect on this kind of model; the rest move to `ignored`.

    An embedder runs its whole window as one micro-batch and serves without chat slots, so
    `--ubatch-size` and `--parallel` change nothing there (GAIA sends `--ubatch-size 2048`
    to its embedder); keeping them would make two equivalent loads look different.
    """
    if spec.kind is not ModelKind.EMBEDDING:
        return args
    ignored = list(args.ignored)
    if args.ubatch_size is not None:
        ignored.append(
            f"--ubatch-size {args.ubatch_size} (an embedder's micro-batch is its window)"
        )
    if args.parallel is not None:
        ignored.append(f"--parallel {args.parallel} (an embedder has no chat slots)")
    return args.model_copy(update={"ubatch_size": None, "parallel": None, "ignored": ignored})


@dataclass(frozen=True)
class LoadPlan:
    """What a `POST /load` needs: nothing (`satisfied`), or a (re)start with these settings."""

    satisfied: bool
    ctx_size: int
    args: LlamaArgs


def plan_load(
    spec: ModelSpec,
    current: LoadedModel | None,
    ctx_size: int | None,
    args: LlamaArgs,
    defaults: LoadPlan,
) -> LoadPlan:
    """What a load of `spec` needs when `current` runs (None: nothing runs; `defaults` then
    fill in what the load does not name).

    Satisfied: the window asked for is no larger than the running one and every named flag
    has its running value. Otherwise a restart keeps what the request does not name and
    never shrinks the window: the other clients of this server may be using it.
    """
    args = effective_args(spec, args)
    ctx = effective_ctx_size(spec, ctx_size)
    if current is None:
        return LoadPlan(False, ctx or defaults.ctx_size, args.over(defaults.args))
    if (ctx is None or ctx <= current.ctx_size) and args.satisfied_by(current.args):
        return LoadPlan(True, current.ctx_size, current.args)
    return LoadPlan(False, max(ctx or 0, current.ctx_size), args.over(current.args))


class LlamaBackend:
    """Starts, restarts and stops the per-model llama.cpp servers.

    A running model is never started again for a load it already satisfies (a window at
    least as large, and every named flag as running): several GAIA instances share this
    server and each loads the models it wants, so a restart would cut the others off.
    """

    def __init__(
        self,
        models_dir: Path,
        threads: int,
        catalog: tuple[ModelSpec, ...] | None = None,
        verbosity: int = 1,
        chat_ctx: int | None = None,
        embedder: EmbedderSettings | None = None,
        poll: int | None = None,
        decode_threads: int | None = None,
        chat_flash_attn: bool | None = None,
        chat_servers: int = 1,
    ) -> None:
        self.models_dir = models_dir
        #: Threads for prompt processing (llama.cpp's `-tb`) and, unless `decode_threads`
        #: says otherwise, for decoding one token at a time (its `-t`).
        self.threads = threads
        self.decode_threads = decode_threads or threads
        #: llama.cpp's busy-wait level for its worker threads (`--poll`); None keeps llama.cpp's.
        self.poll = poll
        #: Flash attention for the chat model: on, off, or None (llama.cpp decides: on for CPU).
        self.chat_flash_attn = chat_flash_attn
        #: llama-servers the chat model's slots are split over (at most one per slot), each
        #: with its own threads: llama.cpp decodes every slot of one server in one step on one
        #: thread pool, so two sandboxes' answers share its threads; split, they decode at once.
        self.chat_servers = chat_servers
        self.embedder = embedder or EmbedderSettings()
        self.catalog = catalog or catalog_for(self.embedder.weights)
        self.verbosity = verbosity
        self.chat_ctx = chat_ctx
        self._loaded: dict[str, LoadedModel] = {}
        self._lock = threading.Lock()

    def model_path(self, spec: ModelSpec) -> Path:
        return self.models_dir / spec.file

    def check_files(self) -> None:
        """Fail at startup, naming the file and the fix, rather than on the first request."""
        missing = [
            str(self.model_path(s)) for s in self.catalog if not self.model_path(s).is_file()
        ]
        if missing:
            raise BackendError(
                f"model file(s) missing: {', '.join(missing)}; run scripts/fetch-models "
                f"{self.models_dir}"
            )

    def served_model(self, spec: ModelSpec) -> str:
        """What `/health` and `/models` name as the model answering for `spec`."""
        return spec.name

    def is_downloaded(self, spec: ModelSpec) -> bool:
        return self.model_path(spec).is_file()

    def default_ctx_size(self, spec: ModelSpec) -> int:
        """The window a model starts at when no load names one (`--chat-ctx` for chat)."""
        if spec.kind is ModelKind.CHAT and self.chat_ctx:
            return self.chat_ctx
        return spec.default_ctx_size

    def default_args(self, spec: ModelSpec) -> LlamaArgs:
        return effective_args(spec, parse_llamacpp_args(spec.default_llamacpp_args))

    def loaded(self) -> list[LoadedModel]:
        """Running models, in catalog order (chat first)."""
        return [self._loaded[s.name] for s in self.catalog if s.name in self._loaded]

    def get(self, spec: ModelSpec) -> LoadedModel | None:
        return self._loaded.get(spec.name)

    def plan(self, spec: ModelSpec, ctx_size: int | None, args: LlamaArgs) -> LoadPlan:
        """What a load of `spec` with this window and these flags needs, given what runs."""
        defaults = LoadPlan(False, self.default_ctx_size(spec), self.default_args(spec))
        return plan_load(spec, self._loaded.get(spec.name), ctx_size, args, defaults)

    def reuse(
        self, spec: ModelSpec, loaded_as: str, ctx_size: int | None, args: LlamaArgs
    ) -> LoadedModel | None:
        """The running copy of `spec` when it satisfies this load (it is then reported under
        `loaded_as`); None when the load needs a (re)start."""
        with self._lock:
            current = self._loaded.get(spec.name)
            if current is None or not self.plan(spec, ctx_size, args).satisfied:
                return None
            current.loaded_as = loaded_as
            return current

    def load(
        self,
        spec: ModelSpec,
        loaded_as: str,
        ctx_size: int | None = None,
        args: LlamaArgs | None = None,
    ) -> LoadedModel:
        """Make `spec` run as asked: reuse a running copy that satisfies the load, otherwise
        (re)start it. The caller makes sure no request is in flight on a running copy."""
        args = args or LlamaArgs()
        with self._lock:
            plan = self.plan(spec, ctx_size, args)
            current = self._loaded.get(spec.name)
            if plan.satisfied and current is not None:
                current.loaded_as = loaded_as
                return current
            if current is not None:
                self._stop(self._loaded.pop(spec.name))
            started = self._start(spec, loaded_as, plan.ctx_size, plan.args)
            self._loaded[spec.name] = started
            return started

    def ensure_loaded(self, spec: ModelSpec, requested_name: str) -> LoadedModel:
        """What a completion or embedding request does: load at defaults when not running."""
        current = self._loaded.get(spec.name)
        if current is not None:
            return current
        with self._lock:
            current = self._loaded.get(spec.name)
            if current is None:
                plan = self.plan(spec, None, LlamaArgs())
                current = self._start(spec, requested_name, plan.ctx_size, plan.args)
                self._loaded[spec.name] = current
            return current

    def close(self) -> None:
        """Stop every server (called on SIGTERM before the process exits)."""
        with self._lock:
            for name in list(self._loaded):
                self._stop(self._loaded.pop(name))

    def _params(self, spec: ModelSpec, ctx: int, args: LlamaArgs, port: int,
                slots: int | None = None, servers: int = 1) -> object:
        """llama.cpp's settings for one llama-server of `spec`; `slots`: its share of the chat
        model's slots when they are split over `servers` (None: all of `args.parallel`)."""
        import xllamacpp

        params = xllamacpp.CommonParams()
        params.model.path = str(self.model_path(spec))
        params.model_alias = {spec.name} if isinstance(params.model_alias, set) else spec.name
        params.hostnames = ["127.0.0.1"]
        params.port = port
        params.n_ctx = ctx
        # Split servers decode at once, so they share the decode threads out between them.
        params.cpuparams.n_threads = max(1, self.decode_threads // servers)
        params.cpuparams_batch.n_threads = self.threads
        if self.poll is not None:
            params.cpuparams.poll = self.poll
            params.cpuparams_batch.poll = self.poll
        params.verbosity = self.verbosity
        if spec.kind is ModelKind.EMBEDDING:
            # A BERT encoder must see a whole input in one micro-batch. Each slot keeps the
            # whole window (the context is split evenly between slots), and one micro-batch
            # holds a full window per slot, so a request's inputs are embedded `slots` at a
            # time instead of one per decode.
            slots = self.embedder.slots
            params.embedding = True
            params.n_parallel = slots
            params.n_ctx = ctx * slots
            params.n_batch = ctx * slots
            params.n_ubatch = ctx * slots
            if self.embedder.flash_attn is not None:
                params.flash_attn_type = _FLASH_ATTN[self.embedder.flash_attn]
        else:
            if slots or args.parallel:
                params.n_parallel = slots or args.parallel
            if args.ubatch_size:
                params.n_ubatch = args.ubatch_size
            if self.chat_flash_attn is not None:
                params.flash_attn_type = _FLASH_ATTN[self.chat_flash_attn]
        if args.kv_unified is not None:
            params.kv_unified = args.kv_unified
        if args.cache_ram_mib is not None:
            params.cache_ram_mib = args.cache_ram_mib
        if args.slot_prompt_similarity is not None:
            params.slot_prompt_similarity = args.slot_prompt_similarity
        return params

    def _start(self, spec: ModelSpec, loaded_as: str, ctx: int, args: LlamaArgs) -> LoadedModel:
        import xllamacpp

        path = self.model_path(spec)
        if not path.is_file():
            raise BackendError(f"{path}: model file missing; run scripts/fetch-models")
        total = args.parallel or 1
        shares = split_slots(total, self.chat_servers if spec.kind is ModelKind.CHAT else 1)
        started_at = time.monotonic()
        running: list[object] = []
        ports: list[int] = []
        try:
            for share in shares:
                port = free_loopback_port()
                params = self._params(spec, share_ctx(spec, ctx, share, total), args, port,
                                      share if len(shares) > 1 else None, len(shares))
                running.append(xllamacpp.Server(params))
                ports.append(port)
        except Exception as exc:  # xllamacpp raises plain RuntimeError/ValueError
            running.clear()  # the ones already started stop as their last reference goes
            gc.collect()
            raise BackendError(f"llama.cpp could not start {path}: {exc}") from exc
        seconds = time.monotonic() - started_at
        model = LoadedModel(spec, loaded_as, ctx, ports[0], args,
                            running[0] if len(running) == 1 else tuple(running), seconds,
                            servers=tuple(zip(ports, shares, strict=True)))
        ask_llama_cpp(model)
        log.info(
            "loaded %s (ctx %d, %s per request, %d slot(s) on %d llama-server(s)) on port(s) "
            "%s in %.2fs",
            spec.name,
            ctx,
            model.context_per_request,
            model.slots,
            len(ports),
            ", ".join(map(str, ports)),
            seconds,
        )
        return model

    @staticmethod
    def _stop(model: LoadedModel) -> None:
        # Dropping the last reference runs xllamacpp's destructor, which stops the HTTP
        # thread and frees the model; collect now so the memory is back before a reload.
        server = model.server
        model.server = None
        del server
        gc.collect()
        log.info("unloaded %s", model.spec.name)


#: llama.cpp's `llama_flash_attn_type` values (-1, auto, is what an unset flag leaves).
_FLASH_ATTN = {False: 0, True: 1}


def split_slots(slots: int, servers: int) -> tuple[int, ...]:
    """How many of `slots` each of (at most) `servers` llama-servers holds, first ones first."""
    servers = max(1, min(servers, slots))
    return tuple(slots // servers + (i < slots % servers) for i in range(servers))


def share_ctx(spec: ModelSpec, ctx: int, slots: int, total: int) -> int:
    """The window of a llama-server holding `slots` of the model's `total` slots: its share of
    `ctx`, so the servers together hold the memory one would, but never less than one request
    may use (the whole window up to the trained one), so no request gets less."""
    if slots >= total:
        return ctx
    return max(ctx * slots // total, min(ctx, spec.max_context_window))


def ask_llama_cpp(model: LoadedModel) -> None:
    """Fill in the windows and slot count as the running llama-servers report them, so
    `/health` repeats llama.cpp's own figures instead of what we meant to configure."""
    ports = [port for port, _ in model.servers] or [model.port]
    try:
        slots = [httpx.get(f"http://127.0.0.1:{port}/slots", timeout=10).json()
                 for port in ports]
        models = httpx.get(f"{model.url}/v1/models", timeout=10).json()
    except (httpx.HTTPError, ValueError) as exc:
        log.warning("llama-server of %s did not report its windows: %r", model.spec.name, exc)
        return
    if all(isinstance(each, list) and each and isinstance(each[0], dict) for each in slots):
        model.slot_count = sum(len(each) for each in slots)
        model.context_per_request = _integer(slots[0][0].get("n_ctx"))
        model.servers = tuple((port, len(each)) for port, each in zip(ports, slots, strict=True))
    data = models.get("data") if isinstance(models, dict) else None
    meta = data[0].get("meta") if isinstance(data, list) and data else None
    if isinstance(meta, dict):
        model.trained_context = _integer(meta.get("n_ctx_train"))


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
