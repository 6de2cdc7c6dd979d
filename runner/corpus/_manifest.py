"""Reading and updating the corpus manifest for the build and its quality gate.

The manifest's format is the one model in ``runner.scenarios`` (``Manifest``,
``CorpusDocument``, ``Fact``), including what only the build needs (``Fact.absent_terms``).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from runner.scenarios import MANIFEST_NAME, Manifest
from runner.system.bounded_read import (
    SETTINGS_BYTES,
    BoundedReadError,
    read_bounded,
    read_bounded_text,
)
from runner.system.writes import atomic_write


def read_manifest(corpus_root: Path) -> Manifest:
    """Parse ``<corpus_root>/manifest.json`` alone (the build writes the documents that the
    scenario loader's checks look for); a broken file is an error naming the file."""
    file = Path(corpus_root) / MANIFEST_NAME
    try:
        # Bounded, regular files only: a FIFO by that name blocked `read_bytes` for ever.
        return Manifest.model_validate_json(read_bounded(file, SETTINGS_BYTES))
    except BoundedReadError as error:
        if not file.exists() and not file.is_symlink():
            raise ValueError(f"{file}: corpus manifest not found; give the corpus folder") from None
        raise ValueError(f"{error}; give the corpus folder holding manifest.json") from None
    except ValidationError as error:
        problems = error.errors(include_url=False)
        first = problems[0]
        field = ".".join(str(part) for part in first["loc"]) or "(whole file)"
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ValueError(
            f"{file}: not a valid corpus manifest: {field}: {first['msg']}{more}; run "
            "`trialbox validate` to see every problem with its line") from error


def write_checksums(corpus_root: Path, checksums: dict[str, str]) -> list[str]:
    """Set ``sha256`` of the given document ids in manifest.json, keeping everything else.

    Edits the JSON data rather than re-serialising the model, so keys the models do not know
    and the author's key order survive. Returns the ids whose checksum changed.
    """
    file = Path(corpus_root) / MANIFEST_NAME
    try:  # bounded, regular files only (a FIFO blocked the read for ever)
        data = json.loads(read_bounded_text(file, SETTINGS_BYTES))
    except BoundedReadError as error:
        raise ValueError(f"{error}; give the corpus folder holding manifest.json") from None
    changed = []
    for list_name in ("documents", "adversarial_documents"):
        for entry in data.get(list_name, []):
            new = checksums.get(entry.get("id"))
            if new is not None and entry.get("sha256") != new:
                entry["sha256"] = new
                changed.append(entry["id"])
    if changed:  # whole or not at all, and never renamed over a FIFO or a folder (WriteRefused)
        atomic_write(file, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return changed
