"""Reading the corpus manifests: every manifest.json under the corpus root, each checked on
its own (ids unique, files present and unchanged), merged into one `Manifest`."""

from __future__ import annotations

import os
from pathlib import Path

from runner.scenarios._manifest import CorpusDocument, Manifest
from runner.scenarios._problems import Problem
from runner.scenarios._source import KeyPath, SourceMap, parse_json
from runner.scenarios._validate import (
    MANIFEST_FIXES,
    MANIFEST_FORMAT,
    problem_at,
    unknown_key_problems,
    validate_model,
)
from runner.system.digests import sha256_of_file, too_large_to_hash

MANIFEST_NAME = "manifest.json"
REAL_WORLD_FOLDER = "real_world"
#: Folders below the corpus root searched for more manifests (GAIA keeps one, a level down).
MANIFEST_DEPTH = 3


def manifest_files(corpus_root: Path) -> list[Path]:
    """`<corpus>/manifest.json` first, then every other manifest.json below it, sorted
    (GAIA adds an optional real_world/manifest.json). Hidden and symlinked folders are not
    searched."""
    root = Path(corpus_root)
    found = []
    # Searched MANIFEST_DEPTH folders deep, one without a manifest of its own at the top only
    # a level down: `--corpus /` once walked the whole file system, /proc included.
    deepest = MANIFEST_DEPTH if (root / MANIFEST_NAME).is_file() else 1
    if root.is_dir():
        for folder, subfolders, names in os.walk(root):
            depth = len(Path(folder).relative_to(root).parts)
            subfolders[:] = [] if depth >= deepest else sorted(
                name for name in subfolders if not name.startswith("."))
            if MANIFEST_NAME in names and Path(folder) != root:
                found.append(Path(folder) / MANIFEST_NAME)
    return [root / MANIFEST_NAME, *sorted(found)]


def load_manifest(corpus_root: Path) -> tuple[Manifest | None, list[Problem]]:
    """Every manifest of the corpus, each checked on its own, merged into one.

    A document id listed by two manifests must describe the same document in both; a file
    in a sub-folder manifest may be named relative to that folder or to the corpus root.
    """
    corpus_root = Path(corpus_root)
    root_file, *others = manifest_files(corpus_root)
    problems: list[Problem] = []
    loaded: list[Manifest] = []
    if not os.path.lexists(root_file):
        problems.append(Problem(file=root_file, message="corpus manifest not found",
                                fix=f"give the corpus folder that holds {MANIFEST_NAME} "
                                    "(--corpus DIR)"))
    for file in ([root_file] if os.path.lexists(root_file) else []) + others:
        manifest, file_problems = _load_one_manifest(file, corpus_root)
        problems += file_problems
        if manifest is not None:
            loaded.append(manifest)
    if not loaded:
        return None, problems
    merged, conflicts = _merge(loaded)
    return merged, problems + conflicts


def _load_one_manifest(file: Path, corpus_root: Path) -> tuple[Manifest | None, list[Problem]]:
    parsed = parse_json(file)
    problems = list(parsed.problems)
    if parsed.source is None:
        return None, problems
    if not isinstance(parsed.data, dict):
        return None, problems + [Problem(
            file=file, line=1, message="top level is not an object",
            fix='write {"documents": [...], "adversarial_documents": [...]}')]
    problems += unknown_key_problems(Manifest, parsed.data, parsed.source)
    manifest, invalid = validate_model(Manifest, parsed.data, parsed.source,
                                       MANIFEST_FIXES, MANIFEST_FORMAT)
    if manifest is None:
        return None, problems + invalid
    manifest._source = parsed.source
    for document in manifest.all_documents:
        document._folder = file.parent
    problems += _manifest_rules(manifest, parsed.source, corpus_root)
    return manifest, problems


def _merge(manifests: list[Manifest]) -> tuple[Manifest, list[Problem]]:
    """One manifest from several; an id listed twice with different contents is an error."""
    merged = Manifest()
    merged._source = manifests[0]._source
    merged._files = [m.source_file for m in manifests if m.source_file is not None]
    first: dict[str, tuple[CorpusDocument, Manifest]] = {}
    problems = []
    for manifest in manifests:
        source = manifest._source
        assert source is not None
        for list_name in ("documents", "adversarial_documents"):
            for index, document in enumerate(getattr(manifest, list_name)):
                earlier = first.get(document.id)
                if earlier is None:
                    first[document.id] = (document, manifest)
                    getattr(merged, list_name).append(document)
                    continue
                if earlier[1] is manifest:
                    continue  # a repeat within one file: reported by _manifest_rules
                if not _same_document(earlier[0], document):
                    problems.append(problem_at(
                        source, (list_name, index, "id"),
                        f"document id '{document.id}' is also listed in "
                        f"{earlier[1].source_file} with different contents",
                        "keep one entry for the document, or give one of them another id"))
    return merged, problems


def _same_document(one: CorpusDocument, other: CorpusDocument) -> bool:
    return one.model_dump() == other.model_dump()


def _manifest_rules(manifest: Manifest, source: SourceMap, corpus_root: Path) -> list[Problem]:
    problems = []
    seen_docs: dict[str, int | None] = {}
    for list_name, documents in (("documents", manifest.documents),
                                 ("adversarial_documents", manifest.adversarial_documents)):
        for index, doc in enumerate(documents):
            path: KeyPath = (list_name, index)
            if doc.id in seen_docs:
                problems.append(problem_at(source, path + ("id",),
                                           f"document id '{doc.id}' is used twice "
                                           f"(first at line {seen_docs[doc.id]})",
                                           "give every document a unique id"))
            seen_docs.setdefault(doc.id, source.line_of(path + ("id",)))
            problems += _fact_id_problems(doc, source, path)
            problems += _document_file_problems(doc, source, path, corpus_root)
    return problems


def _fact_id_problems(doc: CorpusDocument, source: SourceMap, path: KeyPath) -> list[Problem]:
    problems = []
    seen: set[str] = set()
    for index, fact in enumerate(doc.facts):
        if fact.id in seen:
            problems.append(problem_at(source, path + ("facts", index, "id"),
                                       f"fact id '{fact.id}' is used twice in document '{doc.id}'",
                                       "give every fact of a document a unique id"))
        seen.add(fact.id)
    return problems


def _document_file_problems(doc: CorpusDocument, source: SourceMap, path: KeyPath,
                            corpus_root: Path) -> list[Problem]:
    escape = path_escape(doc.filename, corpus_root)
    if escape:
        return [problem_at(source, path + ("filename",), escape,
                           "give a file name inside the corpus folder")]
    located = doc.locate(corpus_root)
    if located is None:
        if _not_committed(doc, corpus_root):
            return []  # by design; scenarios using it are SKIPPED_NO_DOCUMENT
        also = f" and {doc._folder}" if doc._folder not in (None, corpus_root) else ""
        return [problem_at(source, path + ("filename",),
                           f"file '{doc.filename}' not found under {corpus_root} "
                           f"(looked in ., documents/, adversarial/{also})",
                           "add the file, fix the name, or set \"real_world\": true if it is "
                           "not committed")]
    if not located.resolve().is_relative_to(corpus_root.resolve()):
        # documents/x.md may itself be a symlink out of the corpus: the agent would be given
        # a file from elsewhere on the machine, whatever its hash.
        return [problem_at(source, path + ("filename",),
                           f"{located} is a symlink that leaves the corpus root",
                           "replace the link with the file itself")]
    oversized = too_large_to_hash(located) if doc.sha256 else None
    if oversized:
        return [problem_at(source, path + ("filename",), oversized,
                           "give a smaller document (or split it) and update its sha256")]
    if doc.sha256 and sha256_of_file(located) != doc.sha256.lower():
        return [problem_at(source, path + ("sha256",),
                           f"{located} has changed since the manifest was written (sha256 differs)",
                           "re-check the document's facts, then update its sha256")]
    return []


def _not_committed(doc: CorpusDocument, corpus_root: Path) -> bool:
    """Real-world documents are not redistributable: marked so, or kept (as GAIA does) in a
    real_world/ folder or manifest."""
    in_folder = doc._folder is not None and doc._folder != corpus_root and (
        doc._folder.name == REAL_WORLD_FOLDER)
    return doc.real_world or in_folder or Path(doc.filename).parts[:1] == (REAL_WORLD_FOLDER,)


def path_escape(path: str, corpus_root: Path) -> str | None:
    """Why `path` would leave the corpus root (absolute, `..`, a symlink out), or None."""
    if os.path.isabs(path) or Path(path).is_absolute():
        return f"path '{path}' is absolute; it must be relative to the corpus root"
    root = corpus_root.resolve()
    target = (corpus_root / path).resolve()
    if not target.is_relative_to(root):
        how = "goes up with '..'" if ".." in Path(path).parts else "is a symlink"
        return f"path '{path}' {how} and leaves the corpus root"
    return None
