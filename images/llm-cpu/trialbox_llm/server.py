"""Start the Lemonade-compatible server: check the model files, start llama.cpp, serve HTTP.

Both models are loaded before the port opens, so `GET /live` answering means chat and
embeddings answer too (the container HEALTHCHECK and the tests rely on that). They start as
GAIA 0.25.1 loads them, so GAIA's own `POST /load` calls change nothing: the chat model with
GAIA's flags (two slots, unified KV cache) at `--chat-ctx` tokens, by default the 65536 GAIA
requires of its default chat model (GAIA refuses to share a smaller window another app
chose, and would otherwise reload it). llama.cpp allocates the whole window (~1.5 GB of KV
cache for SmolLM2) but gives one request at most the trained 8192 tokens; `/health` reports
both, as llama.cpp states them.
"""

from __future__ import annotations

import logging
import os
import signal
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import uvicorn

from trialbox_llm import __version__, double
from trialbox_llm.admin import AdminGuard
from trialbox_llm.backend import LlamaBackend
from trialbox_llm.embedder_settings import EmbedderSettings
from trialbox_llm.embedding_cache import EmbeddingCache
from trialbox_llm.force_tool import from_environment
from trialbox_llm.routes import DEFAULT_DRAIN_TIMEOUT_S, ServerState, build_app
from trialbox_llm.schemas import ServerIdentity

log = logging.getLogger("trialbox_llm")

#: The Lemonade release GAIA 0.25.1 is built against (its `LEMONADE_VERSION`). `/health`
#: reports `<this>+trialbox-llm-cpu.<our version>` (`trialbox-llm-double` under `--double`):
#: GAIA's version parser reads the API level, and the string itself says who is answering.
LEMONADE_API_LEVEL = "2026.43.3"


@dataclass(frozen=True)
class ServeOptions:
    host: str
    port: int
    models_dir: Path
    threads: int
    llama_verbosity: int = 1
    #: The chat model's window (`--chat-ctx`); None keeps the catalog's.
    chat_ctx: int | None = None
    #: How long a restart waits for the requests in flight on its model.
    drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S
    #: `--max-output-tokens`: cap per completion (None = none).
    max_output_tokens: int | None = None
    #: `TRIALBOX_LLM_ADMIN_TOKEN`: required for state-changing requests (None = refuse them).
    admin_token: str | None = None
    #: `--double`: instant fixed answers instead of llama.cpp (trialbox_llm/double.py).
    double: bool = False
    #: `--embedder-*`: how llama.cpp runs the embedder (speed only; embedder_settings.py).
    embedder: EmbedderSettings = EmbedderSettings()
    #: `--embedding-cache-mib`: vectors kept to answer repeated inputs (0 = no cache).
    embedding_cache_mib: int = 0
    #: `--poll`: llama.cpp's busy-wait level for its worker threads (None = llama.cpp's own).
    poll: int | None = None
    #: `--decode-threads`: threads decoding one token at a time (None = `threads`).
    decode_threads: int | None = None
    #: `--chat-flash-attn`: llama.cpp's flash attention for the chat model (None = auto).
    chat_flash_attn: bool | None = None
    #: `--chat-servers`: llama-servers the chat model's slots are split over (1: one holds all).
    chat_servers: int = 1


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"


def identity() -> ServerIdentity:
    return ServerIdentity(
        version=__version__,
        engine=f"llama.cpp via xllamacpp {package_version('xllamacpp')} (CPU)",
        lemonade_api=LEMONADE_API_LEVEL,
    )


def build_state(options: ServeOptions) -> ServerState:
    force_tool = from_environment(dict(os.environ))
    backend_type = double.DoubleBackend if options.double else LlamaBackend
    backend = backend_type(
        options.models_dir,
        threads=options.threads,
        verbosity=options.llama_verbosity,
        chat_ctx=options.chat_ctx,
        embedder=options.embedder,
        poll=options.poll,
        decode_threads=options.decode_threads,
        chat_flash_attn=options.chat_flash_attn,
        chat_servers=options.chat_servers,
    )
    backend.check_files()
    log.info("embedder: %s", options.embedder.describe())
    if options.embedding_cache_mib:
        log.info("embeddings cache: %d MiB (repeated inputs answered without the model)",
                 options.embedding_cache_mib)
    for spec in backend.catalog:
        # Preload under the name GAIA asks for, so its first /health sees its model.
        backend.load(spec, spec.aliases[0] if spec.aliases else spec.name)
    if options.admin_token is None:
        log.info("no admin token: loads that would restart a model are refused for everyone")
    if force_tool:
        log.warning(
            "TRIALBOX_LLM_FORCE_TOOL is on: first call of each turn forced to %r", force_tool.tool
        )
    if options.double:
        log.warning("--double: answering with fixed text, no model (%s)", double.DOUBLE_NAME)
    return ServerState(
        backend=backend,
        identity=double.identity(__version__, LEMONADE_API_LEVEL) if options.double else identity(),
        models_dir=options.models_dir,
        llama_version=package_version("xllamacpp"),
        force_tool=force_tool,
        last_loaded_chat=backend.catalog[0].aliases[0],
        drain_timeout_s=options.drain_timeout_s,
        max_output_tokens=options.max_output_tokens,
        admin=AdminGuard(options.admin_token),
        embedding_cache=EmbeddingCache(options.embedding_cache_mib << 20)
        if options.embedding_cache_mib else None,
    )


def serve(options: ServeOptions) -> None:
    """Run until SIGTERM/SIGINT; uvicorn's handlers stop the loop, then llama.cpp is stopped."""
    state = build_state(options)
    app = build_app(state, on_shutdown=state.backend.close)
    config = uvicorn.Config(
        app,
        host=options.host,
        port=options.port,
        log_level="info",
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    # uvicorn stops gracefully on SIGTERM/SIGINT, then raises the signal again for the handler
    # that was installed before it; this one just lets the process finish and exit 0.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda number, _frame: log.info("stopped by signal %d", number))
    try:
        uvicorn.Server(config).run()
    finally:
        state.backend.close()
