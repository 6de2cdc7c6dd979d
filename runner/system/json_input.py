"""Reading a JSON file trialbox once wrote and now gets back from a user: the steps every kind of
file (scorecard, trace, run.json, baseline, GAIA scorecard) shares before its model validates it.

Why one place: a CI pipeline keeps scorecards for months and feeds them back as baselines, edited,
truncated or linked elsewhere. Each loader calls `read_json_input` (a link that leaves its folder
refused, the read bounded, the JSON parsed with every number finite) and `check_schema_version`,
and every refusal is one `InputError` line naming the file, the field and the fix — never the
file's content, which may be someone's /etc/shadow behind a link.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from runner.system.bounded_read import BoundedReadError, read_bounded_text

ModelT = TypeVar("ModelT", bound=BaseModel)

_VERSION = re.compile(r"[0-9][0-9A-Za-z.+-]{0,39}")


class InputError(ValueError):
    """A file trialbox reads back is refused; the message names the file, the field and the fix."""


def field_path(loc: tuple[int | str, ...], top: str = "(top level)") -> str:
    """A location inside a document as a reader writes it: scenarios[3].scenario_id (`top`
    for the document itself). Scenario files (YAML) and our JSON files word it the same."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or top


def refuse_escaping_link(path: Path, fix: str) -> None:
    """InputError when `path` is a symbolic link whose target is outside the link's own folder:
    a trace linked to another run's trace, or a scorecard linked to /etc/passwd, is not this
    folder's file, whatever its content."""
    if not os.path.islink(path):
        return
    folder = Path(os.path.realpath(path.parent))
    target = Path(os.path.realpath(path))
    if not target.is_relative_to(folder):
        raise InputError(f"{path}: is a symbolic link leading out of its folder; refused without "
                         f"reading it; {fix}")


#: The most JSON values (objects, arrays, strings, numbers, ...) one file of ours may hold. A
#: full bench's scorecard is about 50 values a row (4,088 for 79 rows), so this is some 40,000
#: rows; a trace of 1,000 turns needs a few hundred thousand at most. Past it a file is refused
#: before any model validates it: a 48 MB trace of millions of tiny tool calls took 95 s and
#: 9 GB to refuse, nearly all of it spent validating them.
MAX_JSON_NODES = 2_000_000


class TooManyValues(ValueError):
    """Parsed JSON holds more values than a file of ours may (MAX_JSON_NODES or the caller's)."""


def first_non_finite(data: Any, loc: tuple[int | str, ...] = (),
                     max_nodes: int = MAX_JSON_NODES) -> tuple[int | str, ...] | None:
    """Where the first NaN or infinite number in parsed JSON is (Python's json reads `NaN`,
    `Infinity` and `1e999` as floats), or None; TooManyValues past `max_nodes` values.
    Iterative: a deep document must not recurse. The count and the search walk the values
    alone; only a document that holds a non-finite number is walked again for its location
    (a path for each of millions of values cost seconds and gigabytes)."""
    stack: list[Any] = [data]
    seen = 0
    found = False
    while stack:
        value = stack.pop()
        seen += 1
        if seen > max_nodes:
            raise TooManyValues(max_nodes)
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, float) and not math.isfinite(value):
            found = True
            break
    return _location_of_first_non_finite(data, loc) if found else None


def _location_of_first_non_finite(data: Any, loc: tuple[int | str, ...]
                                  ) -> tuple[int | str, ...] | None:
    """The path to the first non-finite number, in document order."""
    stack: list[tuple[tuple[int | str, ...], Any]] = [(loc, data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return where
        if isinstance(value, dict):
            stack.extend((where + (str(k),), v) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((where + (i,), v) for i, v in reversed(list(enumerate(value))))
    return None


def read_json_input(path: Path, limit: int, fix: str, max_nodes: int = MAX_JSON_NODES) -> Any:
    """The parsed JSON of `path`: a regular file (links out of its folder refused), at most
    `limit` bytes and `max_nodes` values, valid JSON whose numbers are all finite; else
    InputError ending with `fix`."""
    if os.path.isfile(path):  # not a regular file at all: read_bounded names what it is
        refuse_escaping_link(path, fix)
    try:
        data = json.loads(read_bounded_text(path, limit))
    except BoundedReadError as exc:
        raise InputError(f"{exc}; {fix}") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply to be trialbox's file; {fix}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON (line {exc.lineno} column {exc.colno}: "
                         f"{exc.msg}); {fix}") from None
    except ValueError:  # an integer of more than 4300 digits: Python refuses to convert it
        raise InputError(f"{path}: holds a number too long to read; {fix}") from None
    try:
        where = first_non_finite(data, max_nodes=max_nodes)
    except TooManyValues:
        raise InputError(f"{path}: holds more than {max_nodes:,} JSON values, the most a file "
                         f"of trialbox's may hold; {fix}") from None
    if where is not None:
        raise InputError(f"{path}: {field_path(where)}: not a finite number (NaN or infinite); "
                         f"{fix}")
    return data


def check_schema_version(path: Path, data: dict[str, Any], current: int,
                         written_by: str | None = None) -> None:
    """InputError unless `data`'s schema_version (absent: `current`) is one this trialbox reads.
    Newer: refused, naming the trialbox that wrote it (a newer format read as ours would be
    misread silently); older than 1: there is no such version."""
    version = data.get("schema_version", current)
    if type(version) is not int:  # noqa: E721 — True is an int to isinstance
        raise InputError(f"{path}: schema_version: not a whole number; restore the file as "
                         "trialbox wrote it")
    if version > current:
        # Only a plain version string is named: the field is the file's content, not ours.
        plain = isinstance(written_by, str) and _VERSION.fullmatch(written_by)
        writer = f"trialbox {written_by}" if plain else "a newer trialbox"
        raise InputError(f"{path}: schema_version {version} was written by {writer}; this "
                         f"trialbox reads version {current} — upgrade trialbox to read it")
    if version < 1:
        raise InputError(f"{path}: schema_version {version} is not a version trialbox ever "
                         "wrote (the first is 1); restore the file as trialbox wrote it")


def read_versioned_model(path: Path, model: type[ModelT], current: int, limit: int,
                         fix: str) -> ModelT:
    """One of our own versioned files (run.json, ab.json) read back as `model`: bounded, finite
    numbers, its schema_version checked, validated; a refusal is one InputError line naming
    the file and the field, never the value read, and ending with `fix`."""
    data = read_json_input(path, limit, fix)
    if not isinstance(data, dict):
        raise InputError(f"{path}: top level is not an object; {fix}")
    check_schema_version(path, data, current)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]  # its location and message only: never the value read
        raise InputError(f"{path}: {field_path(first['loc'])}: {first['msg']}; {fix}") from None
