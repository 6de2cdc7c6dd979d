"""The corpus manifest (`<corpus>/manifest.json`): GAIA's format plus a sha256 per document."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from runner.scenarios._source import SourceMap
from runner.system.bounded_read import checked_path_text

DOCUMENT_FOLDERS = ("", "documents", "adversarial")
"""Where a manifest `filename` is looked for, relative to the corpus root, in this order.
GAIA keeps plain documents under documents/ and adversarial ones under adversarial/; a
filename holding a folder ("real_world/x.pdf") is simply relative to the corpus root."""


class Fact(BaseModel):
    """One thing a document says (or, with `answer: null`, does not say)."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, description="unique within its document; scenarios name it "
                    "in ground_truth.fact_id")
    question: str | None = Field(default=None, description="the question the fact answers")
    answer: str | int | float | list[str] | None = Field(
        default=None, description="the answer as the document writes it; null: the document "
        "does not say (the agent must say it does not know)")
    difficulty: str | None = Field(default=None, description="GAIA's difficulty label, "
                                   "informational")
    note: str | None = Field(default=None, description="where or how the document says it")
    absent_terms: list[str] = Field(default_factory=list, description=(
        "for a fact whose answer is null: words that must NOT occur in the document, so the "
        "corpus build can prove the answer really is absent (runner/corpus/_verify.py)"))


class CorpusDocument(BaseModel):
    """One document of the corpus and the facts scenarios may ask about."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, description="unique across the corpus; scenarios name it "
                    "in setup.index_documents[].corpus_doc and ground_truth.doc_id")
    filename: str = Field(min_length=1, description=(
        "the file, relative to the corpus root (or to documents/, adversarial/, or the folder "
        "of the manifest.json that lists it)"))
    format: str | None = Field(default=None, description="pdf, xlsx, csv, markdown, image, …; "
                               "how the corpus gate reads it (else the file extension)")
    domain: str | None = Field(default=None, description="subject area, informational")
    sha256: str | None = Field(default=None, description=(
        "hex digest of the file's bytes, checked when the corpus is loaded and built (the "
        "facts were written against these bytes)"))
    generated: bool | None = Field(default=None, description=(
        "written by runner/corpus/_generated.py at build time rather than committed"))
    real_world: bool = Field(default=False, description=(
        "fetched at build time, not committed: a missing file skips the scenario, no error"))
    expected_behavior: str | None = Field(default=None, description=(
        "GAIA: what an agent should do with this (adversarial) document"))
    facts: list[Fact] = Field(default_factory=list, description="what the document says")

    _folder: Path | None = PrivateAttr(default=None)  # where its manifest.json is

    @field_validator("filename")
    @classmethod
    def _filename_the_system_can_take(cls, filename: str) -> str:
        # Before locate() stats it: a NUL or an over-long name must reject this entry only.
        return checked_path_text(filename)

    def fact(self, fact_id: str) -> Fact | None:
        return next((fact for fact in self.facts if fact.id == fact_id), None)

    def locate(self, corpus_root: Path) -> Path | None:
        """The document's file under the corpus root, or None when it is not there.

        A document from a sub-folder manifest (GAIA's real_world/manifest.json) is looked
        for next to that manifest first.
        """
        folders = [self._folder] if self._folder is not None else []
        folders += [Path(corpus_root) / folder for folder in DOCUMENT_FOLDERS]
        for folder in folders:
            candidate = folder / self.filename
            if candidate.is_file():
                return candidate
        return None


class Manifest(BaseModel):
    """`<corpus>/manifest.json`: the one model of it, for the scenario loader and the corpus
    build alike."""

    model_config = ConfigDict(extra="ignore")

    documents: list[CorpusDocument] = Field(default_factory=list,
                                            description="the documents scenarios index")
    adversarial_documents: list[CorpusDocument] = Field(default_factory=list, description=(
        "documents meant to trip the agent up; they may index 0 chunks without SETUP_ERROR"))
    total_documents: int | None = Field(default=None, description=(
        "GAIA writes the document count here when it merges manifests; informational."))
    # GAIA's own bookkeeping at the head of its manifest: read so that a GAIA manifest loads
    # without warnings, used for nothing.
    total_facts: int | None = Field(default=None, description="GAIA: the fact count; informational.")
    generated_at: str | None = Field(default=None, description=(
        "GAIA: when its manifest was written; informational."))
    notes: str | None = Field(default=None, description=(
        "GAIA: what changed in the corpus and why, in words; informational."))

    _source: SourceMap | None = PrivateAttr(default=None)
    _files: list[Path] = PrivateAttr(default_factory=list)

    @property
    def source_file(self) -> Path | None:
        """The corpus root's manifest.json (the first of `source_files`)."""
        return self._source.file if self._source else None

    @property
    def source_files(self) -> list[Path]:
        """Every manifest.json merged into this one (just `source_file` when not merged)."""
        return self._files or ([self.source_file] if self.source_file else [])

    @property
    def all_documents(self) -> list[CorpusDocument]:
        return [*self.documents, *self.adversarial_documents]

    def document(self, doc_id: str) -> CorpusDocument | None:
        return next((doc for doc in self.all_documents if doc.id == doc_id), None)

    def is_adversarial(self, doc_id: str) -> bool:
        """Adversarial documents may legitimately index 0 chunks (no SETUP_ERROR for them)."""
        return any(doc.id == doc_id for doc in self.adversarial_documents)

    @property
    def document_ids(self) -> list[str]:
        return [doc.id for doc in self.all_documents]
