"""llama.cpp, in process, through xllamacpp: one llama-server per loaded model on loopback.

Why this shape: xllamacpp embeds llama.cpp's own HTTP server (the same code Lemonade launches as
`llama-server`), but its router mode is compiled out, so each model gets its own
`xllamacpp.Server` on a private loopback port and the Lemonade front proxies to it. Loading is
blocking C++ work; callers run it in a thread, under one lock so two loads never race.
"""

from __future__ import annotations

import gc
import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from runner.llm_server.catalog import CATALOG, ModelKind, ModelSpec
from runner.llm_server.llamacpp_args import LlamaArgs

log = logging.getLogger(__name__)


class BackendError(RuntimeError):
    """A model could not be started; the message says which file and why."""


@dataclass
class LoadedModel:
    """A running llama-server and what it was started with."""

    spec: ModelSpec
    #: The name the last load asked for (an alias or the real name); `/health` reports it.
    loaded_as: str
    ctx_size: int
    port: int
    args: LlamaArgs
    llamacpp_args: str
    server: object = field(repr=False)
    load_seconds: float = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def slots(self) -> int:
        return self.args.parallel or 1


def free_loopback_port() -> int:
    """A port the kernel says is free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def effective_ctx_size(spec: ModelSpec, requested: int | None) -> int:
    """The window to start with: as asked for a chat model (GAIA verifies it settles exactly
    there), never beyond the trained window for the embedder (BERT has 512 positions)."""
    ctx = requested or spec.default_ctx_size
    if spec.kind is ModelKind.EMBEDDING:
        return min(ctx, spec.max_context_window)
    return ctx


class LlamaBackend:
    """Starts, restarts and stops the per-model llama.cpp servers."""

    def __init__(
        self,
        models_dir: Path,
        threads: int,
        catalog: tuple[ModelSpec, ...] = CATALOG,
        verbosity: int = 1,
    ) -> None:
        self.models_dir = models_dir
        self.threads = threads
        self.catalog = catalog
        self.verbosity = verbosity
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

    def loaded(self) -> list[LoadedModel]:
        """Running models, in catalog order (chat first)."""
        return [self._loaded[s.name] for s in self.catalog if s.name in self._loaded]

    def get(self, spec: ModelSpec) -> LoadedModel | None:
        return self._loaded.get(spec.name)

    def load(
        self,
        spec: ModelSpec,
        loaded_as: str,
        ctx_size: int | None = None,
        args: LlamaArgs | None = None,
        llamacpp_args: str = "",
    ) -> LoadedModel:
        """Make `spec` run with these settings; a running copy with the same settings is kept
        (only its reported name changes), a different one is restarted."""
        args = args or LlamaArgs()
        with self._lock:
            ctx = effective_ctx_size(spec, ctx_size)
            current = self._loaded.get(spec.name)
            if current and self._same_settings(current, ctx, args, ctx_size is None):
                current.loaded_as = loaded_as
                return current
            if current:
                self._stop(current)
            started = self._start(spec, loaded_as, ctx, args, llamacpp_args)
            self._loaded[spec.name] = started
            return started

    def ensure_loaded(self, spec: ModelSpec, requested_name: str) -> LoadedModel:
        """What a completion or embedding request does: load at defaults when not running."""
        current = self._loaded.get(spec.name)
        if current is not None:
            return current
        return self.load(spec, requested_name)

    def unload(self, spec: ModelSpec) -> bool:
        """Stop `spec`; False when it was not running."""
        with self._lock:
            current = self._loaded.pop(spec.name, None)
            if current is None:
                return False
            self._stop(current)
            return True

    def close(self) -> None:
        """Stop every server (called on SIGTERM before the process exits)."""
        with self._lock:
            for name in list(self._loaded):
                self._stop(self._loaded.pop(name))

    @staticmethod
    def _same_settings(current: LoadedModel, ctx: int, args: LlamaArgs, ctx_default: bool) -> bool:
        """Whether a running copy already satisfies a load: a load that names no window or
        flags accepts whatever is running, as Lemonade's does."""
        if not ctx_default and current.ctx_size != ctx:
            return False
        asked = args.model_dump(exclude={"ignored"})
        if asked == LlamaArgs().model_dump(exclude={"ignored"}):
            return True
        return asked == current.args.model_dump(exclude={"ignored"})

    def _params(self, spec: ModelSpec, ctx: int, args: LlamaArgs, port: int) -> object:
        import xllamacpp

        params = xllamacpp.CommonParams()
        params.model.path = str(self.model_path(spec))
        params.model_alias = {spec.name} if isinstance(params.model_alias, set) else spec.name
        params.hostnames = ["127.0.0.1"]
        params.port = port
        params.n_ctx = ctx
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.verbosity = self.verbosity
        if spec.kind is ModelKind.EMBEDDING:
            # A BERT encoder must see a whole input in one micro-batch; its window is the limit.
            params.embedding = True
            params.n_batch = ctx
            params.n_ubatch = ctx
        else:
            if args.parallel:
                params.n_parallel = args.parallel
            if args.ubatch_size:
                params.n_ubatch = args.ubatch_size
        params.kv_unified = args.kv_unified
        if args.cache_ram_mib is not None:
            params.cache_ram_mib = args.cache_ram_mib
        if args.slot_prompt_similarity is not None:
            params.slot_prompt_similarity = args.slot_prompt_similarity
        return params

    def _start(
        self, spec: ModelSpec, loaded_as: str, ctx: int, args: LlamaArgs, llamacpp_args: str
    ) -> LoadedModel:
        import xllamacpp

        path = self.model_path(spec)
        if not path.is_file():
            raise BackendError(f"{path}: model file missing; run scripts/fetch-models")
        port = free_loopback_port()
        started_at = time.monotonic()
        try:
            server = xllamacpp.Server(self._params(spec, ctx, args, port))
        except Exception as exc:  # xllamacpp raises plain RuntimeError/ValueError
            raise BackendError(f"llama.cpp could not start {path}: {exc}") from exc
        seconds = time.monotonic() - started_at
        log.info(
            "loaded %s (ctx %d, %d slot(s)) on port %d in %.2fs",
            spec.name,
            ctx,
            args.parallel or 1,
            port,
            seconds,
        )
        return LoadedModel(spec, loaded_as, ctx, port, args, llamacpp_args, server, seconds)

    @staticmethod
    def _stop(model: LoadedModel) -> None:
        # Dropping the last reference runs xllamacpp's destructor, which stops the HTTP
        # thread and frees the model; collect now so the memory is back before a reload.
        server = model.server
        model.server = None
        del server
        gc.collect()
        log.info("unloaded %s", model.spec.name)
