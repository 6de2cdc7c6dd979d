"""The sha256 of a file, read in blocks (a corpus document or a model file may be large), and
the size past which a corpus document is refused before it is read at all."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

#: Largest corpus document trialbox hashes (and hands an agent to index). GAIA's largest
#: generated document is about a megabyte; a 20 GB sparse file took `validate` past a minute
#: to hash, so anything past this is refused from its size alone, unread.
CORPUS_DOCUMENT_BYTES = 512 * 2**20


def too_large_to_hash(path: Path, limit: int = CORPUS_DOCUMENT_BYTES) -> str | None:
    """Why `path` is not hashed — a size past `limit`, or not a regular file — as the words of
    a problem, or None. Only its inode is looked at (stat), never its bytes."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        return f"{path} is not a regular file"
    if info.st_size > limit:
        return (f"{path} is {info.st_size:,} bytes, more than the {limit:,} a corpus "
                "document may be (refused unread)")
    return None


def sha256_of_file(path: Path) -> str:
    """The file's sha256 as lowercase hex."""
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()
