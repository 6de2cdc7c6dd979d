"""Reading a file trialbox did not write itself this run: a regular file, at most N bytes.

Scorecards, baselines, run.json, traces and agents come from users and other machines. A link
to /dev/zero passed to `compare` reached 2.7 GB in 2.6 s; a FIFO as `--baseline` blocked
`open` for ever. So every such read goes through `read_bounded`: the type is checked before
opening (a FIFO blocks `open`), the file is opened non-blocking and checked again on the
descriptor (it may have been swapped in between), and no more than `limit` bytes are read
whatever size the file claims.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MIB = 1024 * 1024

SCORECARD_BYTES = 256 * MIB
"""A scorecard or GAIA scorecard: ~2 KB per scenario row, so ~100 000 scenarios."""
SETTINGS_BYTES = 4 * MIB
"""run.json, meta.json, node config: a few KB each."""
TRACE_BYTES = 64 * MIB
"""One scenario's trace: the transcript and tool outputs (bounded by the sandbox's log cap)."""
SOURCE_BYTES = 4 * MIB
"""An agent's agent.py."""

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


class BoundedReadError(ValueError):
    """The file is not a regular file, too large, or unreadable; the message names it and why."""


MAX_PATH_BYTES = 4096
"""Linux's PATH_MAX: a longer path cannot name a file."""
MAX_NAME_BYTES = 255
"""Linux's NAME_MAX: one path component longer than this cannot exist."""


def checked_path_text(path: str) -> str:
    """`path` when every file system trialbox runs on can take it, else ValueError saying why."""
    if "\x00" in path:
        raise ValueError("path contains a NUL byte; write the file's path as plain text")
    size = len(path.encode("utf-8", errors="surrogateescape"))
    if size > MAX_PATH_BYTES:
        raise ValueError(f"path is {size} bytes long; a path can be at most {MAX_PATH_BYTES}")
    for part in path.replace("\\", "/").split("/"):
        if len(part.encode("utf-8", errors="surrogateescape")) > MAX_NAME_BYTES:
            raise ValueError(f"path component {part[:40]!r}… is longer than {MAX_NAME_BYTES} "
                             "bytes, which no file name can be")
    return path


def checked_path(path: Path) -> Path:
    """`path` when the system can take it (see checked_path_text), else BoundedReadError: for
    paths a user typed, before any is_dir()/exists() (those raise on a name over 255 bytes)."""
    try:
        checked_path_text(str(path))
    except ValueError as err:
        raise BoundedReadError(f"{str(path)[:80]}…: {err}") from None
    return path


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _size(limit: int) -> str:
    return f"{limit // MIB} MiB" if limit >= MIB else f"{limit // 1024} KiB"


def read_bounded(path: Path, limit: int) -> bytes:
    """At most `limit` bytes of the regular file `path`, or BoundedReadError saying why not."""
    checked_path(path)
    try:
        info = os.stat(path)  # follows links: a link to /dev/zero is a character device
    except (OSError, ValueError) as err:  # ValueError: a NUL in the path
        raise BoundedReadError(f"{path}: cannot be read ({_reason(err)})") from None
    if not stat.S_ISREG(info.st_mode):
        link = " (through a symlink)" if os.path.islink(path) else ""
        raise BoundedReadError(f"{path}: is {_kind(info.st_mode)}{link}, not a regular file; "
                               "refused without reading it")
    if info.st_size > limit:
        raise BoundedReadError(f"{path}: is {info.st_size:,} bytes; more than the "
                               f"{_size(limit)} trialbox reads of such a file")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as err:
        raise BoundedReadError(f"{path}: cannot be read ({_reason(err)})") from None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise BoundedReadError(f"{path}: is no longer a regular file; refused")
        chunks, remaining = [], limit + 1
        while remaining > 0:
            chunk = os.read(descriptor, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    except OSError as err:
        raise BoundedReadError(f"{path}: cannot be read ({_reason(err)})") from None
    finally:
        os.close(descriptor)
    if remaining <= 0:  # it grew after stat
        raise BoundedReadError(f"{path}: grew past the {_size(limit)} trialbox reads of such a file")
    return b"".join(chunks)


def read_bounded_text(path: Path, limit: int) -> str:
    """The file's UTF-8 text (see `read_bounded`); BoundedReadError when it is not UTF-8."""
    raw = read_bounded(path, limit)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BoundedReadError(f"{path}: is not UTF-8 text (byte {err.start})") from None


def _reason(err: BaseException) -> str:
    return getattr(err, "strerror", None) or str(err)
