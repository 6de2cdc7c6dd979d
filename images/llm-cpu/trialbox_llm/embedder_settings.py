"""How llama.cpp runs the embedder: the settings that decide its speed, never its vectors.

Why these three: GAIA sends batches of 25 chunks of up to 256 tokens. With one slot llama.cpp
embeds them one input per decode; with several slots it packs that many inputs into one decode
(each slot keeps the model's whole 512-token window, so no input is cut shorter). Flash
attention on CPU skips the masked-out pairs of a packed batch instead of computing them. Q8_0
weights halve the bytes each matrix product reads; they are used only because their vectors
stay within cosine 0.999 of the f16 ones on our corpus (tests/integration/
test_embedding_equivalence.py checks it). `scripts/bench-embeddings` measures `BEFORE`
against the defaults side by side.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class EmbedderWeights(StrEnum):
    """Which converted MiniLM file serves embeddings (both are made by `fetch_models`)."""

    F16 = "f16"
    Q8_0 = "q8_0"


class EmbedderSettings(BaseModel):
    """The embedder's llama.cpp settings; GAIA's own load flags do not change them."""

    model_config = ConfigDict(frozen=True)

    #: Inputs of one request embedded in the same decode (llama.cpp slots). Default 1: with
    #: Q8_0, packing moved a short input's vector by ~1e-4 (cosine 0.99989) depending on its
    #: batch neighbours, and a chunk's vector must not depend on them; 4 gained only ~10 %.
    slots: int = Field(default=1, ge=1, le=64)
    #: llama.cpp's flash attention for the encoder: on, off, or None (llama.cpp decides).
    flash_attn: bool | None = True
    #: The weights file (f16 as converted, or its Q8_0 quantisation).
    weights: EmbedderWeights = EmbedderWeights.Q8_0

    def describe(self) -> str:
        """One line for logs and benchmark tables."""
        attention = {True: "flash-attn on", False: "flash-attn off", None: "flash-attn auto"}[
            self.flash_attn
        ]
        return f"{self.weights.value}, {self.slots} slot(s), {attention}"


#: What the server ran before issue 23: f16 weights, one input per decode, llama.cpp's own
#: choice of attention.
BEFORE = EmbedderSettings(slots=1, flash_attn=None, weights=EmbedderWeights.F16)
