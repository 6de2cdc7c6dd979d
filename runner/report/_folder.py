"""The results folder's file names, its one way to write a file, and the scorecard.json reader.

Below both the writer (runner/report/_writer.py) and the inspect_ai export: each names and
reads the folder's files through here, so neither imports the other's module to do it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from runner.report._load import read_scorecard

__all__ = ["GAIA_SCORECARD", "HTML", "JUNIT", "SCORECARD", "SUMMARY", "atomic_write",
           "read_scorecard"]

SCORECARD = "scorecard.json"
GAIA_SCORECARD = "scorecard.gaia.json"
SUMMARY = "summary.md"
JUNIT = "junit.xml"
HTML = "report.html"


def atomic_write(path: Path, text: str) -> None:
    """Replace `path` with `text` in one step: readers see the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are for whoever reads the folder
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
