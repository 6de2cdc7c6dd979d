"""The embedder's speed settings: what llama.cpp is started with, which file serves, the flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from trialbox_llm.__main__ import parse_args
from trialbox_llm.backend import LlamaBackend
from trialbox_llm.catalog import MINILM, MINILM_Q8_0, SMOLLM2, catalog_for
from trialbox_llm.embedder_settings import BEFORE, EmbedderSettings, EmbedderWeights
from trialbox_llm.llamacpp_args import LlamaArgs, parse_llamacpp_args


def embedder_params(settings: EmbedderSettings, gaia_flags: str = "") -> object:
    backend = LlamaBackend(Path("/models"), threads=2, embedder=settings)
    spec = backend.catalog[1]
    plan = backend.plan(spec, None, parse_llamacpp_args(gaia_flags))
    return backend._params(spec, plan.ctx_size, plan.args, port=1)


def test_before_is_one_input_per_decode_in_the_f16_file() -> None:
    params = embedder_params(BEFORE)
    assert params.model.path == "/models/all-MiniLM-L6-v2.f16.gguf"
    assert (params.n_parallel, params.n_ctx, params.n_batch, params.n_ubatch) == (1, 512, 512, 512)
    assert params.flash_attn_type == -1  # llama.cpp's own choice, as before
    assert params.embedding is True


def test_slots_pack_that_many_whole_windows_into_one_micro_batch() -> None:
    params = embedder_params(EmbedderSettings(slots=8, flash_attn=True))
    # Each slot keeps the model's whole 512-token window: the context is split between slots.
    assert (params.n_parallel, params.n_ctx, params.n_batch, params.n_ubatch) == (
        8,
        4096,
        4096,
        4096,
    )
    assert params.flash_attn_type == 1
    assert params.model.path == "/models/all-MiniLM-L6-v2.Q8_0.gguf"


def test_gaia_ubatch_flag_changes_nothing_on_the_embedder() -> None:
    # GAIA loads its embedder with --ubatch-size 2048; the settings, not the flag, decide.
    default = embedder_params(EmbedderSettings())
    with_flag = embedder_params(EmbedderSettings(), "--ubatch-size 2048 --parallel 4")
    fields = ("n_parallel", "n_ctx", "n_batch", "n_ubatch", "flash_attn_type")
    assert [getattr(with_flag, f) for f in fields] == [getattr(default, f) for f in fields]


def test_chat_model_is_untouched_by_embedder_settings() -> None:
    backend = LlamaBackend(Path("/models"), threads=2, embedder=EmbedderSettings(slots=16))
    args = LlamaArgs(parallel=2, kv_unified=True)
    params = backend._params(SMOLLM2, 65536, args, port=1)
    assert (params.n_parallel, params.n_ctx, params.flash_attn_type) == (2, 65536, -1)


def test_weights_choose_the_file_under_the_same_names() -> None:
    assert catalog_for(EmbedderWeights.F16) == (SMOLLM2, MINILM)
    assert catalog_for(EmbedderWeights.Q8_0) == (SMOLLM2, MINILM_Q8_0)
    assert MINILM_Q8_0.names == MINILM.names  # GAIA asks for the same model either way
    assert MINILM_Q8_0.max_input_tokens == MINILM.max_input_tokens == 256
    assert "Q8_0" in MINILM_Q8_0.source and MINILM_Q8_0.file != MINILM.file


def test_flags_default_to_the_settings_defaults_and_can_restore_before() -> None:
    assert parse_args([]).embedder == EmbedderSettings()
    before = parse_args(
        [
            "--embedder-slots",
            "1",
            "--embedder-flash-attn",
            "auto",
            "--embedder-weights",
            "f16",
        ]
    )
    assert before.embedder == BEFORE


@pytest.mark.parametrize("value", ["0", "65", "many"])
def test_a_bad_slot_count_is_one_clear_error(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["--embedder-slots", value])
    assert exit_info.value.code == 2
    assert "expected a slot count from 1 to 64" in capsys.readouterr().err
