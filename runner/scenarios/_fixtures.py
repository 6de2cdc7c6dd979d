"""Which fixture folders a scenario needs staged in the sandbox's home, and how.

GAIA's newer tree declares them in two places:

- a comment opening the file: ``# FIXTURE-SYNC: tests/fixtures/gaia/<folder>/ — what it holds``
  (a file may be named instead of a folder: its folder is staged);
- ``setup.notes``: ``"odd_names/ staged at ~/gaia-eval/tiers_files_shell/odd_names/."``

GAIA's own harness (``tests/fixtures/gaia/stage_eval_env.py`` on GAIA's main branch) reads
neither, nor the turns: once, before any scenario runs, it copies a fixed list of the fixture
tree's folders (earlier versions: the whole tree) to ``~/gaia-eval/``, whatever the scenarios
name, leaving out the files that hold or make an answer (``NOT_AGENT_FACING``). trialbox instead
stages only the folders a scenario declares (each at ``~/gaia-eval/<folder>/``), a fresh copy per
sandbox, with the same files left out. So a scenario that names ``~/gaia-eval/<folder>/`` only in
its turns' messages (no ``FIXTURE-SYNC`` comment, no ``setup.notes``) gets nothing staged, where
GAIA's harness may have the folder in place: it declares its folders with trialbox's
``fixtures:`` key.

A folder is staged read-only unless the scenario asks the agent to change files (its words name
writing, editing, copying, ...): a read-only copy is how a "leave the original alone" scenario
cannot be passed by accident, and a writable one is still fresh, since each sandbox's home is
new.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

FIXTURE_SYNC = re.compile(r"FIXTURE-SYNC:\s*tests/fixtures/gaia/(?P<path>[^\s,;)—]+)")
"""GAIA's header comment: the path after ``tests/fixtures/gaia/``."""

STAGED_AT = re.compile(r"~/gaia-eval/(?P<path>[^\s,;)'\"`]+)")
"""A path under the staging folder, as ``setup.notes`` and the turns write it."""

STAGING_DIR = PurePosixPath("gaia-eval")
"""Where GAIA's harness puts its fixtures, relative to the agent's home."""

FIXTURE_TREE = PurePosixPath("tests/fixtures/gaia")
"""Where a GAIA checkout keeps its fixtures, relative to the repository root."""

# From GAIA's tests/fixtures/gaia/stage_eval_env.py on its main branch (amd/gaia), whose
# ``_NOT_AGENT_FACING = shutil.ignore_patterns(...)`` keeps these out of ~/gaia-eval: the folder
# is the agent's file scope, so it holds nothing the scorer knows. The one list trialbox stages
# by (fixture_stagings, runner/sandbox/_fixtures.py's fixture_archive); change it with GAIA's.
NOT_AGENT_FACING: tuple[str, ...] = ("_gen_*", "ground_truth.json", "__pycache__")
"""Names (shell globs, matched against each file's and folder's own name, case-sensitively)
never staged: ground truth, the generators that plant it, Python's byte-code caches."""

_WRITES = re.compile(
    r"\b(write|writes|written|edit|edits|edited|edit_file|write_file|copy|copies|create|creates|"
    r"save|saves|delete|deletes|remove|removes|rename|renames|move|moves|append|appends|"
    r"modify|modifies|overwrit\w*|mkdir|touch)\b", re.IGNORECASE)
"""Words that say the agent changes files: such a scenario's fixtures are staged writable."""


def _folder(path: str) -> str | None:
    """A declared path as the folder to stage: trailing punctuation and slashes dropped, a file
    (a name with a suffix and no trailing slash) replaced by its folder. None: nothing left, or
    a path that climbs out of the tree."""
    text = path.rstrip(".:!?")
    is_folder = text.endswith("/")
    pure = PurePosixPath(text.rstrip("/"))
    if not pure.parts or pure.is_absolute() or ".." in pure.parts:
        return None
    if not is_folder and pure.suffix:
        pure = pure.parent
    return None if str(pure) in ("", ".") else str(pure)


def declared_folders(header: Iterable[str], notes: str | None) -> list[str]:
    """The fixture folders a file's header comments and ``setup.notes`` name, in order, each once."""
    found: list[str] = []
    for line in header:
        found += [m.group("path") for m in FIXTURE_SYNC.finditer(line)]
    found += [m.group("path") for m in STAGED_AT.finditer(notes or "")]
    folders = [folder for folder in (_folder(path) for path in found) if folder]
    return outermost(folders)


def outermost(folders: Iterable[str]) -> list[str]:
    """Each folder once, and none inside another one listed (its parent's copy holds it)."""
    unique = list(dict.fromkeys(folders))
    return [f for f in unique
            if not any(other != f and PurePosixPath(f).is_relative_to(other) for other in unique)]


def agent_facing(name: str, excluded: Iterable[str] = NOT_AGENT_FACING) -> bool:
    """A file or folder called ``name`` may be staged (no ``excluded`` pattern matches; by
    default GAIA's ``NOT_AGENT_FACING``)."""
    return not any(fnmatch.fnmatchcase(name, pattern) for pattern in excluded)


def left_out_of(source: Path) -> list[Path]:
    """What staging ``source`` leaves out: the outermost files and folders under it whose names
    ``NOT_AGENT_FACING`` matches, sorted."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(source):
        found += [Path(folder, name) for name in [*dirs, *files] if not agent_facing(name)]
        dirs[:] = [name for name in dirs if agent_facing(name)]
    return sorted(found)


def writes_files(scenario: Any) -> bool:
    """The scenario's own words ask the agent to change files (see ``_WRITES``)."""
    texts = [scenario.description or "", scenario.setup.notes or "", scenario.expected_outcome or ""]
    for turn in scenario.turns:
        texts += [turn.objective, turn.user_message or "", turn.success_criteria or "",
                  turn.expected_behavior or "", " ".join(turn.expected_tools or [])]
        if turn.ground_truth is not None:
            texts.append(turn.ground_truth.expected_behavior or "")
    return any(_WRITES.search(text) for text in texts)


@dataclass(frozen=True)
class FixtureStaging:
    """One folder to stage: from ``source`` on this machine to ``~/<inside>`` in the sandbox."""

    folder: str  # as the scenario names it, relative to the fixture tree
    source: Path
    inside: PurePosixPath  # relative to the sandbox user's home
    read_only: bool
    excluded: tuple[str, ...] = NOT_AGENT_FACING  # names never copied (shell globs)


def fixture_stagings(scenario: Any, fixtures_root: Path | None
                     ) -> tuple[list[FixtureStaging], list[str]]:
    """What to stage for ``scenario`` from ``fixtures_root``, and the fixture paths that are
    missing (the scenario is then SKIPPED_NO_DOCUMENT, naming them). A folder whose own path
    has a ``NOT_AGENT_FACING`` name is never staged: it is listed as missing, saying why."""
    folders: list[str] = list(scenario.fixtures)
    if not folders:
        return [], []
    if fixtures_root is None:
        return [], [f"{FIXTURE_TREE}/{folder}/ (no fixture folder: pass --fixtures DIR)"
                     for folder in folders]
    read_only = not writes_files(scenario)
    stagings, missing = [], []
    for folder in folders:
        source = fixtures_root / folder
        pure = PurePosixPath(folder)
        if not all(agent_facing(part) for part in pure.parts):
            missing.append(f"{source} (holds answers: GAIA never stages it)")
        elif not pure.parts:  # "." or "": every scenario's folders, and ~/gaia-eval replaced
            missing.append(f"{source} (the whole fixture tree: name the folders to stage)")
        elif pure.is_absolute() or ".." in pure.parts or not _inside(source, fixtures_root):
            # A `fixtures:` key is free text, and a folder may be a link: what is staged is
            # only ever the fixture tree's own (runner/sandbox/_fixtures.py packs nothing else).
            missing.append(f"{source} (outside the fixture tree: never staged)")
        elif source.is_dir():
            stagings.append(FixtureStaging(folder=folder, source=source,
                                           inside=STAGING_DIR / folder, read_only=read_only))
        else:
            missing.append(str(source))
    return stagings, missing


def _inside(path: Path, root: Path) -> bool:
    """``path``, its links resolved, is ``root`` or lies under it."""
    return path.resolve().is_relative_to(root.resolve())


def default_fixtures_root(suite_paths: Iterable[Path]) -> Path | None:
    """The fixture tree beside a GAIA checkout's scenarios: for a tree under
    ``<repo>/eval/scenarios``, ``<repo>/tests/fixtures/gaia`` when it is a folder."""
    for path in suite_paths:
        for parent in (path.resolve(), *path.resolve().parents):
            candidate = parent / FIXTURE_TREE
            if candidate.is_dir():
                return candidate
    return None
