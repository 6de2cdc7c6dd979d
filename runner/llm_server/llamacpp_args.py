"""The few llama-server flags a Lemonade `POST /load` may carry in `llamacpp_args`, parsed.

GAIA loads its chat model with `--parallel 2 --kv-unified --cache-ram 0
--slot-prompt-similarity 0.5` and then pins side requests to slot 1, so the slot count must be
real; its embedder asks for `--ubatch-size 2048`. We apply the flags that change behaviour GAIA
depends on and report the rest as ignored instead of pretending they took effect.
"""

from __future__ import annotations

import shlex

from pydantic import BaseModel


class LlamaArgsError(ValueError):
    """`llamacpp_args` could not be read; the message names the flag and the fix."""


class LlamaArgs(BaseModel):
    """Settings taken from `llamacpp_args`; None means "not given, keep the default"."""

    parallel: int | None = None
    kv_unified: bool = False
    cache_ram_mib: int | None = None
    slot_prompt_similarity: float | None = None
    ubatch_size: int | None = None
    #: Flags we received but do not apply (reported back in `/health`).
    ignored: list[str] = []


_VALUE_FLAGS = {
    "--parallel": "parallel",
    "-np": "parallel",
    "--cache-ram": "cache_ram_mib",
    "-cram": "cache_ram_mib",
    "--slot-prompt-similarity": "slot_prompt_similarity",
    "-sps": "slot_prompt_similarity",
    "--ubatch-size": "ubatch_size",
    "-ub": "ubatch_size",
}
_SWITCH_FLAGS = {"--kv-unified": "kv_unified", "-kvu": "kv_unified"}


def parse_llamacpp_args(text: str | None) -> LlamaArgs:
    """Read the supported flags (`--flag value` or `--flag=value`) from a llama-server argv."""
    tokens = shlex.split(text or "")
    values: dict[str, object] = {}
    ignored: list[str] = []
    index = 0
    while index < len(tokens):
        flag, has_inline, inline = tokens[index].partition("=")
        index += 1
        if flag in _SWITCH_FLAGS:
            values[_SWITCH_FLAGS[flag]] = True
        elif flag in _VALUE_FLAGS:
            if not has_inline:
                if index >= len(tokens):
                    raise LlamaArgsError(f"llamacpp_args: flag {flag} needs a value")
                inline = tokens[index]
                index += 1
            values[_VALUE_FLAGS[flag]] = inline
        else:
            ignored.append(tokens[index - 1])
    try:
        return LlamaArgs.model_validate({**values, "ignored": ignored})
    except ValueError as exc:
        raise LlamaArgsError(f"llamacpp_args {text!r}: {exc}") from exc
