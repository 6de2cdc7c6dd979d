"""Bytecode for the Python packages an image copies, compiled on the host into its build context.

The runner image runs as a user who cannot write beside its sources, so without bytecode in
the image every start compiles again what it imports (`trialbox --help` takes twice as long).
Compiling inside the build is one more container step, and under load it took longer than the
rest of a rebuild after a change under runner/ (25 s of 31 s at load 25). Here only the files
whose source changed are compiled, into ``.cache/build/<name>/bytecode/``, laid out as the
image's file system; the Dockerfile copies that folder over ``/`` after the sources.

The files are hash-checked (PEP 552): at import the interpreter compares each with its
source's hash, so bytecode that does not match its source is never used, whatever the file
times. They are written only when this interpreter's bytecode is the image's (the same
major.minor as TRIALBOX_TARGET_PYTHON); otherwise the folder stays empty and the image
compiles at run time, as it would without this.
"""

from __future__ import annotations

import importlib.util
import os
import py_compile
import re
import sys
from pathlib import Path, PurePosixPath

#: The images' CPython (scripts/prepare-build-context chooses their wheels for it too).
DEFAULT_TARGET_PYTHON = "3.11.2"
_HASH_CHECKED = (0b11).to_bytes(4, "little")  # PEP 552 flags: hash-based, checked


def target_python() -> str:
    return os.environ.get("TRIALBOX_TARGET_PYTHON", DEFAULT_TARGET_PYTHON)


def compiles_for_target() -> bool:
    """Whether this interpreter's bytecode is the image's (same implementation, major.minor)."""
    wanted = tuple(int(part) for part in target_python().split(".")[:2])
    return sys.implementation.name == "cpython" and sys.version_info[:2] == wanted


def inputs() -> bytes:
    """What the bytecode depends on besides its sources (which the digest holds already)."""
    return f"{sys.implementation.cache_tag}:{compiles_for_target()}".encode()


def copied_packages(dockerfile: str) -> list[tuple[str, PurePosixPath]]:
    """(checkout folder, folder in the image) for each ``COPY <folder>/ /<folder>/`` of the
    checkout: one source, an absolute destination, not from a stage or the build cache."""
    found = []
    for line in re.sub(r"\\\n", " ", dockerfile).splitlines():
        words = line.split()
        if len(words) != 3 or words[0].upper() != "COPY":
            continue
        source, destination = words[1], words[2]
        if source.startswith((".cache/", "$", "--")) or not source.endswith("/"):
            continue
        if destination.startswith("/"):
            found.append((source.rstrip("/"), PurePosixPath(destination)))
    return found


def _pyc_name(path: PurePosixPath) -> PurePosixPath:
    return path.parent / "__pycache__" / f"{path.stem}.{sys.implementation.cache_tag}.pyc"


def _current(pyc: Path, source: bytes) -> bool:
    """Whether ``pyc`` is this interpreter's hash-checked bytecode of exactly ``source``."""
    try:
        with pyc.open("rb") as handle:
            header = handle.read(16)
    except OSError:
        return False
    return (header[:4] == importlib.util.MAGIC_NUMBER and header[4:8] == _HASH_CHECKED
            and header[8:] == importlib.util.source_hash(source))


def write_bytecode(root: Path, dockerfile: str, target: Path) -> list[str]:
    """Fill ``target`` with the bytecode of every package the Dockerfile copies, laid out as
    the image's file system; returns the sources compiled now (the others were current)."""
    wanted: dict[Path, tuple[Path, PurePosixPath]] = {}
    if compiles_for_target():
        for folder, destination in copied_packages(dockerfile):
            package = root / folder
            for source in sorted(package.rglob("*.py")) if package.is_dir() else []:
                if "__pycache__" in source.relative_to(package).parts:
                    continue
                in_image = destination / source.relative_to(package).as_posix()
                wanted[target / _pyc_name(in_image).relative_to("/")] = (source, in_image)
    compiled = []
    for pyc, (source, in_image) in sorted(wanted.items()):
        if _current(pyc, source.read_bytes()):
            continue
        try:
            py_compile.compile(str(source), cfile=str(pyc), dfile=str(in_image), doraise=True,
                               invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
        except py_compile.PyCompileError:
            pyc.unlink(missing_ok=True)  # the image compiles it (and reports the error) at run time
            continue
        compiled.append(str(source.relative_to(root)))
    if target.is_dir():
        for stale in [p for p in target.rglob("*") if p.is_file() and p not in wanted]:
            stale.unlink()
    target.mkdir(parents=True, exist_ok=True)
    return compiled
