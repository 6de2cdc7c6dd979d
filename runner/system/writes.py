"""Writing a file where a user pointed: the destination checked first, the file replaced whole.

Why one place: `compare --html /dev/full` once replaced the device node with a report (an atomic
rename goes over whatever the path is), and a read-only folder, a name too long or a full disk
ended in tracebacks. Every write of trialbox (results, baselines, `--html`/`--json`, `export`,
`schema`) goes through `atomic_write`/`atomic_replace`: a destination that exists and is not a
regular file is refused before anything is created beside it, and every way the write can fail
is one `WriteRefused` line naming the path and the fix — `infrastructure` when the disk is full
or failing (exit 3), else the user's choice of place (exit 2). A half-written file never replaces
a good one: the new one is written beside it and renamed over it only when whole.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from runner.system.bounded_read import checked_path_text, kind_of

#: errno values that say the machine failed, not the place the user chose.
_INFRASTRUCTURE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO})


class WriteRefused(OSError):
    """A file could not be written where asked; the message names the path and the fix."""

    def __init__(self, message: str, *, infrastructure: bool = False) -> None:
        super().__init__(message)
        self.infrastructure = infrastructure  # disk full / I/O error: exit 3, not 2

    def __str__(self) -> str:
        return str(self.args[0])


def check_destination(path: Path) -> None:
    """WriteRefused unless `path` can take a new regular file: its name fits the file system,
    and it does not exist or is a regular file (through a link: what the link leads to)."""
    try:
        checked_path_text(str(path))
    except ValueError as exc:
        raise WriteRefused(f"{str(path)[:80]}: {exc}") from None
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _refused(path, exc) from None
    if not stat.S_ISREG(info.st_mode):
        raise WriteRefused(f"{path}: is {kind_of(info.st_mode)}, not a file; refused, left as it "
                           "is — give the path of a file to write")


def atomic_replace(path: Path, produce: Callable[[Path], None]) -> None:
    """Make `path` what `produce(tmp)` writes into a new file beside it, in one rename; the
    destination is checked first (check_destination) and any failure is WriteRefused."""
    check_destination(path)
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:200]}.", suffix=".tmp")
        os.close(fd)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are for whoever reads the folder
        produce(Path(tmp))
        check_destination(path)  # it may have become a FIFO or a device meanwhile
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise exc if isinstance(exc, WriteRefused) else _refused(path, exc) from None
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write(path: Path, text: str) -> None:
    """Replace `path` with `text` in one step: readers see the old file or the new, never half."""
    def produce(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())

    atomic_replace(path, produce)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """`atomic_write` for bytes: an artifact is there whole or not at all (a full disk once
    left 0-byte logs that a resumed run could not tell from empty ones)."""
    def produce(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())

    atomic_replace(path, produce)


def _refused(path: Path, exc: OSError) -> WriteRefused:
    reason = exc.strerror or str(exc) or type(exc).__name__
    if exc.errno in _INFRASTRUCTURE:
        return WriteRefused(f"cannot write {path}: {reason} — free space on that disk or write "
                            "elsewhere", infrastructure=True)
    return WriteRefused(f"cannot write {path}: {reason} — give a path in a folder you can write")
