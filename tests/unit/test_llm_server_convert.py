"""The torch-free MiniLM -> GGUF converter, on a tiny BERT it writes itself (no model needed)."""

import json
import struct

import gguf
import numpy as np
import pytest

from trialbox_llm.convert_minilm import (
    PHANTOM_SPACE,
    ConversionError,
    convert,
    phantom_spelling,
    read_safetensors,
    stays_float32,
)

HIDDEN, FFN, LAYERS, POSITIONS = 8, 16, 2, 12
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "##lo", "world"]


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        data = array.astype("<f4").tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def tiny_bert(folder):
    rng = np.random.default_rng(0)
    t = {
        "embeddings.word_embeddings.weight": rng.normal(size=(len(VOCAB), HIDDEN)),
        "embeddings.position_embeddings.weight": rng.normal(size=(POSITIONS, HIDDEN)),
        "embeddings.token_type_embeddings.weight": rng.normal(size=(2, HIDDEN)),
        "embeddings.LayerNorm.weight": np.ones(HIDDEN),
        "embeddings.LayerNorm.bias": np.zeros(HIDDEN),
        "pooler.dense.weight": rng.normal(size=(HIDDEN, HIDDEN)),
        "pooler.dense.bias": np.zeros(HIDDEN),
    }
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for part in (
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
        ):
            t[p + part + ".weight"] = rng.normal(size=(HIDDEN, HIDDEN))
            t[p + part + ".bias"] = np.zeros(HIDDEN)
        t[p + "intermediate.dense.weight"] = rng.normal(size=(FFN, HIDDEN))
        t[p + "intermediate.dense.bias"] = np.zeros(FFN)
        t[p + "output.dense.weight"] = rng.normal(size=(HIDDEN, FFN))
        t[p + "output.dense.bias"] = np.zeros(HIDDEN)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + norm + ".weight"] = np.ones(HIDDEN)
            t[p + norm + ".bias"] = np.zeros(HIDDEN)
    write_safetensors(folder / "model.safetensors", t)
    config = {
        "architectures": ["BertModel"],
        "hidden_size": HIDDEN,
        "intermediate_size": FFN,
        "num_attention_heads": 2,
        "num_hidden_layers": LAYERS,
        "max_position_embeddings": POSITIONS,
        "layer_norm_eps": 1e-12,
        "type_vocab_size": 2,
        "vocab_size": len(VOCAB),
    }
    (folder / "config.json").write_text(json.dumps(config))
    added = [{"id": i, "content": tok, "special": True} for i, tok in enumerate(VOCAB[:4])]
    tokenizer = {
        "added_tokens": added,
        "model": {"type": "WordPiece", "vocab": {tok: i for i, tok in enumerate(VOCAB)}},
    }
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]"}
        )
    )
    (folder / "modules.json").write_text(
        json.dumps([{"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])
    )
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"pooling_mode_mean_tokens": True})
    )
    return t


@pytest.fixture()
def converted(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    source = tiny_bert(model)
    out = convert(model, tmp_path / "tiny.gguf")
    return source, gguf.GGUFReader(out), out


def field(reader, key):
    return reader.fields[key].contents()


def test_metadata_describes_a_mean_pooled_bert_encoder(converted):
    _, reader, _ = converted
    assert field(reader, "general.architecture") == "bert"
    assert field(reader, "bert.block_count") == LAYERS
    assert field(reader, "bert.embedding_length") == HIDDEN
    assert field(reader, "bert.feed_forward_length") == FFN
    assert field(reader, "bert.context_length") == POSITIONS
    assert field(reader, "bert.attention.causal") is False
    assert field(reader, "bert.pooling_type") == int(gguf.PoolingType.MEAN)
    assert field(reader, "general.file_type") == int(gguf.LlamaFileType.MOSTLY_F16)
    assert field(reader, "tokenizer.ggml.model") == "bert"
    assert field(reader, "tokenizer.ggml.unknown_token_id") == 1


def test_vocabulary_uses_llama_cpp_phantom_spelling(converted):
    _, reader, _ = converted
    tokens = field(reader, "tokenizer.ggml.tokens")
    assert tokens == [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        PHANTOM_SPACE + "hello",
        "lo",
        PHANTOM_SPACE + "world",
    ]
    types = field(reader, "tokenizer.ggml.token_type")
    assert types[:4] == [int(gguf.TokenType.CONTROL)] * 4
    assert types[4:] == [int(gguf.TokenType.NORMAL)] * 3


def test_tensors_are_renamed_typed_and_exact(converted):
    source, reader, _ = converted
    tensors = {t.name: t for t in reader.tensors}
    assert "pooler.dense.weight" not in tensors and len(tensors) == 5 + LAYERS * 16
    word = tensors["token_embd.weight"]
    assert word.tensor_type == gguf.GGMLQuantizationType.F16
    np.testing.assert_array_equal(
        np.asarray(word.data).reshape(len(VOCAB), HIDDEN),
        source["embeddings.word_embeddings.weight"].astype(np.float16),
    )
    assert tensors["position_embd.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    assert tensors["blk.1.attn_q.bias"].tensor_type == gguf.GGMLQuantizationType.F32
    assert tensors["blk.0.ffn_up.weight"].tensor_type == gguf.GGMLQuantizationType.F16


def test_conversion_is_deterministic(converted, tmp_path):
    _, _, first = converted
    second = convert(tmp_path / "model", tmp_path / "again.gguf")
    assert first.read_bytes() == second.read_bytes()


def test_phantom_spelling_rules():
    assert phantom_spelling("##ing", False) == "ing"
    assert phantom_spelling("run", False) == PHANTOM_SPACE + "run"
    assert phantom_spelling("[CLS]", True) == "[CLS]"


def test_float32_rule_matches_llama_cpp():
    assert stays_float32("token_types.weight", 2)
    assert stays_float32("position_embd.weight", 2)
    assert stays_float32("blk.0.attn_output_norm.weight", 1)
    assert not stays_float32("blk.0.attn_k.weight", 2)


def test_non_bert_config_is_refused_with_file_and_field(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["GPT2Model"],
                "hidden_size": 1,
                "intermediate_size": 1,
                "num_attention_heads": 1,
                "num_hidden_layers": 1,
                "max_position_embeddings": 1,
                "layer_norm_eps": 1e-5,
                "vocab_size": 1,
            }
        )
    )
    with pytest.raises(ConversionError, match="config.json.*architectures"):
        convert(tmp_path, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()


def test_safetensors_reader_round_trips(tmp_path):
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    write_safetensors(tmp_path / "t.safetensors", {"a": array})
    np.testing.assert_array_equal(read_safetensors(tmp_path / "t.safetensors")["a"], array)
