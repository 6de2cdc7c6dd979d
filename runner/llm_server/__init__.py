"""trialbox's llm-cpu: a Lemonade-compatible LLM server on llama.cpp (CPU).

Run it with `python -m runner.llm_server --host 0.0.0.0 --port 13305 --models-dir DIR`.
Modules: `catalog` (models and aliases), `backend` (llama.cpp servers and which loads restart
them), `in_flight` (requests a restart waits for), `routes` (the Lemonade API, and why the
server keeps its models resident for all its clients), `embedding_inputs` (inputs cut to the
embedder's limit), `llamacpp_args`, `schemas` (response bodies), `stats`, `system_info`,
`force_tool`, `admin` (the token state-changing requests need), `convert_minilm` and `fetch_models` (model files from PyPI wheels).
"""

from runner.llm_server.catalog import CATALOG, ModelKind, ModelSpec, UnknownModelError, resolve

__all__ = ["CATALOG", "ModelKind", "ModelSpec", "UnknownModelError", "resolve"]
