"""Building the corpus: generate, fetch, and prove every file matches the manifest.

The manifest pins a sha256 for every document. Generated documents must reproduce it exactly
(a mismatch means the generator changed: an error, since facts were written against the old
bytes). Committed documents must match it too. Real-world texts that this machine cannot
provide, or provides in another version, are left out and reported — their scenarios are
SKIPPED_NO_DOCUMENT, never failed, and a stale copy is removed so it cannot be used.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from runner.corpus._generated import GENERATED
from runner.corpus._manifest import read_manifest, write_checksums
from runner.corpus._real_world import REAL_WORLD, SourceUnavailable
from runner.scenarios import CorpusDocument, Manifest
from runner.system.paths import cache_root
from runner.system.writes import atomic_write_bytes


class Outcome(str, Enum):
    GENERATED = "generated"  # written by us, checksum matches
    FETCHED = "fetched"  # real-world text copied in, checksum matches
    COMMITTED = "committed"  # in git, checksum matches
    NOT_FETCHED = "not_fetched"  # real-world fetching was turned off
    UNAVAILABLE = "unavailable"  # real-world source not reachable on this machine
    OTHER_VERSION = "other_version"  # real-world source differs from the pinned text
    MISMATCH = "mismatch"  # generated/committed bytes differ from the manifest: an error
    MISSING = "missing"  # a committed document is not on disk: an error
    UNKNOWN = "unknown"  # manifest and code disagree about a document: an error


ERRORS = frozenset({Outcome.MISMATCH, Outcome.MISSING, Outcome.UNKNOWN})


@dataclass
class DocumentResult:
    doc_id: str
    filename: str
    outcome: Outcome
    sha256: str | None = None
    detail: str = ""


@dataclass
class BuildReport:
    corpus_root: Path
    results: list[DocumentResult] = field(default_factory=list)
    checksums_updated: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[DocumentResult]:
        return [result for result in self.results if result.outcome in ERRORS]

    @property
    def ok(self) -> bool:
        return not self.errors

    def by_outcome(self, outcome: Outcome) -> list[DocumentResult]:
        return [result for result in self.results if result.outcome is outcome]

    def lines(self) -> list[str]:
        """One line per document, then what changed, then a count per outcome."""
        out = []
        for result in self.results:
            line = f"{result.outcome.value:<13} {result.doc_id:<34} {result.filename}"
            quiet = result.outcome in (Outcome.FETCHED, Outcome.GENERATED, Outcome.COMMITTED)
            out.append(line + (f"  ({result.detail})" if result.detail and not quiet else ""))
        if self.checksums_updated:
            out.append(f"manifest sha256 updated for: {', '.join(self.checksums_updated)}")
        counts = [f"{o.value} {len(self.by_outcome(o))}" for o in Outcome if self.by_outcome(o)]
        out.append("summary: " + ", ".join(counts))
        if not self.ok:
            out.append(f"corpus build FAILED: {len(self.errors)} document(s) with errors")
        return out

    def __iter__(self) -> Iterator[str]:
        """Iterating a report gives its printable lines (``for line in build(root)``)."""
        return iter(self.lines())


def default_cache_dir() -> Path:
    """Downloaded sdists, kept between builds: under the project's cache root (runner/system/paths.py)."""
    return cache_root() / "corpus"


def build_corpus(corpus_root: Path, *, real_world: bool = True, cache_dir: Path | None = None,
                 update_checksums: bool = False) -> BuildReport:
    """Write generated and real-world documents under ``corpus_root`` and check every checksum.

    With ``update_checksums`` the manifest's sha256 values are set from the bytes on disk
    instead of compared (for corpus authors, after re-checking the facts).
    """
    corpus_root = Path(corpus_root)
    manifest = read_manifest(corpus_root)
    cache = cache_dir or default_cache_dir()
    report = BuildReport(corpus_root)
    report.results += _registry_problems(manifest)
    actual: dict[str, str] = {}
    for entry in manifest.all_documents:
        if entry.id in GENERATED:
            result = _build_generated(entry, corpus_root)
        elif entry.real_world:
            result = _fetch_real_world(entry, corpus_root, cache, real_world, update_checksums)
        else:
            result = _check_committed(entry, corpus_root)
        if result.sha256:
            actual[entry.id] = result.sha256
        report.results.append(result)
    if update_checksums:
        report.checksums_updated = write_checksums(corpus_root, actual)
        for result in report.results:
            if result.outcome is Outcome.MISMATCH and result.doc_id in actual:
                result.outcome = Outcome.COMMITTED if result.doc_id not in GENERATED \
                    else Outcome.GENERATED
                result.detail = "checksum updated in the manifest"
    return report


def build(corpus_root: Path, *, real_world: bool = True,
          cache_dir: Path | None = None) -> BuildReport:
    """What ``trialbox corpus build`` runs: the build with defaults. Check ``.ok`` for the
    exit status; iterate the report for its lines."""
    return build_corpus(corpus_root, real_world=real_world, cache_dir=cache_dir)


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _registry_problems(manifest: Manifest) -> list[DocumentResult]:
    """Generated/real-world documents the code knows must be in the manifest, and agree."""
    problems = []
    for registry, kind in ((GENERATED, "generated"), (REAL_WORLD, "real-world")):
        for doc_id, spec in registry.items():
            entry = manifest.document(doc_id)
            if entry is None:
                problems.append(DocumentResult(doc_id, spec.filename, Outcome.UNKNOWN,
                                               detail=f"{kind} document missing from manifest"))
            elif entry.filename != spec.filename:
                problems.append(DocumentResult(
                    doc_id, entry.filename, Outcome.UNKNOWN,
                    detail=f"manifest filename {entry.filename!r} but the {kind} source "
                           f"writes {spec.filename!r}"))
    for entry in manifest.all_documents:
        if entry.real_world and entry.id not in REAL_WORLD:
            problems.append(DocumentResult(entry.id, entry.filename, Outcome.UNKNOWN,
                                           detail="real_world document without a source in "
                                                  "runner/corpus/_real_world.py"))
    return problems


def _build_generated(entry: CorpusDocument, corpus_root: Path) -> DocumentResult:
    data = GENERATED[entry.id].make()
    digest = sha256_of(data)
    _write_if_changed(corpus_root / entry.filename, data)
    if entry.sha256 and entry.sha256 != digest:
        return DocumentResult(entry.id, entry.filename, Outcome.MISMATCH, digest,
                              f"generated sha256 {digest} but the manifest pins {entry.sha256}")
    if not entry.sha256:
        return DocumentResult(entry.id, entry.filename, Outcome.MISMATCH, digest,
                              "the manifest has no sha256 for it; run with --update-checksums")
    return DocumentResult(entry.id, entry.filename, Outcome.GENERATED, digest)


def _remove_stale(target: Path) -> None:
    """An earlier copy of a real-world text goes when this one cannot be installed; anything
    else at its place (a folder) stays, for the write's own check to refuse by name."""
    if target.is_symlink() or target.is_file():
        target.unlink()


def _fetch_real_world(entry: CorpusDocument, corpus_root: Path, cache: Path, enabled: bool,
                      update_checksums: bool) -> DocumentResult:
    target = corpus_root / entry.filename
    spec = REAL_WORLD.get(entry.id)
    if spec is None:
        return DocumentResult(entry.id, entry.filename, Outcome.UNKNOWN, detail="no source")
    if not enabled:
        return DocumentResult(entry.id, entry.filename, Outcome.NOT_FETCHED,
                              detail=spec.source.describe())
    try:
        data = spec.source.fetch(cache)
    except SourceUnavailable as error:
        _remove_stale(target)
        return DocumentResult(entry.id, entry.filename, Outcome.UNAVAILABLE, detail=str(error))
    digest = sha256_of(data)
    if entry.sha256 and entry.sha256 != digest and not update_checksums:
        _remove_stale(target)
        return DocumentResult(entry.id, entry.filename, Outcome.OTHER_VERSION, digest,
                              f"{spec.source.describe()} differs from the text the facts were "
                              f"written against (sha256 {digest}, pinned {entry.sha256})")
    _write_if_changed(target, data)
    return DocumentResult(entry.id, entry.filename, Outcome.FETCHED, digest,
                          spec.source.describe())


def _check_committed(entry: CorpusDocument, corpus_root: Path) -> DocumentResult:
    path = corpus_root / entry.filename
    if not path.is_file():
        return DocumentResult(entry.id, entry.filename, Outcome.MISSING,
                              detail=f"{path} not found; it should be committed")
    digest = sha256_of(path.read_bytes())
    if entry.sha256 != digest:
        return DocumentResult(entry.id, entry.filename, Outcome.MISMATCH, digest,
                              f"sha256 {digest} but the manifest pins {entry.sha256}; re-check "
                              "its facts, then run with --update-checksums")
    return DocumentResult(entry.id, entry.filename, Outcome.COMMITTED, digest)


def _write_if_changed(path: Path, data: bytes) -> None:
    """Atomic write (a reader never sees half a file), skipped when the bytes are the same; a
    destination that is a folder, a FIFO or a device is refused (WriteRefused), left as it is."""
    if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return
    atomic_write_bytes(path, data)
