"""Turning raw file data into models, and every way it can be wrong into a Problem.

Three layers, each giving `file:line: field: what — fix`:
1. unknown keys (warnings, with the closest known key suggested),
2. pydantic validation (types, required keys, enums, check vocabulary),
3. rules within one scenario that a type cannot express (snake_case ids, turn numbering,
   ground truth or success criteria per turn, where each check type may be declared).
Rules that need other files (duplicate ids, the manifest, the corpus) live in `_load.py`.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from runner.scenarios._checks import (
    CHECK_MODELS,
    CHECK_TYPES,
    ArgumentMatcher,
    ToolStep,
)
from runner.scenarios._models import KNOWN_PERSONAS, Scenario
from runner.scenarios._problems import Level, Problem, field_path
from runner.scenarios._source import KeyPath, SourceMap

M = TypeVar("M", bound=BaseModel)

# Lower-case words of letters/digits joined by single '_' (a leading digit is fine: GAIA ids
# such as 2025_budget_lookup). Used with fullmatch: `$` would let "id\n" through.
SNAKE_CASE = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")
MAX_ID_LENGTH = 64
"""An id becomes file names (traces/<id>.json), container and network names (Docker allows
63-128 characters, plus our prefixes) and JUnit test names; 64 keeps all of them valid."""

SCENARIO_FIXES = {
    "id": "give a snake_case id, unique across the tree, e.g. `id: budget_lookup_basic`",
    "category": "name the category; it should match the folder under scenarios/",
    "persona": "name the simulated user's persona, e.g. `persona: casual_user`",
    "turns": "give a list of turns: `- turn: 1`, `objective: ...`",
    "turn": "number the turns 1, 2, 3 … in order",
    "objective": "say what the simulated user wants in this turn: `objective: ...`",
    "severity": "use one of critical, high, medium, low, standard",
    "timeout": "give whole seconds above 0, or remove it to use GAIA's default",
    "path": "give the document's path relative to the corpus root, e.g. documents/x.md",
    "index_documents": "give a list of `{corpus_doc: ..., path: ...}` entries, or [] for none",
    "setup": "give `setup: {index_documents: [...]}`",
    "tags": "give a list of words, e.g. `tags: [rag, numbers]`",
    "claims": "give a list of strings or `{name: ..., claim: ...}` entries",
    "checks": "give a list of `{type: ..., ...}` entries",
    "expected_answer": "give the answer as text or a number, or null when the document "
                       "does not say",
    "success_criteria": "describe the pass condition in plain English (one string)",
    "ground_truth": "give `{doc_id, fact_id, expected_answer}` or use success_criteria",
    "max": "give a whole number of calls, 0 or more",
    "tolerance": "give a relative tolerance such as 0.01 (1%)",
    "matches": "give a valid Python regular expression",
    "tools": "give a list of tool names (or `{tool, arguments}` entries)",
}
SCENARIO_FORMAT = "see the scenario format in design/architecture.md"

MANIFEST_FIXES = {
    "id": "give every document and every fact an id, unique within its list",
    "documents": "give a list of `{id, filename, format, domain, facts: [...]}` objects",
    "adversarial_documents": "give a list of document objects, like `documents`",
    "facts": "give a list of `{id, question, answer}` objects",
    "filename": "give the document's file name inside the corpus folder",
    "real_world": "write true or false",
    "generated": "write true or false",
    "answer": "give the answer as text or a number, or null when the document does not say",
}
MANIFEST_FORMAT = "see the manifest format in design/architecture.md"


def close_match(word: str, choices: typing.Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(word: str, choices: typing.Iterable[str]) -> str:
    match = close_match(word, choices)
    return f" (did you mean '{match}'?)" if match else ""


# --- 1. unknown keys ---------------------------------------------------------------------

def unknown_key_problems(model: type[BaseModel], data: Any, source: SourceMap,
                         path: KeyPath = ()) -> list[Problem]:
    """Warn about keys the model does not declare, recursing into nested (lenient) models."""
    if not isinstance(data, dict) or model.model_config.get("extra") == "forbid":
        return []  # strict models (checks) report unknown keys as errors themselves
    problems = []
    fields = model.model_fields
    keeps = "extra_keys" in fields
    known = [name for name in fields if name != "extra_keys"]
    for key, value in data.items():
        key_path = path + (str(key),)
        if key not in fields or key == "extra_keys":
            hint = did_you_mean(str(key), known)
            problems.append(Problem(
                file=source.file, line=source.line_of(key_path), field=field_path(key_path),
                message=f"unknown key '{key}'{hint} "
                        + ("is kept as written and given to the judge" if keeps
                           else "is ignored"),
                fix=("rename it if it is a misspelling" if hint else
                     "nothing to do if it is meant for the judge" if keeps else
                     "remove it, or rename it to a known key"),
                level=Level.WARNING))
            continue
        nested, is_list = _nested_model(fields[key].annotation)
        if nested is None:
            continue
        items = enumerate(value) if is_list and isinstance(value, list) else [(None, value)]
        for index, item in items:
            item_path = key_path if index is None else key_path + (index,)
            problems += unknown_key_problems(nested, item, source, item_path)
    return problems


def _nested_model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model type inside `X`, `X | None` or `list[X]`, and whether it was a list."""
    origin = typing.get_origin(annotation)
    if origin is list:
        inner, _ = _nested_model(typing.get_args(annotation)[0])
        return inner, True
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            inner, is_list = _nested_model(arg)
            if inner is not None:
                return inner, is_list
        return None, False
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None, False


# --- 2. pydantic validation --------------------------------------------------------------

def validate_model(model: type[M], data: Any, source: SourceMap,
                   fixes: dict[str, str] | None = None,
                   default_fix: str = SCENARIO_FORMAT) -> tuple[M | None, list[Problem]]:
    """The model, or the problems pydantic found, one per field, each with its line.

    `fixes` maps a field name to the advice given when that field is wrong.
    """
    try:
        return model.model_validate(data), []
    except ValidationError as err:
        hints = SCENARIO_FIXES if fixes is None else fixes
        return None, _problems_from(err, data, source, hints, default_fix)


def _problems_from(err: ValidationError, data: Any, source: SourceMap,
                   fixes: dict[str, str], default_fix: str) -> list[Problem]:
    grouped: dict[KeyPath, list[Any]] = {}
    for error in err.errors(include_url=False):
        grouped.setdefault(_data_path(error["loc"], data), []).append(error)
    problems = []
    for path, errors in grouped.items():
        message, fix = _describe(path, errors, fixes, default_fix)
        problems.append(Problem(file=source.file, line=source.line_of(path),
                                field=field_path(path), message=message, fix=fix))
    return problems


def _data_path(loc: tuple[Any, ...], data: Any) -> KeyPath:
    """Pydantic's error location as a path into the file's data.

    Pydantic inserts union branch names into locations ("tool_called", "str", "list[str]");
    they are not keys of the file, so they are dropped. A missing key stays as the last part.
    """
    path: list[str | int] = []
    current = data
    for position, part in enumerate(loc):
        if (isinstance(current, dict) and part in current) or (
                isinstance(current, list) and isinstance(part, int) and part < len(current)):
            path.append(part)
            current = current[part]
        elif isinstance(current, dict) and current.get("type") == part:
            continue  # the discriminated-union branch of a check
        elif position == len(loc) - 1 and isinstance(current, dict):
            path.append(part)  # a missing (or forbidden) key
        else:
            continue  # a union branch name such as "str" or "list[str]"
    return tuple(path)


def _describe(path: KeyPath, errors: list[Any], fixes: dict[str, str],
              default_fix: str) -> tuple[str, str]:
    first = errors[0]
    kind = first["type"]
    leaf = next((str(p) for p in reversed(path) if isinstance(p, str)), "")
    fix = fixes.get(leaf, default_fix)
    if kind == "union_tag_invalid":
        tag = str(first["input"].get("type"))
        return (f"unknown check type '{tag}'{did_you_mean(tag, CHECK_TYPES)}",
                "use one of: " + ", ".join(CHECK_TYPES))
    if kind == "union_tag_not_found":
        return "check has no 'type'", "add `type:` with one of: " + ", ".join(CHECK_TYPES)
    if kind == "missing":
        return f"required key '{leaf}' is missing", fix
    if kind == "extra_forbidden":
        allowed = _allowed_keys(first["loc"])
        return (f"unknown key '{leaf}' in a check{did_you_mean(leaf, allowed)}",
                "valid keys here: " + ", ".join(allowed) if allowed else fix)
    if kind == "value_error":
        return first["msg"].removeprefix("Value error, "), fix
    messages = list(dict.fromkeys(_plain(error) for error in errors))
    if all(message.startswith("Input should be ") for message in messages):
        wanted = " or ".join(m.removeprefix("Input should be ") for m in messages)
        return f"got {_short(first['input'])}; it should be {wanted}", fix
    return f"{'; '.join(messages)} (got {_short(first['input'])})", fix


def _plain(error: Any) -> str:
    """Pydantic's message, minus internals a scenario author cannot act on."""
    if error["type"] in ("model_type", "model_attributes_type", "dict_type"):
        return "Input should be a mapping (key: value lines)"
    return str(error["msg"])


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys a strict check model accepts at this location (for the suggestion)."""
    names = [part for part in loc if isinstance(part, str)]
    check = next((name for name in reversed(names) if name in CHECK_MODELS), None)
    if check is None:
        return []
    model = CHECK_MODELS[check]
    if "arguments" in names[names.index(check):]:
        return list(ArgumentMatcher.model_fields)
    if "tools" in model.model_fields and names[-2:-1] == ["tools"]:  # a step of a trajectory
        return list(ToolStep.model_fields)
    return list(model.model_fields)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --- 3. rules within one scenario --------------------------------------------------------

def scenario_rules(scenario: Scenario, source: SourceMap) -> list[Problem]:
    return [
        *_id_rule(scenario, source),
        *_turn_numbering_rule(scenario, source),
        *_turn_has_truth_rule(scenario, source),
        *_check_placement_rule(scenario, source),
        *_claim_names_rule(scenario, source),
        *_persona_rule(scenario, source),
        *_category_folder_rule(scenario, source),
    ]


def problem_at(source: SourceMap, path: KeyPath, message: str, fix: str,
             level: Level = Level.ERROR) -> Problem:
    return Problem(file=source.file, line=source.line_of(path), field=field_path(path),
                   message=message, fix=fix, level=level)


def _id_rule(scenario: Scenario, source: SourceMap) -> list[Problem]:
    suggestion = (re.sub(r"[^a-z0-9]+", "_", scenario.id.lower()).strip("_")
                  or "my_scenario")[:MAX_ID_LENGTH].rstrip("_")
    if len(scenario.id) > MAX_ID_LENGTH:
        return [problem_at(source, ("id",),
                         f"id is {len(scenario.id)} characters; at most {MAX_ID_LENGTH} are "
                         "allowed because it becomes file, container and network names",
                         f"shorten it, e.g. `id: {suggestion}`")]
    if SNAKE_CASE.fullmatch(scenario.id):
        return []
    return [problem_at(source, ("id",), f"id {scenario.id!r} is not snake_case",
                     f"use lower-case words joined by '_', e.g. `id: {suggestion}`")]


def _turn_numbering_rule(scenario: Scenario, source: SourceMap) -> list[Problem]:
    numbers = [turn.turn for turn in scenario.turns]
    for index, number in enumerate(numbers):
        if number != index + 1:
            return [problem_at(
                source, ("turns", index, "turn"),
                f"turn numbered {number} where {index + 1} was expected (turns are {numbers})",
                f"number the turns 1..{len(numbers)} in the order they are written")]
    return []


def _turn_has_truth_rule(scenario: Scenario, source: SourceMap) -> list[Problem]:
    problems = []
    for index, turn in enumerate(scenario.turns):
        has_truth = turn.ground_truth is not None and bool(turn.ground_truth.model_fields_set)
        has_criteria = bool(turn.success_criteria and turn.success_criteria.strip())
        if not (has_truth or has_criteria):
            problems.append(problem_at(
                source, ("turns", index),
                "turn has neither ground_truth nor success_criteria, so it cannot be judged",
                "add `ground_truth: {doc_id, fact_id, expected_answer}` "
                "or `success_criteria: ...`"))
    return problems


def _check_placement_rule(scenario: Scenario, source: SourceMap) -> list[Problem]:
    problems = []
    for index, turn in enumerate(scenario.turns):
        for position, check in enumerate(turn.checks):
            if check.placement == "scenario":
                problems.append(problem_at(
                    source, ("turns", index, "checks", position, "type"),
                    f"'{check.type}' is a scenario-level check, not a turn check",
                    "move it to the top-level `checks:` list"))
    for position, check in enumerate(scenario.checks):
        if check.placement == "turn":
            problems.append(problem_at(
                source, ("checks", position, "type"),
                f"'{check.type}' checks one turn's answer and cannot be scenario-level",
                "move it into the `checks:` of the turn whose answer it checks"))
    return problems


def _claim_names_rule(scenario: Scenario, source: SourceMap) -> list[Problem]:
    problems = []
    for index, turn in enumerate(scenario.turns):
        seen: set[str] = set()
        for position, claim in enumerate(turn.claims):
            if claim.name in seen:
                problems.append(problem_at(
                    source, ("turns", index, "claims", position),
                    f"claim name '{claim.name}' is used twice in this turn",
                    "give each claim a unique `name:`"))
            seen.add(claim.name)
    return problems


def _persona_rule(scenario: Scenario, source: SourceMap) -> list[Problem]:
    if scenario.persona in KNOWN_PERSONAS:
        return []
    return [problem_at(
        source, ("persona",),
        f"persona '{scenario.persona}' is not one of GAIA's documented personas"
        f"{did_you_mean(scenario.persona, KNOWN_PERSONAS)}; the simulator will use it as written",
        "use a known persona (" + ", ".join(sorted(KNOWN_PERSONAS)) + ") unless this is intended",
        Level.WARNING)]


def _category_folder_rule(scenario: Scenario, source: SourceMap) -> list[Problem]:
    folder = category_folder(source.file)
    if folder is None or folder == scenario.category:
        return []
    return [problem_at(
        source, ("category",),
        f"category '{scenario.category}' does not match its folder scenarios/{folder}/",
        f"set `category: {folder}` or move the file to scenarios/{scenario.category}/",
        Level.WARNING)]


def category_folder(file: Path) -> str | None:
    """The folder right under the nearest `scenarios/` ancestor, when there is one."""
    parts = file.parts[:-1]
    for index in range(len(parts) - 1, -1, -1):
        if parts[index] == "scenarios":
            return parts[index + 1] if index + 1 < len(parts) else None
    return None
