"""trialbox's llm-cpu: a Lemonade-compatible LLM server on llama.cpp (CPU).

Run it with `python -m runner.llm_server --host 0.0.0.0 --port 13305 --models-dir DIR`.
Modules: `catalog` (models and aliases), `backend` (llama.cpp servers), `routes` (the Lemonade
API), `schemas` (response bodies), `stats`, `system_info`, `force_tool`, `convert_minilm` and
`fetch_models` (model files from PyPI wheels).
"""

from runner.llm_server.catalog import CATALOG, ModelKind, ModelSpec, UnknownModelError, resolve

__all__ = ["CATALOG", "ModelKind", "ModelSpec", "UnknownModelError", "resolve"]
