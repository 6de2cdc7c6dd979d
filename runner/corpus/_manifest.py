"""The corpus manifest as the corpus build and its quality gate read it.

The manifest's format is owned by ``runner.scenarios`` (``Manifest``, ``CorpusDocument``,
``Fact``). The corpus adds two fields those models do not need for running scenarios:

- ``Fact.absent_terms``: for a fact whose answer is null (the document does not say), words
  that must NOT occur in the document — the gate's proof that the answer really is absent.
- ``CorpusDocument.expected_behavior``: GAIA's note on what an agent should do with an
  adversarial document.

They are declared here by extending the owner's models, so there is still one format.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field

from runner.scenarios import CorpusDocument, Fact, Manifest

MANIFEST_NAME = "manifest.json"


class CorpusFact(Fact):
    absent_terms: list[str] = Field(default_factory=list)


class CorpusEntry(CorpusDocument):
    facts: list[CorpusFact] = Field(default_factory=list)  # type: ignore[assignment]
    expected_behavior: str | None = None


class CorpusManifest(Manifest):
    documents: list[CorpusEntry] = Field(default_factory=list)  # type: ignore[assignment]
    adversarial_documents: list[CorpusEntry] = Field(  # type: ignore[assignment]
        default_factory=list)

    @property
    def entries(self) -> list[CorpusEntry]:
        return [*self.documents, *self.adversarial_documents]

    def entry(self, doc_id: str) -> CorpusEntry | None:
        return next((doc for doc in self.entries if doc.id == doc_id), None)


def read_manifest(corpus_root: Path) -> CorpusManifest:
    """Parse ``<corpus_root>/manifest.json``; a broken file is an error naming the file."""
    file = Path(corpus_root) / MANIFEST_NAME
    try:
        return CorpusManifest.model_validate_json(file.read_bytes())
    except FileNotFoundError as error:
        raise ValueError(f"{file}: corpus manifest not found; give the corpus folder") from error
    except ValueError as error:
        raise ValueError(f"{file}: not a valid corpus manifest: {error}") from error


def write_checksums(corpus_root: Path, checksums: dict[str, str]) -> list[str]:
    """Set ``sha256`` of the given document ids in manifest.json, keeping everything else.

    Edits the JSON data rather than re-serialising the model, so keys the models do not know
    and the author's key order survive. Returns the ids whose checksum changed.
    """
    file = Path(corpus_root) / MANIFEST_NAME
    data = json.loads(file.read_text(encoding="utf-8"))
    changed = []
    for list_name in ("documents", "adversarial_documents"):
        for entry in data.get(list_name, []):
            new = checksums.get(entry.get("id"))
            if new is not None and entry.get("sha256") != new:
                entry["sha256"] = new
                changed.append(entry["id"])
    if changed:
        file.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return changed
