"""Everything an image is built from: its build context and the digest that says it is unchanged.

Each image is stamped with a digest of everything it is built from (``trialbox.inputs``: its
Dockerfile and folder, the checkout files its Dockerfile copies, the base image, build
arguments, labels, the host's extra CA certificates); an image whose stamp matches is up to
date. The build context is exactly the files the Dockerfile copies (not the whole checkout).
Two context folders are written here rather than by scripts/prepare-build-context
(``GENERATED``): the runner's metadata wheel (runner/stack/project_wheel.py) and the bytecode of
the packages it copies (runner/stack/image_bytecode.py).
"""

from __future__ import annotations

import hashlib
import os
import re
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from runner.stack import image_bytecode, project_wheel

INPUTS_LABEL = "trialbox.inputs"


@dataclass(frozen=True)
class GeneratedFolder:
    """A .cache/build/<name>/<folder> trialbox writes itself just before a build (rather than
    scripts/prepare-build-context)."""

    write: Callable[[Path, str, Path], object]  # (checkout, Dockerfile text, folder): fill it
    inputs: Callable[[Path], bytes]  # checkout → what it is made from that the digest lacks


def _write_files(target: Path, files: dict[str, bytes]) -> None:
    """Make ``target`` hold exactly ``files`` (unchanged ones keep their mtime)."""
    target.mkdir(parents=True, exist_ok=True)
    for stale in target.iterdir():
        if stale.name not in files and stale.is_file():
            stale.unlink()
    for file_name, content in files.items():
        path = target / file_name
        if not path.is_file() or path.read_bytes() != content:
            path.write_bytes(content)


#: The generated folders, by name. The metadata wheel is made from pyproject's name, version,
#: dependencies and scripts only, so editing its tool settings rebuilds no image; the bytecode
#: from the sources the Dockerfile copies, which the digest holds already.
GENERATED: dict[str, GeneratedFolder] = {
    "metadata": GeneratedFolder(
        lambda root, _, target: _write_files(target, project_wheel.context_files(root)),
        project_wheel.wheel_inputs,
    ),
    "bytecode": GeneratedFolder(
        lambda root, dockerfile, target: image_bytecode.write_bytecode(root, dockerfile, target),
        lambda _: image_bytecode.inputs(),
    ),
}
#: Never part of an image (.dockerignore leaves them out of every build context).
_SKIPPED_NAMES = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
_SKIPPED_SUFFIXES = (".pyc", ".egg-info")


def _copy_sources(dockerfile: str) -> list[str]:
    """Every source of the Dockerfile's COPY/ADD lines, as written (``--from`` stages excluded)."""
    text = re.sub(r"\\\n", " ", dockerfile)
    found: list[str] = []
    for line in text.splitlines():
        words = line.split()
        if len(words) < 3 or words[0].upper() not in ("COPY", "ADD"):
            continue
        if any(word.startswith("--from") for word in words[1:]):
            continue
        found += [word for word in words[1:] if not word.startswith("--")][:-1]
    return found


def _prefix(source: str) -> str:
    """The folder or file a source names, up to its first wildcard."""
    return re.split(r"[*?\[]", source)[0].rstrip("/") or "."


def copied_paths(dockerfile: str) -> list[str]:
    """The checkout paths a Dockerfile's COPY/ADD lines take (``--from`` stages excluded),
    with ``.cache/build/<name>/<folder>`` replaced by what that folder is made from."""
    found: list[str] = []
    for source in _copy_sources(dockerfile):
        parts = source.strip("/").split("/")
        if source.startswith("$"):
            continue  # an ARG-named context folder: its build arguments are in the digest
        if parts[:2] == [".cache", "build"]:
            # Made from what the digest already holds: images/<name>/requirements*.txt
            # (scripts/prepare-build-context) or a GeneratedFolder's own inputs.
            continue
        found.append(_prefix(source))
    return sorted(set(found))


def generated_folders(dockerfile: str) -> list[str]:
    """The ``.cache/build/<name>/<folder>`` a Dockerfile copies that trialbox writes itself
    (``GENERATED``), as checkout paths."""
    found = set()
    for source in _copy_sources(dockerfile):
        parts = source.strip("/").split("/")
        if parts[:2] == [".cache", "build"] and len(parts) > 3 and parts[3] in GENERATED:
            found.add("/".join(parts[:4]))
    return sorted(found)


def write_generated(root: Path, dockerfile: str) -> None:
    """Fill each generated folder the Dockerfile copies (``GENERATED``)."""
    for folder in generated_folders(dockerfile):
        GENERATED[folder.rsplit("/", 1)[1]].write(root, dockerfile, root / folder)


def context_paths(dockerfile: str, name: str, build_args: dict[str, str]) -> list[str]:
    """What the build context must hold: the Dockerfile and each COPY/ADD source, ARG names
    resolved (``build_args`` over the Dockerfile's defaults). Sending only these, rather than
    the whole checkout with every image's wheels and the models (over 500 MB), is most of
    what a rebuild of the runner used to wait for."""
    args = dict(re.findall(r"^ARG\s+(\w+)=(\S+)", dockerfile, re.MULTILINE)) | build_args
    paths = {f"images/{name}/Dockerfile"}
    for source in _copy_sources(dockerfile):
        paths.add(_prefix(re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), ""), source)))
    # A file inside a folder already sent would be sent twice.
    return [p for p in sorted(paths) if not any(p.startswith(q + "/") for q in paths)]


def _context_filter(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """What .dockerignore leaves out: caches, bytecode, egg-info, and build logs — but a
    generated folder is sent whole (the bytecode one holds nothing else)."""
    parts = info.name.split("/")
    if parts[:2] == [".cache", "build"] and len(parts) > 3 and parts[3] in GENERATED:
        return info
    if _SKIPPED_NAMES.intersection(parts) or any(p.endswith(".egg-info") for p in parts):
        return None
    if info.name.endswith(".pyc") or (parts[:2] == [".cache", "build"] and parts[-1] == "build.log"):
        return None
    return info


def write_context(root: Path, paths: list[str], sink: IO[bytes]) -> None:
    """A tar build context of ``paths`` (relative to ``root``; absent ones are skipped, so
    the Dockerfile's COPY names the missing file itself)."""
    with tarfile.open(fileobj=sink, mode="w") as archive:
        for relative in paths:
            if (root / relative).exists():
                archive.add(root / relative, arcname=relative, filter=_context_filter)


def _hash_tree(update: Callable[[bytes], object], root: Path, relative: str) -> None:
    path = root / relative
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted(
            p for p in path.rglob("*")
            if p.is_file() and not _SKIPPED_NAMES.intersection(p.relative_to(root).parts)
            and not p.name.endswith(_SKIPPED_SUFFIXES)
            and not any(part.endswith(".egg-info") for part in p.relative_to(root).parts)
        )
    else:
        files = []
    for file in files:
        update(str(file.relative_to(root)).encode() + b"\0")
        update(hashlib.sha256(file.read_bytes()).digest())


def _certificates() -> list[Path]:
    ca_dir = Path(os.environ.get("TRIALBOX_CA_DIR", "/usr/local/share/ca-certificates"))
    return sorted(ca_dir.rglob("*.crt")) if ca_dir.is_dir() else []


def inputs_digest(name: str, root: Path, base_id: str, build_args: dict[str, str],
                  labels: dict[str, str]) -> str:
    """sha256 of everything ``trialbox/<name>`` is built from (``base_id``: the base image's
    id, so a re-bootstrapped base rebuilds everything); equal digests, equal images."""
    digest = hashlib.sha256()
    dockerfile = root / "images" / name / "Dockerfile"
    text = dockerfile.read_text()
    for relative in sorted({f"images/{name}", "scripts/prepare-build-context",
                            *copied_paths(text)}):
        _hash_tree(digest.update, root, relative)
    for folder in generated_folders(text):
        digest.update(folder.encode() + b"\0")
        digest.update(hashlib.sha256(GENERATED[folder.rsplit("/", 1)[1]].inputs(root)).digest())
    for cert in _certificates():
        digest.update(cert.name.encode() + b"\0" + cert.read_bytes())
    settings = {"base_id": base_id, "build_args": build_args, "labels": labels,
                "target_python": os.environ.get("TRIALBOX_TARGET_PYTHON", "3.11.2")}
    digest.update(repr(sorted(settings.items())).encode())
    return digest.hexdigest()
