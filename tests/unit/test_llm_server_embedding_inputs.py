"""Embedding inputs cut to the embedder's limit as sentence-transformers cuts them (the real
tokenizer is exercised by the integration tests)."""

import pytest

from trialbox_llm.catalog import MINILM
from trialbox_llm.embedding_inputs import cut, text_inputs

CLS, SEP = 101, 102


def test_minilm_limit_is_sentence_transformers_max_seq_length():
    assert MINILM.max_input_tokens == 256  # the wheel's sentence_bert_config.json
    assert MINILM.max_input_tokens <= MINILM.max_context_window


def test_a_long_input_keeps_its_first_pieces_and_both_special_tokens():
    tokens = [CLS, *range(1000, 1600), SEP]
    kept = cut(tokens, 256)
    assert len(kept) == 256
    assert kept[0] == CLS and kept[-1] == SEP
    assert kept[1:-1] == list(range(1000, 1254))  # the first 254 pieces, in order


@pytest.mark.parametrize("length", [2, 255, 256])
def test_an_input_within_the_limit_is_unchanged(length):
    tokens = [CLS, *range(1000, 1000 + length - 2), SEP]
    assert cut(tokens, 256) == tokens


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"input": "one text"}, ["one text"]),
        ({"input": ["a", "b"]}, ["a", "b"]),
        ({"input": ["a", [CLS, 7, SEP]]}, ["a", [CLS, 7, SEP]]),
        ({"input": [[CLS, 7, SEP]]}, None),  # token ids only: nothing to tokenize
        ({"input": []}, None),
        ({}, None),
    ],
)
def test_text_inputs_are_found_in_every_openai_shape(body, expected):
    assert text_inputs(body) == expected
