"""One side of an A/B: the LLM server build a user names as `key=value,…` on the command line.

`--a image=trialbox/llm-cpu:dev --b image=trialbox/llm-cpu:dev,cpus=1` names two builds of the
server behind the same front door. The keys:

- `image=`   the image to start (an llm-cpu or a Lemonade image tag);
- `server=`  `llm-cpu` or `lemonade` (default: read from the image's name);
- `backend=` Lemonade's llama.cpp backend: cpu, vulkan or rocm (its device nodes passed in);
- `args=`    extra server arguments, split as a shell splits them (llm-cpu only);
- `cpus=`    the server container's CPU limit (Docker's `--cpus`);
- `url=`     a server already running that the front door can reach: nothing is started.

The rule for commas: keys are split at commas, except that `args=` takes the rest of the spec,
commas included (`args=--override-kv a=1,b=2` is one argument `a=1,b=2`), so it comes last.
A key after it (`args=--threads 1,cpus=1`) would be read as a server argument, so it is
refused, one line naming the key: move the key before `args=`, or quote the argument when a
server argument itself holds `,cpus=` (`args='--x a,cpus=2'`).
"""

from __future__ import annotations

import re
import shlex
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from runner.run.errors import UsageError

KEYS = ("image", "server", "backend", "args", "cpus", "url")
#: Where args= begins: it takes the rest of the spec (module docstring).
_ARGS = re.compile(r"(?:^|,)\s*args\s*=")
#: A key written after a comma (outside quotes) inside args='s text.
_LATER_KEY = re.compile(r"\s*(" + "|".join(KEYS) + r")\s*=")


class ServerSpec(BaseModel):
    """An LLM server build, as `--a`/`--b` name it (module docstring)."""

    image: str | None = Field(default=None, description="the image trialbox starts")
    server: Literal["llm-cpu", "lemonade"] = Field(
        default="llm-cpu", description="which server the image holds")
    backend: Literal["cpu", "vulkan", "rocm"] = Field(
        default="cpu", description="Lemonade's llama.cpp backend (and so its device)")
    args: list[str] = Field(default_factory=list, description="extra server arguments (llm-cpu)")
    cpus: float | None = Field(default=None, gt=0, le=256, allow_inf_nan=False,
                               description="the server container's CPU limit; None: no limit")
    url: str | None = Field(default=None, pattern=r"^https?://[^/\s]+$",
                            description="a running server the door reaches; nothing is started")
    text: str = Field(default="", description="the spec as the user wrote it")

    @model_validator(mode="after")
    def _consistent(self) -> ServerSpec:
        if (self.image is None) == (self.url is None):
            raise ValueError("give image= (a build trialbox starts) or url= (a running server), "
                             "one of the two")
        if self.url is not None and (self.args or self.cpus is not None):
            raise ValueError("args= and cpus= change a server trialbox starts; url= names one "
                             "it does not")
        if self.server == "lemonade" and self.args:
            raise ValueError("args= is llm-cpu's; Lemonade's settings are its image's")
        if self.server == "llm-cpu" and self.backend != "cpu":
            raise ValueError(f"backend={self.backend} is Lemonade's; give server=lemonade "
                             "and a Lemonade image")
        return self

    def describe(self) -> str:
        """One line for the report: what this side was."""
        return self.text or ",".join(f"{k}={v}" for k, v in self.model_dump().items()
                                     if v not in (None, [], "") and k != "text")


def parse_spec(text: str, side: str) -> ServerSpec:
    """`--a`/`--b`'s text as a ServerSpec; a UsageError naming the option, the key and the fix."""
    option = f"--{side.lower()}"
    head, args = _split_args(text)
    values: dict[str, object] = {"text": text}
    for part in (p.strip() for p in head.split(",")) if head.strip() else ():
        key, equals, value = part.partition("=")
        if not equals or not value.strip():
            raise UsageError(f"{option} {text!r}: {part!r} is not key=value; write e.g. "
                             f"{option} image=trialbox/llm-cpu:dev,cpus=1")
        key = key.strip()
        if key not in KEYS:
            raise UsageError(f"{option} {text!r}: unknown key {key!r}; use {', '.join(KEYS)}")
        if key in values:
            raise UsageError(f"{option} {text!r}: {key}= given twice; give it once")
        values[key] = value.strip()
    if args is not None:
        values["args"] = _server_args(args, text, option)
    if "server" not in values and isinstance(values.get("image"), str):
        values["server"] = "lemonade" if "lemonade" in str(values["image"]) else "llm-cpu"
    try:
        return ServerSpec.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise UsageError(f"{option} {text!r}: {where + ': ' if where else ''}{message}") from None


def _split_args(text: str) -> tuple[str, str | None]:
    """The keys before `args=`, and args='s value: the rest of the spec (None: no args=)."""
    found = _ARGS.search(text)
    if found is None:
        return text, None
    return text[:found.start()], text[found.end():]


def _server_args(value: str, text: str, option: str) -> list[str]:
    """args='s value split as a shell splits it; a key after it, or a quote left open, refused."""
    if not value.strip():
        raise UsageError(f"{option} {text!r}: 'args=' is not key=value; write e.g. "
                         f"{option} image=trialbox/llm-cpu:dev,args=--threads 2")
    if (key := _key_inside(value)) is not None:
        fix = ("give it once" if key == "args" else
               f"move {key}= before args= (args= comes last), or quote the server argument "
               f"that holds ',{key}='")
        raise UsageError(f"{option} {text!r}: args= takes the rest of the spec, commas included, "
                         f"so {key}= after it would be a server argument; {fix}")
    try:
        return shlex.split(value)
    except ValueError as exc:  # shlex: "No closing quotation", "No escaped character"
        raise UsageError(f"{option} {text!r}: args=: {str(exc).lower()}; close the quote "
                         "(args='--x a,b') or drop the last backslash") from None


def _key_inside(value: str) -> str | None:
    """A spec key written after a comma outside quotes in args='s value (`--threads 1,cpus=1`),
    or None: read as a shell reads `'…'`, `"…"` and backslashes."""
    quote: str | None = None
    escaped = False
    for at, char in enumerate(value):
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote is not None:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "," and (later := _LATER_KEY.match(value, at + 1)) is not None:
            return later.group(1)
    return None
