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
    kv_unified: bool | None = None
    cache_ram_mib: int | None = None
    slot_prompt_similarity: float | None = None
    ubatch_size: int | None = None
    #: Flags we received but do not apply (reported back in `/health`).
    ignored: list[str] = []

    def named(self) -> dict[str, object]:
        """The settings this request names (given flags), without the ignored ones."""
        return self.model_dump(exclude={"ignored"}, exclude_none=True)

    def satisfied_by(self, running: LlamaArgs) -> bool:
        """Whether a server started with `running` already does what these flags ask: every
        flag named here has the same value there; flags not named accept whatever runs."""
        return all(running.named().get(key) == value for key, value in self.named().items())

    def as_flags(self) -> str:
        """The named settings as llama-server flags, in a fixed order (what `/health` shows)."""
        flags: list[str] = []
        for flag, field in _CANONICAL_FLAGS:
            value = getattr(self, field)
            if value is True:
                flags.append(flag)
            elif value is not None and value is not False:
                flags += [flag, str(value)]
        return " ".join(flags)

    def over(self, running: LlamaArgs) -> LlamaArgs:
        """`running` with the flags named here changed: what a restart for this request runs,
        so a request that names one flag does not silently drop the others."""
        return running.model_copy(update={**self.named(), "ignored": list(self.ignored)})


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
_CANONICAL_FLAGS = (
    ("--parallel", "parallel"),
    ("--kv-unified", "kv_unified"),
    ("--cache-ram", "cache_ram_mib"),
    ("--slot-prompt-similarity", "slot_prompt_similarity"),
    ("--ubatch-size", "ubatch_size"),
)


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
