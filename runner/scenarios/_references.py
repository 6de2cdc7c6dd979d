"""A scenario checked against the corpus: setup paths inside it and present, captured
absolute paths matched to corpus files, document and fact ids known to a manifest.

GAIA only needs a setup document's path, and its real_world documents are in no committed
manifest, so a document id no manifest lists is a warning while its file is there.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath, PureWindowsPath

from runner.scenarios._manifest import Manifest
from runner.scenarios._manifest_load import MANIFEST_NAME, REAL_WORLD_FOLDER, path_escape
from runner.scenarios._models import Scenario, SetupDocument, corpus_relative
from runner.scenarios._problems import Level, Problem
from runner.scenarios._source import KeyPath, SourceMap
from runner.scenarios._validate import close_match, did_you_mean, problem_at


def _scenario_source(scenario: Scenario) -> SourceMap:
    assert scenario._source is not None, "scenarios checked here come from files"
    return scenario._source


def manifest_reference_problems(scenario: Scenario, manifest: Manifest | None,
                                 corpus_root: Path) -> list[Problem]:
    """Every ground_truth doc_id/fact_id and setup corpus_doc names a known document.

    GAIA only needs a setup document's path, and its real_world documents are in no
    committed manifest, so an id no manifest lists is a warning while its file is there;
    it is an error when nothing on disk stands for it either.
    """
    if manifest is None:
        return []  # the missing manifest is reported once, for the whole tree
    source = _scenario_source(scenario)
    problems = []
    for index, doc in enumerate(scenario.setup_documents):
        if doc.corpus_doc is None or manifest.document(doc.corpus_doc) is not None:
            continue
        path: KeyPath = ("setup", "index_documents", index, "corpus_doc")
        listed = _listed_as(manifest, doc, corpus_root)
        if listed is not None:
            problems.append(problem_at(
                source, path, f"document '{doc.corpus_doc}' is not in the corpus manifest, "
                              f"which lists this file as '{listed}'",
                f"write `corpus_doc: {listed}`"))
        elif (corpus_root / doc.relative_path).is_file():
            problems.append(_unlisted(source, path, doc.corpus_doc, str(doc.relative_path)))
        # A missing file is reported by the setup-path check (error, or a real-world skip).
    for index, turn in enumerate(scenario.turns):
        if turn.ground_truth is not None:
            problems += _ground_truth_problems(scenario, index, manifest, corpus_root)
    return problems


def _ground_truth_problems(scenario: Scenario, index: int, manifest: Manifest,
                           corpus_root: Path) -> list[Problem]:
    source = _scenario_source(scenario)
    truth = scenario.turns[index].ground_truth
    assert truth is not None
    path: KeyPath = ("turns", index, "ground_truth")
    if truth.doc_id is None:
        if truth.fact_id is None:
            return []
        return [problem_at(source, path + ("fact_id",),
                           f"fact_id '{truth.fact_id}' is given without a doc_id",
                           "add the doc_id of the document the fact belongs to")]
    document = manifest.document(truth.doc_id)
    if document is not None:
        if truth.fact_id is None or document.fact(truth.fact_id) is not None:
            return []
        known = [fact.id for fact in document.facts]
        return [problem_at(source, path + ("fact_id",),
                           f"fact '{truth.fact_id}' is not a fact of document '{truth.doc_id}'"
                           f"{did_you_mean(truth.fact_id, known)}",
                           "use one of: " + (", ".join(known) if known else
                                             "(the document has no facts)")
                           + " — or add the fact to the manifest")]
    if any(doc.corpus_doc == truth.doc_id for doc in scenario.setup_documents):
        return []  # reported once, at its setup entry (unlisted, or missing)
    by_name = _file_named(corpus_root, truth.doc_id)
    if by_name is not None:
        return [_unlisted(source, path + ("doc_id",), truth.doc_id, by_name)]
    return [problem_at(source, path + ("doc_id",),
                       f"document '{truth.doc_id}' is not in the corpus manifest, not indexed in "
                       f"setup, and no file of that name is in the corpus"
                       f"{did_you_mean(truth.doc_id, manifest.document_ids)}",
                       "use a document id from manifest.json, or index the document in setup")]


def _unlisted(source: SourceMap, path: KeyPath, doc_id: str, file: str) -> Problem:
    return problem_at(
        source, path, f"document '{doc_id}' is in no corpus manifest; its file {file} is used "
                      "as it is, and its facts cannot be checked",
        "add it to a manifest.json (e.g. real_world/manifest.json) to check its facts",
        Level.WARNING)


def _listed_as(manifest: Manifest, doc: SetupDocument, corpus_root: Path) -> str | None:
    """The id under which the manifest lists this setup document's file, if any."""
    target = (corpus_root / doc.relative_path).resolve()
    for entry in manifest.all_documents:
        located = entry.locate(corpus_root)
        if located is not None and located.resolve() == target:
            return entry.id
    return None


def _file_named(corpus_root: Path, stem: str) -> str | None:
    """A corpus file whose name without extension is `stem` (GAIA ids are file stems)."""
    matches = [rel for rel in corpus_files(corpus_root)
               if rel.stem == stem and rel.name != MANIFEST_NAME]
    return str(matches[0]) if matches else None


def setup_document_problems(scenario: Scenario, manifest: Manifest | None,
                             corpus_root: Path) -> list[Problem]:
    """Every setup path stays inside the corpus and exists (unless the document is
    real-world); an absolute captured path is matched to a corpus file first."""
    source = _scenario_source(scenario)
    problems = []
    for index, doc in enumerate(scenario.setup_documents):
        path: KeyPath = ("setup", "index_documents", index, "path")
        if doc.is_absolute and corpus_relative(doc.path) is None:
            matched = _match_absolute(source, path, doc, corpus_root)
            problems += matched
            if matched and matched[0].is_error:
                continue
        escape = path_escape(str(doc.relative_path), corpus_root)
        if escape:
            problems.append(problem_at(
                source, path, escape,
                "give a path relative to the corpus root, e.g. documents/x.md"))
        elif not (corpus_root / doc.relative_path).is_file():
            if is_real_world(doc, manifest):
                problems.append(problem_at(
                    source, path, f"real-world document '{doc.path}' is not present; "
                                  "the scenario will be SKIPPED_NO_DOCUMENT",
                    f"place the file at {corpus_root / doc.relative_path} to run it",
                    Level.WARNING))
            else:
                problems.append(_missing(source, path, doc.path, corpus_root,
                                         doc.relative_path.name))
    return problems


def _missing(source: SourceMap, path: KeyPath, written: str, corpus_root: Path,
             name: str, why: str = "") -> Problem:
    nearby = _nearby_file(corpus_root, name)
    return problem_at(source, path, f"document '{written}' not found under {corpus_root}{why}",
                      f"did you mean '{nearby}'?" if nearby else
                      "fix the path (relative to the corpus root) or add the file")


def _match_absolute(source: SourceMap, path: KeyPath, doc: SetupDocument,
                    corpus_root: Path) -> list[Problem]:
    """An absolute path from another machine, outside any eval/corpus folder: the corpus
    file of the same name stands for it (with a warning), else it is a missing document."""
    windows = "\\" in doc.path or bool(PureWindowsPath(doc.path).drive)
    name = (PureWindowsPath(doc.path) if windows else PurePosixPath(doc.path)).name
    found = [rel for rel in corpus_files(corpus_root) if rel.name == name]
    if not found:
        return [_missing(source, path, doc.path, corpus_root, name,
                         " (an absolute path outside any eval/corpus folder is looked for by "
                         f"its file name, '{name}')")]
    doc._matched = PurePosixPath(found[0].as_posix())
    others = f" (also found: {', '.join(map(str, found[1:]))})" if len(found) > 1 else ""
    return [problem_at(
        source, path, f"absolute path '{doc.path}' is outside any eval/corpus folder; using the "
                      f"corpus file of the same name, {doc._matched}{others}",
        f"write `path: {doc._matched}` (relative to the corpus root)", Level.WARNING)]


def corpus_files(corpus_root: Path) -> list[PurePosixPath]:
    """Every regular file under the corpus, relative to it, sorted; hidden and symlinked
    folders are not entered (names are compared as text, never used as glob patterns)."""
    found = []
    for folder, subfolders, names in os.walk(corpus_root):
        subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))
        for name in names:
            file = Path(folder) / name
            if not name.startswith(".") and file.is_file():
                found.append(PurePosixPath(file.relative_to(corpus_root).as_posix()))
    return sorted(found)


def _nearby_file(corpus_root: Path, name: str) -> str | None:
    candidates = {str(rel): rel.name for rel in corpus_files(corpus_root)}
    best = close_match(name, candidates.values())
    return next((rel for rel, base in candidates.items() if base == best), None)


def is_real_world(doc: SetupDocument, manifest: Manifest | None) -> bool:
    """Not committed by design: under a real_world/ folder (GAIA's layout) or marked
    `real_world: true` in the manifest. A missing one skips the scenario; it is no error."""
    if doc.relative_path.parts[:1] == (REAL_WORLD_FOLDER,):
        return True
    if manifest is None or doc.corpus_doc is None:
        return False
    entry = manifest.document(doc.corpus_doc)
    return entry is not None and entry.real_world


def missing_documents(scenario: Scenario, corpus_root: Path) -> list[SetupDocument]:
    """Setup documents absent from the corpus. The engine marks a scenario with any of them
    SKIPPED_NO_DOCUMENT (validation already refused missing documents that are not real-world)."""
    return [doc for doc in scenario.setup_documents
            if not (Path(corpus_root) / doc.relative_path).is_file()]
