"""Start the Lemonade-compatible server: check the model files, start llama.cpp, serve HTTP.

Both models are loaded before the port opens, so `GET /live` answering means chat and
embeddings answer too (the container HEALTHCHECK and the tests rely on that). The chat model
starts at Lemonade's own auto-load window, which GAIA recognises and resizes with `POST /load`.
"""

from __future__ import annotations

import logging
import os
import signal
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import uvicorn

from runner.llm_server.backend import LlamaBackend
from runner.llm_server.catalog import CATALOG
from runner.llm_server.force_tool import from_environment
from runner.llm_server.routes import ServerState, build_app
from runner.llm_server.schemas import ServerIdentity

log = logging.getLogger("runner.llm_server")

#: The Lemonade release GAIA 0.25.1 is built against (its `LEMONADE_VERSION`). `/health`
#: reports `<this>+trialbox-llm-cpu.<our version>`: GAIA's version parser reads the API level,
#: and the string itself says who is answering.
LEMONADE_API_LEVEL = "2026.43.3"


@dataclass(frozen=True)
class ServeOptions:
    host: str
    port: int
    models_dir: Path
    threads: int
    llama_verbosity: int = 1


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"


def identity() -> ServerIdentity:
    return ServerIdentity(
        version=package_version("trialbox"),
        engine=f"llama.cpp via xllamacpp {package_version('xllamacpp')} (CPU)",
        lemonade_api=LEMONADE_API_LEVEL,
    )


def build_state(options: ServeOptions) -> ServerState:
    force_tool = from_environment(dict(os.environ))
    backend = LlamaBackend(
        options.models_dir,
        threads=options.threads,
        verbosity=options.llama_verbosity,
    )
    backend.check_files()
    for spec in CATALOG:
        # Preload under the name GAIA asks for, so its first /health sees its model.
        backend.load(spec, spec.aliases[0] if spec.aliases else spec.name)
    if force_tool:
        log.warning(
            "TRIALBOX_LLM_FORCE_TOOL is on: first call of each turn forced to %r", force_tool.tool
        )
    return ServerState(
        backend=backend,
        identity=identity(),
        models_dir=options.models_dir,
        llama_version=package_version("xllamacpp"),
        force_tool=force_tool,
        last_loaded_chat=CATALOG[0].aliases[0],
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
