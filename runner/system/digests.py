"""The sha256 of a file, read in blocks (a corpus document or a model file may be large)."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_of_file(path: Path) -> str:
    """The file's sha256 as lowercase hex."""
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()
