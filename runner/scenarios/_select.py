"""Choosing which scenarios to run, refusing unknown names before anything runs.

A typo in `--scenario budget_lookup_basci` must not quietly run nothing (or everything): it is
an error that names the closest real ids. Unknown names are checked in the caller's order
(ids, categories, tags, excluded tags) so the same bad input always gives the same message.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Iterable, Sequence

from runner.scenarios._load import RejectedFile, Suite
from runner.scenarios._models import Scenario
from runner.scenarios._problems import Problem


class SelectionError(ValueError):
    """A selection named something that does not exist, or selected nothing."""


def select(scenarios: Sequence[Scenario], ids: Iterable[str] | None = None,
           categories: Iterable[str] | None = None, tags: Iterable[str] | None = None,
           exclude_tags: Iterable[str] | None = None) -> list[Scenario]:
    """The scenarios matching every filter given, in suite order.

    ids: exact ids or shell patterns (`rag_*`); categories: any of them; tags: scenarios with
    at least one of them; exclude_tags: scenarios with none of them. None = no filter.
    """
    ids, categories = _listed(ids), _listed(categories)
    tags, exclude_tags = _listed(tags), _listed(exclude_tags)
    known_ids = [scenario.id for scenario in scenarios]
    known_categories = sorted({scenario.category for scenario in scenarios})
    known_tags = sorted({tag for scenario in scenarios for tag in scenario.tags})
    unknown = [
        *_unknown("scenario id", ids, known_ids),
        *_unknown("category", categories, known_categories),
        *_unknown("tag", tags, known_tags),
        *_unknown("excluded tag", exclude_tags, known_tags),
    ]
    if unknown:
        raise SelectionError("\n".join(unknown))
    chosen = [s for s in scenarios if _matches(s, ids, categories, tags, exclude_tags)]
    if not chosen and any(f is not None for f in (ids, categories, tags, exclude_tags)):
        raise SelectionError("no scenario matches all the filters given together "
                             f"(ids={ids}, categories={categories}, tags={tags}, "
                             f"exclude_tags={exclude_tags}); loosen one of them")
    return chosen


def _listed(values: Iterable[str] | None) -> list[str] | None:
    return None if values is None else [value for value in values if value] or None


def _unknown(kind: str, asked: list[str] | None, known: list[str]) -> list[str]:
    messages = []
    for name in asked or []:
        if any(fnmatch.fnmatchcase(item, name) for item in known):
            continue
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = ("did you mean " + ", ".join(f"'{c}'" for c in close) + "?") if close else (
            f"known: {', '.join(known[:10])}{' …' if len(known) > 10 else ''}" if known
            else "the suite has none")
        messages.append(f"unknown {kind} '{name}' — {hint}")
    return messages


def _matches(scenario: Scenario, ids: list[str] | None, categories: list[str] | None,
             tags: list[str] | None, exclude_tags: list[str] | None) -> bool:
    if ids is not None and not any(fnmatch.fnmatchcase(scenario.id, i) for i in ids):
        return False
    if categories is not None and scenario.category not in categories:
        return False
    if tags is not None and not set(tags) & set(scenario.tags):
        return False
    return not (exclude_tags is not None and set(exclude_tags) & set(scenario.tags))


def rejected_in_selection(suite: Suite, ids: Iterable[str] | None = None,
                          categories: Iterable[str] | None = None,
                          tags: Iterable[str] | None = None,
                          exclude_tags: Iterable[str] | None = None) -> list[Problem]:
    """The errors of rejected files that the selection could include, in file order.

    A broken file outside the selection must not stop a run (it is reported, not fatal);
    one the user asked for must. Its id and category are best guesses (the id written or
    the file stem; the category written or the folder); tags that could not be read
    count as matching, so doubt stops the run rather than silently dropping a scenario.
    """
    ids, categories = _listed(ids), _listed(categories)
    tags, exclude_tags = _listed(tags), _listed(exclude_tags)
    return [problem for rejected in suite.rejected
            if _may_match(rejected, ids, categories, tags, exclude_tags)
            for problem in rejected.problems]


def _may_match(rejected: RejectedFile, ids: list[str] | None, categories: list[str] | None,
               tags: list[str] | None, exclude_tags: list[str] | None) -> bool:
    if ids is not None and not any(fnmatch.fnmatchcase(name, pattern)
                                   for name in rejected.names for pattern in ids):
        return False
    if categories is not None and rejected.category not in categories:
        return False
    if rejected.tags is None:
        return True
    if tags is not None and not set(tags) & set(rejected.tags):
        return False
    return not (exclude_tags is not None and set(exclude_tags) & set(rejected.tags))
