"""The corpus quality gate: every fact in the manifest is proved against its document.

- A fact with an answer: the answer is written in the document (compared as a reader would:
  case, whitespace, dashes, markdown emphasis ignored), or every number and word of the answer
  is (for "$1,610,000" against a cell holding 1610000), or — for answers computed from a table
  — recomputing it from the document gives the same answer (see ``_derived``).
- A fact whose answer is null (the document does not say): it lists ``absent_terms`` and none
  of them occurs in the document. This is what makes "the agent must say it does not know"
  a fair expectation.

Documents that are not on disk (real-world texts not fetched, generated ones not built) are
reported as not verified, which the caller decides about.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from runner.corpus._content import (
    DocumentContent,
    contains_term,
    normalise,
    numbers_in,
    read_content,
)
from runner.corpus._derived import DERIVED
from runner.scenarios import CorpusDocument, Fact, Manifest

_WORD = re.compile(r"[^\W\d_]{3,}")


@dataclass
class FactReport:
    verified: int = 0
    problems: list[str] = field(default_factory=list)  # "<doc>/<fact>: what is wrong"
    not_on_disk: list[str] = field(default_factory=list)  # document ids

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_facts(manifest: Manifest, corpus_root: Path) -> FactReport:
    report = FactReport()
    for entry in manifest.all_documents:
        path = Path(corpus_root) / entry.filename
        if not path.is_file():
            report.not_on_disk.append(entry.id)
            continue
        content = read_content(path, entry.format)
        for fact in entry.facts:
            problem = fact_problem(entry, fact, path, content)
            if problem:
                report.problems.append(f"{entry.id}/{fact.id}: {problem}")
            else:
                report.verified += 1
    return report


def fact_problem(entry: CorpusDocument, fact: Fact, path: Path,
                 content: DocumentContent) -> str | None:
    """Why the document does not support the fact as written, or None when it does."""
    if fact.answer is None:
        return _absent_problem(fact, content)
    if isinstance(fact.answer, list):
        return "an answer list cannot be verified; write one answer string"
    answer = fact.answer if isinstance(fact.answer, str) else str(fact.answer)
    derive = DERIVED.get((entry.id, fact.id))
    if derive is not None:
        try:
            computed = derive(path)
        except (KeyError, ValueError, IndexError, TypeError) as error:
            return f"cannot recompute the answer from the document: {error!r}"
        if normalise(computed) != normalise(answer):
            return f"recomputed from the document: {computed!r}, manifest says {answer!r}"
        return None
    if not content.readable:
        return "the document cannot be read, so it cannot hold an answer"
    if normalise(answer) in content.searchable:
        return None
    return _pieces_problem(answer, content)


def _absent_problem(fact: Fact, content: DocumentContent) -> str | None:
    if not fact.absent_terms:
        return ("answer is null but no absent_terms are listed; list words that would have "
                "to appear if the document answered the question")
    present = [term for term in fact.absent_terms if contains_term(content, term)]
    if present:
        return f"answer is null but the document contains {present}"
    return None


def _pieces_problem(answer: str, content: DocumentContent) -> str | None:
    numbers = numbers_in(answer)
    words = _WORD.findall(answer)
    if not numbers:
        return f"{answer!r} is not in the document"
    known = content.numbers
    missing_numbers = [n for n in numbers
                       if not any(math.isclose(n, k, rel_tol=1e-9) for k in known)]
    missing_words = [w for w in words if not contains_term(content, w)]
    if missing_numbers or missing_words:
        return (f"{answer!r} is not in the document (missing numbers {missing_numbers}, "
                f"words {missing_words})")
    return None
