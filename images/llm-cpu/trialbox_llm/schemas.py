"""Response and request bodies of the Lemonade API as this server speaks it.

Field names follow Lemonade (v11 / 2026.x) because GAIA reads them by name; every field GAIA
0.25.1 reads is here. Our additions (`server`, `aliases`, `served_model`, ...) only add
information: they say what really answers, never pretend otherwise.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ServerIdentity(BaseModel):
    """Who is answering: trialbox's CPU server on llama.cpp, not AMD's Lemonade."""

    name: str = "trialbox-llm-cpu"
    version: str
    engine: str
    lemonade_api: str = Field(description="Lemonade release whose API this server implements")
    note: str = (
        "Lemonade-compatible API served by trialbox's llm-cpu (llama.cpp on CPU); model names "
        "that GAIA asks for are aliases of small bundled models, listed in `aliases`."
    )


class RecipeOptions(BaseModel):
    ctx_size: int
    llamacpp_backend: str = "cpu"
    llamacpp_args: str = ""


class LoadedModelEntry(BaseModel):
    """One entry of `all_models_loaded`."""

    model_name: str
    checkpoint: str
    type: str
    recipe: Literal["llamacpp"] = "llamacpp"
    device: str = "cpu"
    status: str = "loaded"
    recipe_options: RecipeOptions
    max_context_window: int
    served_model: str = Field(description="the real model that answers under model_name")
    slots: int
    llama_servers: int = Field(
        default=1, description="llama-servers holding the slots, each decoding on its own "
        "threads (`--chat-servers`; 1 for an embedder)")
    context_per_request: int | None = Field(
        description="the window llama.cpp gives one request (its /slots n_ctx): llama.cpp caps "
        "each slot at the trained window, so this is min(ctx_size, max_context_window)"
    )
    max_input_tokens: int | None = Field(
        default=None, description="embedders: longer inputs are cut to this many tokens"
    )
    in_flight: int = Field(description="requests this model is answering right now")
    ignored_llamacpp_args: list[str] = []
    load_seconds: float
    loaded_at: str = Field(description="when this model's llama-server started (UTC)")


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    version: str
    model_loaded: str | None
    all_models_loaded: list[LoadedModelEntry]
    max_models: dict[str, int]
    server: ServerIdentity
    aliases: dict[str, str]
    force_tool: str | None = Field(
        description="tool name the TRIALBOX_LLM_FORCE_TOOL switch forces, or null when off"
    )
    max_output_tokens: int | None = Field(
        default=None, description="cap on tokens generated per completion, or null for none"
    )


class ModelEntry(BaseModel):
    """One entry of `GET /models`."""

    id: str
    object: Literal["model"] = "model"
    owned_by: str = "trialbox-llm-cpu"
    checkpoint: str
    recipe: Literal["llamacpp"] = "llamacpp"
    type: str
    downloaded: bool = True
    suggested: bool = True
    labels: list[str]
    max_context_window: int
    context_length: int
    size: float = Field(description="file size in GB, as Lemonade reports it")
    served_model: str
    alias: bool


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelEntry]


class CpuDevice(BaseModel):
    name: str
    cores: int
    threads: int
    available: bool = True


class EmbeddingCounts(BaseModel):
    """Embedding inputs since the server started, and how many were cut to the limit."""

    inputs: int = 0
    truncated: int = 0
    max_input_tokens: int | None = None


class Stats(BaseModel):
    """`GET /stats`: the last completion (null until one has run), plus our `embeddings`."""

    time_to_first_token: float | None = None
    tokens_per_second: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    prompt_tokens: int | None = None


class StatsReport(Stats):
    """What `GET /stats` answers: Lemonade's fields and our embedding counts."""

    embeddings: EmbeddingCounts


class LoadRequest(BaseModel):
    """`POST /load` (GAIA sends `model_name`; `model` is accepted too)."""

    model_config = ConfigDict(extra="allow")

    model_name: str | None = None
    model: str | None = None
    ctx_size: int | None = Field(default=None, gt=0)
    llamacpp_args: str | None = None
    llamacpp_backend: str | None = None

    @property
    def name(self) -> str | None:
        return self.model_name or self.model


class PullRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model_name: str | None = None
    model: str | None = None
    stream: bool = False

    @property
    def name(self) -> str | None:
        return self.model_name or self.model


class UnloadRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model_name: str | None = None
    model: str | None = None

    @property
    def name(self) -> str | None:
        return self.model_name or self.model


class ErrorBody(BaseModel):
    message: str
    type: str
    code: str | None = None


class ErrorResponse(BaseModel):
    """OpenAI/Lemonade error shape; GAIA reads `error.type` and `error.code`."""

    error: ErrorBody

    @classmethod
    def of(cls, message: str, type_: str, code: str | None = None) -> dict[str, Any]:
        return cls(error=ErrorBody(message=message, type=type_, code=code)).model_dump()
