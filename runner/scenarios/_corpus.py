"""Finding the corpus the way GAIA lays a repository out, when the user did not name it.

GAIA keeps scenarios in `eval/scenarios/<category>/*.yaml` and documents in `eval/corpus/`,
so from any scenario path the corpus is `../corpus` of the `scenarios` folder, or the
`eval/corpus` of the repository the path is in. Paths are made absolute first, so the answer
does not depend on the working directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

SCENARIOS_FOLDER = "scenarios"
CORPUS_FOLDER = "corpus"
REPOSITORY_CORPUS = Path("eval") / "corpus"


class CorpusNotFound(Exception):
    """No corpus folder next to, or above, the scenario paths given."""


def corpus_candidates(paths: Sequence[Path]) -> list[Path]:
    """Every place the corpus may be, in the order they are tried, each once."""
    candidates: list[Path] = []
    for given in paths:
        path = Path(given).expanduser().absolute()
        start = path if path.is_dir() else path.parent
        for folder in (start, *start.parents):
            if folder.name == SCENARIOS_FOLDER:
                candidates.append(folder.parent / CORPUS_FOLDER)
                break
        candidates.append(path.parent / CORPUS_FOLDER)
        for folder in (start, *start.parents):
            candidates.append(folder / REPOSITORY_CORPUS)
            if (folder / REPOSITORY_CORPUS).is_dir() or (folder / ".git").exists():
                break  # the repository's own eval/corpus, or the repository's top
    return list(dict.fromkeys(candidates))


def find_corpus(paths: Sequence[Path]) -> Path:
    """The first candidate folder that exists; CorpusNotFound lists them all and the fix."""
    candidates = corpus_candidates(paths)
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    if not candidates:
        raise CorpusNotFound("no scenario path was given to look for the corpus from; "
                             "give the corpus with --corpus DIR")
    looked = "\n".join(f"  {candidate}" for candidate in candidates)
    raise CorpusNotFound(
        "no corpus folder found for the scenarios given; looked in:\n" + looked
        + "\ngive the folder that holds the documents and manifest.json with --corpus DIR")
