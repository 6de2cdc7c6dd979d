"""The controller's folders (corpus, agent folders) shipped to the nodes through Ray.

A node has its own disk: the corpus the controller selected may not be there, or may be another
version. So the controller packs each folder once (a tar, named by its content hash), puts it
in Ray's object store, and every node unpacks it once into its cache; sandboxes bind-mount the
node's copy. Same hash, same bytes: a node never uses a stale corpus.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Packed:
    """One folder as a tar archive; `digest` names its content."""

    name: str
    digest: str
    data: bytes


def pack(folder: Path, name: str) -> Packed:
    """Tar `folder`'s regular files (sorted, without owners or times, so equal content gives an
    equal digest)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
            info = tarfile.TarInfo(str(path.relative_to(folder)))
            info.size = path.stat().st_size
            info.mode = 0o644
            with path.open("rb") as handle:
                archive.addfile(info, handle)
    data = buffer.getvalue()
    return Packed(name=name, digest=hashlib.sha256(data).hexdigest()[:16], data=data)


def unpack(packed: Packed, cache_dir: Path) -> Path:
    """The folder on this node (unpacked once per digest; concurrent jobs race safely: each
    unpacks into its own temporary folder and the first rename wins)."""
    target = cache_dir / f"{packed.name}-{packed.digest}"
    if target.is_dir():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=cache_dir, prefix=".unpack-"))
    with tarfile.open(fileobj=io.BytesIO(packed.data), mode="r") as archive:
        archive.extractall(staging, filter="data")  # "data": no absolute paths, links or devices
    # Sandboxes read the corpus as another user: folders must be listable, files readable.
    for root, dirs, _ in os.walk(staging):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
    os.chmod(staging, 0o755)
    try:
        staging.rename(target)
    except OSError:  # another job on this node was first
        shutil.rmtree(staging, ignore_errors=True)
    return target
