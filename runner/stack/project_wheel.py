"""trialbox's metadata wheel: the project's name, version, dependencies and console script — no code.

The runner image installs this wheel in the layer after its dependencies, so pip writes the
``trialbox`` console script and ``pip check`` proves the dependency wheels cover what the project
declares; the ``runner`` package itself is copied afterwards as the image's last, thin layer
(images/runner/Dockerfile). Building a real wheel of trialbox on every change under ``runner/``
was most of what a rebuild of the runner image waited for.

The wheel is made from pyproject.toml's ``[project]`` name, version, requires-python,
dependencies and scripts only, byte for byte the same while those are (fixed timestamps, sorted
entries): editing pyproject's tool settings leaves the image's dependency layers cached.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import tomllib
import zipfile
from pathlib import Path
from typing import Any

#: Every entry's timestamp: the earliest a zip can hold, so equal metadata gives equal bytes.
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
_GENERATOR = "trialbox (runner/stack/project_wheel.py)"


class ProjectMetadataError(ValueError):
    """pyproject.toml lacks something the metadata wheel needs (a static name or version)."""


def project_table(pyproject: Path) -> dict[str, Any]:
    """pyproject.toml's ``[project]`` table."""
    project = tomllib.loads(pyproject.read_text()).get("project")
    if not isinstance(project, dict):
        raise ProjectMetadataError(f"{pyproject}: no [project] table")
    for key in ("name", "version"):
        if not isinstance(project.get(key), str):
            raise ProjectMetadataError(f"{pyproject}: [project] needs a static {key}")
    return project


def _normalized(name: str) -> str:
    """The name as wheel file names spell it (PEP 427: runs of ``-_.`` become one ``_``)."""
    return re.sub(r"[-_.]+", "_", name)


def wheel_name(project: dict[str, Any]) -> str:
    return f"{_normalized(project['name'])}-{project['version']}-py3-none-any.whl"


def metadata_files(project: dict[str, Any]) -> dict[str, bytes]:
    """The dist-info files (path in the wheel → content), RECORD excepted."""
    dist_info = f"{_normalized(project['name'])}-{project['version']}.dist-info"
    metadata = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
    ]
    if project.get("requires-python"):
        metadata.append(f"Requires-Python: {project['requires-python']}")
    metadata += [f"Requires-Dist: {dependency}" for dependency in project.get("dependencies", [])]
    files = {
        f"{dist_info}/METADATA": "\n".join(metadata) + "\n",
        f"{dist_info}/WHEEL": (f"Wheel-Version: 1.0\nGenerator: {_GENERATOR}\n"
                               "Root-Is-Purelib: true\nTag: py3-none-any\n"),
    }
    scripts = project.get("scripts") or {}
    if scripts:
        files[f"{dist_info}/entry_points.txt"] = "[console_scripts]\n" + "".join(
            f"{name} = {target}\n" for name, target in sorted(scripts.items()))
    return {path: text.encode() for path, text in files.items()}


def _record_line(path: str, content: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(content)}"


def metadata_wheel(project: dict[str, Any]) -> bytes:
    """The wheel's bytes: the same for the same metadata, whenever and wherever it is built."""
    files = metadata_files(project)
    dist_info = next(iter(files)).split("/", 1)[0]
    record = f"{dist_info}/RECORD"
    files[record] = ("\n".join(_record_line(path, content) for path, content in files.items())
                     + f"\n{record},,\n").encode()
    sink = io.BytesIO()
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(files, key=lambda p: (p == record, p)):  # RECORD last, as pip expects
            entry = zipfile.ZipInfo(path, date_time=_ZIP_EPOCH)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, files[path])
    return sink.getvalue()


#: The [project] keys the wheel is made from: nothing else in pyproject.toml changes it.
WHEEL_KEYS = ("name", "version", "requires-python", "dependencies", "scripts")


def wheel_inputs(root: Path) -> bytes:
    """What the wheel is made from, canonically (for the image's inputs digest): read without
    checks, so a checkout the wheel cannot be made from still has a digest, and its build fails
    with ``ProjectMetadataError`` instead."""
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text()).get("project") or {}
    except (OSError, tomllib.TOMLDecodeError) as error:
        return f"unreadable: {error}".encode()
    chosen = {key: project.get(key) for key in WHEEL_KEYS} if isinstance(project, dict) else {}
    return json.dumps(chosen, sort_keys=True).encode()


def context_files(root: Path) -> dict[str, bytes]:
    """What ``.cache/build/<image>/metadata/`` holds: the metadata wheel of the checkout."""
    project = project_table(root / "pyproject.toml")
    return {wheel_name(project): metadata_wheel(project)}
