"""Alias resolution and llama-server flag parsing for the llm-cpu server."""

import pytest

from trialbox_llm.catalog import MINILM, SMOLLM2, UnknownModelError, alias_map, resolve
from trialbox_llm.llamacpp_args import LlamaArgsError, parse_llamacpp_args


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        ("Gemma-4-E4B-it-GGUF", SMOLLM2),
        ("gemma-4-e4b-it-gguf", SMOLLM2),
        ("SmolLM2-135M-Instruct-GGUF", SMOLLM2),
        ("user.embeddinggemma-300m-GGUF", MINILM),
        ("embeddinggemma-300m-GGUF", MINILM),  # GAIA drops Lemonade's user. prefix at times
        ("all-MiniLM-L6-v2-GGUF", MINILM),
        ("user.all-MiniLM-L6-v2-GGUF", MINILM),
    ],
)
def test_names_resolve_to_the_real_model(requested, expected):
    assert resolve(requested) == expected


@pytest.mark.parametrize("requested", ["Qwen3-0.6B-GGUF", "", None, "Gemma-4"])
def test_unknown_names_raise_and_list_the_known_ones(requested):
    with pytest.raises(UnknownModelError) as caught:
        resolve(requested)
    assert "SmolLM2-135M-Instruct-GGUF" in str(caught.value)
    assert "Gemma-4-E4B-it-GGUF" in str(caught.value)


def test_alias_map_names_the_real_model_for_each_alias():
    assert alias_map() == {
        "Gemma-4-E4B-it-GGUF": "SmolLM2-135M-Instruct-GGUF",
        "user.embeddinggemma-300m-GGUF": "all-MiniLM-L6-v2-GGUF",
    }


def test_gaia_chat_flags_are_applied():
    args = parse_llamacpp_args(
        "--parallel 2 --kv-unified --cache-ram 0 --slot-prompt-similarity 0.5"
    )
    assert (args.parallel, args.kv_unified, args.cache_ram_mib) == (2, True, 0)
    assert args.slot_prompt_similarity == 0.5
    assert args.ignored == []


def test_inline_values_short_flags_and_unknown_flags():
    args = parse_llamacpp_args("-np=3 --ubatch-size=2048 --flash-attn on")
    assert args.parallel == 3
    assert args.ubatch_size == 2048
    assert args.ignored == ["--flash-attn", "on"]


def test_empty_args_change_nothing():
    assert parse_llamacpp_args(None).model_dump() == parse_llamacpp_args("").model_dump()
    assert parse_llamacpp_args("").parallel is None


@pytest.mark.parametrize("text", ["--parallel", "--parallel two"])
def test_bad_values_are_one_clear_error(text):
    with pytest.raises(LlamaArgsError, match="parallel"):
        parse_llamacpp_args(text)
