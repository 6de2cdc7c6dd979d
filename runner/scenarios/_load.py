"""Finding, reading and cross-checking a whole scenario tree.

`load_suite` never raises for bad input: it returns every scenario that is usable and every
problem found, in a stable order (files sorted by path, problems in file order), so the same
bad tree always gives the same report. A scenario with any error is left out of
`Suite.scenarios`; warnings keep it in.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.scenarios._fixtures import declared_folders, outermost
from runner.scenarios._manifest import Manifest
from runner.scenarios._manifest_load import load_manifest
from runner.scenarios._models import Scenario
from runner.scenarios._problems import Level, Problem
from runner.scenarios._references import manifest_reference_problems, setup_document_problems
from runner.scenarios._source import parse_yaml
from runner.scenarios._validate import (
    category_folder,
    problem_at,
    scenario_rules,
    unknown_key_problems,
    validate_model,
)
from runner.system.bounded_read import checked_path_text

SCENARIO_SUFFIXES = (".yaml", ".yml")


@dataclass
class RejectedFile:
    """A scenario file that cannot be used, with what the run needs to decide whether the
    user's selection wanted it: a best-guess id, category and tags."""

    file: Path
    id: str  # the id written in the file when it could be read, else the file's stem
    category: str  # the category written in the file, else the folder under scenarios/
    tags: list[str] | None  # None: the tags could not be read (a selection by tag may want it)
    problems: list[Problem] = field(default_factory=list)  # its errors

    @property
    def names(self) -> list[str]:
        """The id and the file stem: a selection may use either for a broken file."""
        return list(dict.fromkeys([self.id, self.file.stem]))


@dataclass
class Suite:
    """The usable scenarios of one or more trees, the corpus manifest, and what is wrong."""

    scenarios: list[Scenario] = field(default_factory=list)
    manifest: Manifest | None = None
    problems: list[Problem] = field(default_factory=list)
    corpus_root: Path | None = None
    rejected: list[RejectedFile] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)  # every scenario file found

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

    def nothing_found(self, paths: Iterable[Path]) -> str | None:
        """The one line to refuse with when `paths` hold no scenario file at all (an empty
        folder, a typo'd glob): "all passable" or "0 of 0" would read as a clean bill."""
        if self.files or self.scenarios:
            return None
        given = ", ".join(str(path) for path in paths)
        return (f"no scenario file found in {given}; give scenario files (*.yaml) or the folders "
                "that hold them")

    @property
    def tree_errors(self) -> list[Problem]:
        """Errors that belong to no single scenario file (the manifest, a path given that
        does not exist): whatever is selected, they stand."""
        scenario_files = set(self.files)
        return [problem for problem in self.errors if problem.file not in scenario_files]


def load_suite(paths: Iterable[Path], corpus_root: Path) -> Suite:
    """Load every scenario file under `paths` (files or folders) against one corpus."""
    corpus_root = Path(corpus_root)
    suite = Suite(corpus_root=corpus_root)
    suite.manifest, manifest_problems = load_manifest(corpus_root)
    files, discovery_problems = discover(paths, skip=corpus_root)
    suite.files = files
    suite.problems += manifest_problems + discovery_problems
    loaded: list[Scenario] = []
    for file in files:
        scenario, problems, data = _load_file(file)
        if scenario is not None:
            problems += setup_document_problems(scenario, suite.manifest, corpus_root)
            problems += manifest_reference_problems(scenario, suite.manifest, corpus_root)
        suite.problems += problems
        errors = [p for p in problems if p.is_error]
        if scenario is not None and not errors:
            loaded.append(scenario)
        else:
            suite.rejected.append(_rejected(file, data, errors))
    suite.scenarios, duplicates = _without_duplicate_ids(loaded)
    for scenario, problem in duplicates:
        suite.problems.append(problem)
        assert scenario.source_file is not None
        suite.rejected.append(RejectedFile(file=scenario.source_file, id=scenario.id,
                                           category=scenario.category,
                                           tags=list(scenario.tags), problems=[problem]))
    suite.rejected.sort(key=lambda rejected: rejected.file)
    return suite


def _rejected(file: Path, data: Any, errors: list[Problem]) -> RejectedFile:
    """Best guesses from whatever could be read of a broken file."""
    raw = data if isinstance(data, dict) else {}
    written_id = raw.get("id")
    category = raw.get("category")
    tags = raw.get("tags")
    return RejectedFile(
        file=file,
        id=written_id if isinstance(written_id, str) and written_id.strip() else file.stem,
        category=category if isinstance(category, str) and category.strip()
        else category_folder(file) or file.parent.name,
        tags=tags if isinstance(tags, list) and all(isinstance(t, str) for t in tags) else None,
        problems=errors)


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
        try:
            checked_path_text(str(root))
        except ValueError as err:  # before is_dir(): a NUL there is a ValueError, not False
            problems.append(Problem(file=root, message=str(err),
                                    fix="check the path given for the scenarios"))
            continue
        if root.is_dir():
            tree = root.resolve()
            for file in _walk(root):
                resolved = file.resolve()
                if file.is_symlink() and file.is_file() and not resolved.is_relative_to(tree):
                    # A link to /etc/shadow would have its lines shown as "unknown key" warnings
                    # (a link to a device or FIFO: the reader names what it is, unread).
                    problems.append(Problem(
                        file=file, message="is a symbolic link leading out of the scenario "
                        "folder; refused without reading it",
                        fix="copy the scenario file into the folder instead of linking it"))
                elif skipped is None or not resolved.is_relative_to(skipped):
                    found.setdefault(resolved, file)
        elif os.path.lexists(root):
            # A file, or a FIFO/device/dangling link: the reader refuses the odd ones clearly.
            found.setdefault(root.resolve(), root)
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
    scenario, problems, _ = _load_file(file)
    return scenario, problems


def _load_file(file: Path) -> tuple[Scenario | None, list[Problem], Any]:
    """The scenario, its problems, and the raw data read (for best guesses when rejected)."""
    parsed = parse_yaml(file)
    problems = list(parsed.problems)
    if parsed.source is None:
        return None, problems, None
    source = parsed.source
    if not isinstance(parsed.data, dict):
        kind = "a list" if isinstance(parsed.data, list) else "a single value"
        return None, problems + [Problem(
            file=file, line=source.line_of(()), message=f"top level is {kind}, not a mapping",
            fix="a scenario file is one mapping with id, category, persona, setup, turns")
        ], parsed.data
    problems += unknown_key_problems(Scenario, parsed.data, source)
    scenario, invalid = validate_model(Scenario, parsed.data, source)
    problems += invalid
    if scenario is None:
        return None, problems, parsed.data
    scenario._source = source
    # GAIA declares a scenario's fixtures in a comment and in prose, not in a key.
    scenario.fixtures = outermost([*scenario.fixtures,
                                   *declared_folders(parsed.header, scenario.setup.notes)])
    problems += scenario_rules(scenario, source)
    return scenario, problems, parsed.data


# --- across files ------------------------------------------------------------------------

def _without_duplicate_ids(scenarios: list[Scenario]
                           ) -> tuple[list[Scenario], list[tuple[Scenario, Problem]]]:
    """Keep the first scenario of each id (files in sorted order); report every repeat."""
    first: dict[str, Scenario] = {}
    kept: list[Scenario] = []
    problems: list[tuple[Scenario, Problem]] = []
    for scenario in scenarios:
        original = first.get(scenario.id)
        if original is None:
            first[scenario.id] = scenario
            kept.append(scenario)
            continue
        source = scenario._source
        assert source is not None
        problems.append((scenario, problem_at(
            source, ("id",),
            f"id '{scenario.id}' is already used by "
            f"{original.source_file}:{original.line_of('id')}; this file is not loaded",
            "give each scenario a unique id")))
    return kept, problems
