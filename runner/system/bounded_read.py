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


def kind_of(mode: int) -> str:
    """What a file that is not a regular file is, in words ("a FIFO (named pipe)", ...)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def size_text(limit: int) -> str:
    return f"{limit // MIB} MiB" if limit >= MIB else f"{limit // 1024} KiB"


class NotRead(Exception):
    """Why `read_regular` read nothing: each caller words it for its own users (a one-line CLI
    error here, a scenario-file Problem in runner/scenarios)."""

    def __init__(self, kind: str, *, mode: int = 0, size: int = 0, reason: str = "") -> None:
        super().__init__(kind)
        self.kind = kind  # unreadable | not_regular | no_longer_regular | too_big | grew
        self.mode, self.size, self.reason = mode, size, reason


def read_regular(path: Path, limit: int) -> bytes:
    """At most `limit` bytes of the regular file `path`, or NotRead. The one bounded read: the
    type is checked before opening (a FIFO blocks `open`), the file opened non-blocking and
    checked again on the descriptor (it may have been swapped in between), and no more than
    `limit` bytes read whatever size the file claims."""
    try:
        info = os.stat(path)  # follows links: a link to /dev/zero is a character device
    except (OSError, ValueError) as err:  # ValueError: a NUL in the path
        raise NotRead("unreadable", reason=_reason(err)) from None
    if not stat.S_ISREG(info.st_mode):
        raise NotRead("not_regular", mode=info.st_mode)
    if info.st_size > limit:
        raise NotRead("too_big", size=info.st_size)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as err:
        raise NotRead("unreadable", reason=_reason(err)) from None
    try:
        opened = os.fstat(descriptor)
        if not stat.S_ISREG(opened.st_mode):
            raise NotRead("no_longer_regular", mode=opened.st_mode)
        chunks, remaining = [], limit + 1
        while remaining > 0:
            chunk = os.read(descriptor, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    except OSError as err:
        raise NotRead("unreadable", reason=_reason(err)) from None
    finally:
        os.close(descriptor)
    if remaining <= 0:  # it grew after stat
        raise NotRead("grew", size=limit + 1)
    return b"".join(chunks)


def read_bounded(path: Path, limit: int) -> bytes:
    """At most `limit` bytes of the regular file `path`, or BoundedReadError saying why not."""
    checked_path(path)
    try:
        return read_regular(path, limit)
    except NotRead as why:
        if why.kind == "not_regular":
            link = " (through a symlink)" if os.path.islink(path) else ""
            message = (f"is {kind_of(why.mode)}{link}, not a regular file; "
                       "refused without reading it")
        elif why.kind == "no_longer_regular":
            message = "is no longer a regular file; refused"
        elif why.kind == "too_big":
            message = (f"is {why.size:,} bytes; more than the {size_text(limit)} trialbox reads "
                       "of such a file")
        elif why.kind == "grew":
            message = f"grew past the {size_text(limit)} trialbox reads of such a file"
        else:
            message = f"cannot be read ({why.reason})"
        raise BoundedReadError(f"{path}: {message}") from None


def read_bounded_text(path: Path, limit: int) -> str:
    """The file's UTF-8 text (see `read_bounded`); BoundedReadError when it is not UTF-8."""
    raw = read_bounded(path, limit)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BoundedReadError(f"{path}: is not UTF-8 text (byte {err.start})") from None


def _reason(err: BaseException) -> str:
    return getattr(err, "strerror", None) or str(err)
