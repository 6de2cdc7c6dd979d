"""Finding, reading and cross-checking a whole scenario tree.

`load_suite` never raises for bad input: it returns every scenario that is usable and every
problem found, in a stable order (files sorted by path, problems in file order), so the same
bad tree always gives the same report. A scenario with any error is left out of
`Suite.scenarios`; warnings keep it in.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from runner.scenarios._manifest import CorpusDocument, Manifest
from runner.scenarios._models import Scenario, SetupDocument
from runner.scenarios._problems import Level, Problem, field_path
from runner.scenarios._source import KeyPath, SourceMap, parse_json, parse_yaml
from runner.scenarios._validate import (
    MANIFEST_FIXES,
    MANIFEST_FORMAT,
    close_match,
    did_you_mean,
    scenario_rules,
    unknown_key_problems,
    validate_model,
)

SCENARIO_SUFFIXES = (".yaml", ".yml")
MANIFEST_NAME = "manifest.json"


@dataclass
class Suite:
    """The usable scenarios of one or more trees, the corpus manifest, and what is wrong."""

    scenarios: list[Scenario] = field(default_factory=list)
    manifest: Manifest | None = None
    problems: list[Problem] = field(default_factory=list)
    corpus_root: Path | None = None

    @property
    def errors(self) -> list[Problem]:
        return [problem for problem in self.problems if problem.level is Level.ERROR]

    @property
    def warnings(self) -> list[Problem]:
        return [problem for problem in self.problems if problem.level is Level.WARNING]

    @property
    def ok(self) -> bool:
        """No errors (warnings allowed)."""
        return not self.errors


def load_suite(paths: Iterable[Path], corpus_root: Path) -> Suite:
    """Load every scenario file under `paths` (files or folders) against one corpus."""
    corpus_root = Path(corpus_root)
    suite = Suite(corpus_root=corpus_root)
    suite.manifest, manifest_problems = load_manifest(corpus_root)
    files, discovery_problems = discover(paths, skip=corpus_root)
    suite.problems += manifest_problems + discovery_problems
    loaded: list[Scenario] = []
    for file in files:
        scenario, problems = load_scenario_file(file)
        if scenario is not None and suite.manifest is not None:
            problems += _manifest_reference_problems(scenario, suite.manifest)
        if scenario is not None:
            problems += _setup_document_problems(scenario, suite.manifest, corpus_root)
        suite.problems += problems
        if scenario is not None and not any(p.is_error for p in problems):
            loaded.append(scenario)
    suite.scenarios, duplicates = _without_duplicate_ids(loaded)
    suite.problems += duplicates
    return suite


# --- discovery ---------------------------------------------------------------------------

def discover(paths: Iterable[Path], skip: Path | None = None
             ) -> tuple[list[Path], list[Problem]]:
    """Every scenario file under the given files/folders, sorted, each once.

    Files under `skip` (the corpus) are left out when a folder is searched: a YAML document
    in the corpus is material for the agent, not a scenario — even if the user points at
    `eval/` rather than `eval/scenarios/`.
    """
    found: dict[Path, Path] = {}  # resolved -> as the user will read it
    problems = []
    skipped = skip.resolve() if skip is not None else None
    for root in map(Path, paths):
        if root.is_file():
            found.setdefault(root.resolve(), root)
        elif root.is_dir():
            for file in _walk(root):
                resolved = file.resolve()
                if skipped is None or not resolved.is_relative_to(skipped):
                    found.setdefault(resolved, file)
        else:
            problems.append(Problem(file=root, message="no such file or folder",
                                    fix="check the path given for the scenarios"))
    return sorted(found.values()), problems


def _walk(root: Path) -> list[Path]:
    files = []
    for folder, subfolders, names in os.walk(root):  # does not follow symlinked folders
        subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))
        files += [Path(folder) / name for name in names
                  if name.endswith(SCENARIO_SUFFIXES) and not name.startswith(".")]
    return files


# --- one scenario file -------------------------------------------------------------------

def load_scenario_file(file: Path) -> tuple[Scenario | None, list[Problem]]:
    """One file on its own: syntax, unknown keys, types, and the rules within a scenario."""
    parsed = parse_yaml(file)
    problems = list(parsed.problems)
    if parsed.source is None:
        return None, problems
    source = parsed.source
    if not isinstance(parsed.data, dict):
        kind = "a list" if isinstance(parsed.data, list) else "a single value"
        return None, problems + [Problem(
            file=file, line=source.line_of(()), message=f"top level is {kind}, not a mapping",
            fix="a scenario file is one mapping with id, category, persona, setup, turns")]
    problems += unknown_key_problems(Scenario, parsed.data, source)
    scenario, invalid = validate_model(Scenario, parsed.data, source)
    problems += invalid
    if scenario is None:
        return None, problems
    scenario._source = source
    problems += scenario_rules(scenario, source)
    return scenario, problems


# --- the manifest ------------------------------------------------------------------------

def load_manifest(corpus_root: Path) -> tuple[Manifest | None, list[Problem]]:
    """The corpus manifest, checked on its own: ids unique, files present and unchanged."""
    file = corpus_root / MANIFEST_NAME
    if not file.is_file():
        return None, [Problem(file=file, message="corpus manifest not found",
                              fix=f"give the corpus folder that holds {MANIFEST_NAME}")]
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
    problems += _manifest_rules(manifest, parsed.source, corpus_root)
    return manifest, problems


def _manifest_rules(manifest: Manifest, source: SourceMap, corpus_root: Path) -> list[Problem]:
    problems = []
    seen_docs: dict[str, int | None] = {}
    for list_name, documents in (("documents", manifest.documents),
                                 ("adversarial_documents", manifest.adversarial_documents)):
        for index, doc in enumerate(documents):
            path: KeyPath = (list_name, index)
            if doc.id in seen_docs:
                problems.append(_at(source, path + ("id",),
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
            problems.append(_at(source, path + ("facts", index, "id"),
                                f"fact id '{fact.id}' is used twice in document '{doc.id}'",
                                "give every fact of a document a unique id"))
        seen.add(fact.id)
    return problems


def _document_file_problems(doc: CorpusDocument, source: SourceMap, path: KeyPath,
                            corpus_root: Path) -> list[Problem]:
    escape = path_escape(doc.filename, corpus_root)
    if escape:
        return [_at(source, path + ("filename",), escape,
                    "give a file name inside the corpus folder")]
    located = doc.locate(corpus_root)
    if located is None:
        if doc.real_world:
            return []  # not committed by design; scenarios using it are skipped
        return [_at(source, path + ("filename",),
                    f"file '{doc.filename}' not found under {corpus_root} "
                    "(looked in ., documents/, adversarial/)",
                    "add the file, fix the name, or set \"real_world\": true if it is "
                    "not committed")]
    if doc.sha256 and _sha256(located) != doc.sha256.lower():
        return [_at(source, path + ("sha256",),
                    f"{located} has changed since the manifest was written (sha256 differs)",
                    "re-check the document's facts, then update its sha256")]
    return []


def _sha256(file: Path) -> str:
    return hashlib.sha256(file.read_bytes()).hexdigest()


def _at(source: SourceMap, path: KeyPath, message: str, fix: str,
        level: Level = Level.ERROR) -> Problem:
    return Problem(file=source.file, line=source.line_of(path), field=field_path(path),
                   message=message, fix=fix, level=level)


# --- a scenario against the manifest and the corpus --------------------------------------

def _scenario_source(scenario: Scenario) -> SourceMap:
    assert scenario._source is not None, "scenarios checked here come from files"
    return scenario._source


def _manifest_reference_problems(scenario: Scenario, manifest: Manifest) -> list[Problem]:
    """Every ground_truth doc_id/fact_id and setup corpus_doc names a manifest entry."""
    source = _scenario_source(scenario)
    problems = []
    for index, doc in enumerate(scenario.setup_documents):
        if doc.corpus_doc is not None and manifest.document(doc.corpus_doc) is None:
            problems.append(_unknown_document(source, ("setup", "index_documents", index,
                                                       "corpus_doc"), doc.corpus_doc, manifest))
    for index, turn in enumerate(scenario.turns):
        truth = turn.ground_truth
        if truth is None:
            continue
        path: KeyPath = ("turns", index, "ground_truth")
        if truth.doc_id is None:
            if truth.fact_id is not None:
                problems.append(_at(source, path + ("fact_id",),
                                    f"fact_id '{truth.fact_id}' is given without a doc_id",
                                    "add the doc_id of the document the fact belongs to"))
            continue
        document = manifest.document(truth.doc_id)
        if document is None:
            problems.append(_unknown_document(source, path + ("doc_id",), truth.doc_id,
                                              manifest))
        elif truth.fact_id is not None and document.fact(truth.fact_id) is None:
            known = [fact.id for fact in document.facts]
            problems.append(_at(
                source, path + ("fact_id",),
                f"fact '{truth.fact_id}' is not a fact of document '{truth.doc_id}'"
                f"{did_you_mean(truth.fact_id, known)}",
                "use one of: " + (", ".join(known) if known else "(the document has no facts)")
                + " — or add the fact to the manifest"))
    return problems


def _unknown_document(source: SourceMap, path: KeyPath, doc_id: str, manifest: Manifest) -> Problem:
    return _at(source, path, f"document '{doc_id}' is not in the corpus manifest"
                             f"{did_you_mean(doc_id, manifest.document_ids)}",
               "use a document id from manifest.json, or add the document there")


def _setup_document_problems(scenario: Scenario, manifest: Manifest | None,
                             corpus_root: Path) -> list[Problem]:
    """Every setup path stays inside the corpus and exists (unless the document is real-world)."""
    source = _scenario_source(scenario)
    problems = []
    for index, doc in enumerate(scenario.setup_documents):
        path: KeyPath = ("setup", "index_documents", index, "path")
        escape = path_escape(str(doc.relative_path), corpus_root)
        if escape:
            problems.append(_at(source, path, escape,
                                "give a path relative to the corpus root, e.g. documents/x.md"))
        elif not (corpus_root / doc.relative_path).is_file():
            if is_real_world(doc, manifest):
                problems.append(_at(
                    source, path, f"real-world document '{doc.path}' is not present; "
                                  "the scenario will be SKIPPED_NO_DOCUMENT",
                    f"place the file at {corpus_root / doc.relative_path} to run it",
                    Level.WARNING))
            else:
                nearby = _nearby_file(corpus_root, doc.relative_path.name)
                problems.append(_at(source, path,
                                    f"document '{doc.path}' not found under {corpus_root}",
                                    f"did you mean '{nearby}'?" if nearby else
                                    "fix the path (relative to the corpus root) or add the file"))
    return problems


def _nearby_file(corpus_root: Path, name: str) -> str | None:
    if not corpus_root.is_dir():
        return None
    candidates = {str(p.relative_to(corpus_root)): p.name for p in corpus_root.rglob("*")
                  if p.is_file()}
    best = close_match(name, candidates.values())
    return next((rel for rel, base in candidates.items() if base == best), None)


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


def is_real_world(doc: SetupDocument, manifest: Manifest | None) -> bool:
    if manifest is None or doc.corpus_doc is None:
        return False
    entry = manifest.document(doc.corpus_doc)
    return entry is not None and entry.real_world


def missing_documents(scenario: Scenario, corpus_root: Path) -> list[SetupDocument]:
    """Setup documents absent from the corpus. The engine marks a scenario with any of them
    SKIPPED_NO_DOCUMENT (validation already refused missing documents that are not real-world)."""
    return [doc for doc in scenario.setup_documents
            if not (Path(corpus_root) / doc.relative_path).is_file()]


# --- across files ------------------------------------------------------------------------

def _without_duplicate_ids(scenarios: list[Scenario]) -> tuple[list[Scenario], list[Problem]]:
    """Keep the first scenario of each id (files in sorted order); report every repeat."""
    first: dict[str, Scenario] = {}
    kept, problems = [], []
    for scenario in scenarios:
        original = first.get(scenario.id)
        if original is None:
            first[scenario.id] = scenario
            kept.append(scenario)
            continue
        source = _scenario_source(scenario)
        problems.append(_at(
            source, ("id",),
            f"id '{scenario.id}' is already used by "
            f"{original.source_file}:{original.line_of('id')}; this file is not loaded",
            "give each scenario a unique id"))
    return kept, problems
