"""One owner per run folder: a run (or a resume) holds an exclusive lock on a file inside it.

Why flock: the kernel releases the lock when the owning process dies, however it dies (Ctrl-C,
SIGKILL, OOM), so a lock left by a dead run is simply free — taken over with no stale-lock
guessing — while a second process aimed at a live run fails at once instead of sweeping the live
run's sandboxes. The file also names the owner (pid, host) so the refusal can say who holds it.
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from runner.run.errors import UsageError

#: The lock file in a run folder (kept after the run; holding it, not its existence, is the lock).
LOCK_FILE = ".owner.lock"


def lock_path(run_dir: Path) -> Path:
    return run_dir / LOCK_FILE


def is_owned(run_dir: Path) -> bool:
    """Whether a live process holds the run folder's lock now (a dead owner's lock is free)."""
    path = lock_path(run_dir)
    if not path.is_file():
        return False
    with path.open("a+") as probe:
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(probe, fcntl.LOCK_UN)
        return False


@contextmanager
def owning(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir``'s lock for the block; UsageError (exit 2) when a live process holds it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    handle = lock_path(run_dir).open("a+")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "another process"
            raise UsageError(f"{run_dir} is in use by a live run ({owner}) — wait for it to end, "
                             "or stop it, before running or resuming it again") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        yield
    finally:
        handle.close()  # closing the file releases the lock
