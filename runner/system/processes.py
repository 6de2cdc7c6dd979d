"""Whether a process still runs: the one rule for pids that trialbox started or recorded."""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path


def is_alive(pid: int) -> bool:
    """True while `pid` runs. A zombie is not alive: it answers kill(0) until its parent reaps
    it, so its state in /proc decides; a zombie child of ours is reaped on the way."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, someone else's
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    if state != "Z":
        return True
    with suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    return False
