"""Hostile scenario trees (DESIGN issue 10.5): every attack is refused quickly, as one
Problem naming the file (and line when there is one) with a fix, and the good files beside
it still load. Nothing hangs, nothing raises, nothing eats memory."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runner.scenarios import (
    MAX_ALIASES,
    MAX_DEPTH,
    MAX_ID_LENGTH,
    MAX_JSON_BYTES,
    MAX_YAML_BYTES,
    Problem,
    Suite,
    load_manifest,
    load_suite,
)

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "gaia_repo" / "eval" / "corpus"
GOOD = ("id: good\ncategory: rag_quality\npersona: casual_user\nturns:\n"
        "  - {turn: 1, objective: Ask., success_criteria: Answers.}\n")

BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{chr(98 + n)}: &{chr(98 + n)} [{', '.join([f'*{chr(97 + n)}'] * 9)}]\n" for n in range(8))


def _load(tmp_path: Path, files: dict[str, str], seconds: float = 5.0) -> Suite:
    """Load a tree holding `files` plus one good scenario, in a thread that must finish."""
    scenarios = tmp_path / "scenarios" / "rag_quality"
    scenarios.mkdir(parents=True, exist_ok=True)
    (scenarios / "good.yaml").write_text(GOOD)
    for name, text in files.items():
        (scenarios / name).write_text(text)
    return _finishes(lambda: load_suite([tmp_path / "scenarios"], CORPUS), seconds)


def _finishes(work: Callable[[], Suite], seconds: float) -> Suite:
    done: list[Suite] = []
    worker = threading.Thread(target=lambda: done.append(work()), daemon=True)
    started = time.perf_counter()
    worker.start()
    worker.join(seconds)
    assert done, f"loading did not finish within {seconds} s"
    assert time.perf_counter() - started < seconds
    return done[0]


def _only_problem(suite: Suite, name: str) -> Problem:
    assert [s.id for s in suite.scenarios] == ["good"], "the good file still loads"
    (problem,) = [p for p in suite.problems if p.file.name == name]
    assert problem.is_error and problem.fix
    return problem


def test_billion_laughs_is_refused_in_milliseconds(tmp_path: Path) -> None:
    assert len(BOMB.encode()) < 1024
    started = time.perf_counter()
    suite = _load(tmp_path, {"bomb.yaml": BOMB})
    assert time.perf_counter() - started < 0.5
    problem = _only_problem(suite, "bomb.yaml")
    assert problem.line == 2  # the first alias
    assert problem.message == (
        "YAML aliases expand to more than 10,000 extra values (an alias bomb?)")
    assert problem.fix == "write the values out instead of nesting aliases"


def test_too_many_aliases(tmp_path: Path) -> None:
    text = GOOD.replace("id: good", "id: many") + "x: &v 1\ny: [" + ", ".join(
        ["*v"] * (MAX_ALIASES + 1)) + "]\n"
    problem = _only_problem(_load(tmp_path, {"many.yaml": text}), "many.yaml")
    assert problem.message == f"more than {MAX_ALIASES} YAML aliases (*name) in one file"
    assert problem.line == 7


def test_a_few_aliases_are_fine(tmp_path: Path) -> None:
    text = ("id: aliased\ncategory: rag_quality\npersona: casual_user\nturns:\n"
            "  - {turn: 1, objective: &ask Ask., success_criteria: &ok Answers.}\n"
            "  - {turn: 2, objective: *ask, success_criteria: *ok}\n")
    suite = _load(tmp_path, {"aliased.yaml": text})
    assert suite.ok and [s.id for s in suite.scenarios] == ["aliased", "good"]


def test_self_referencing_alias(tmp_path: Path) -> None:
    text = GOOD.replace("id: good", "id: loop") + "loop: &me\n  - *me\n"
    problem = _only_problem(_load(tmp_path, {"loop.yaml": text}), "loop.yaml")
    assert "an alias refers to the list or mapping that contains it" in problem.message
    assert "written at line 6" in problem.message and problem.line == 7


def test_aliases_that_nest_too_deep_once_expanded(tmp_path: Path) -> None:
    chain = "l0: &l0 [x]\n" + "".join(f"l{n}: &l{n} [[[[[[[[[[*l{n - 1}]]]]]]]]]]\n"
                                      for n in range(1, 9))
    problem = _only_problem(_load(tmp_path, {"chain.yaml": chain}), "chain.yaml")
    assert problem.message == f"nesting (with aliases expanded) is deeper than {MAX_DEPTH} levels"


@pytest.mark.parametrize(("name", "text", "line"), [
    ("flow.yaml", "id: x\nturns: " + "[" * 2000 + "]" * 2000 + "\n", 2),
    ("block.yaml", "id: x\nturns:\n" + "".join(" " * n + "-\n" for n in range(300)), 66),
    ("compact.yaml", "- " * 2000 + "x\n", 1),
    ("huge_flow.yaml", "id: x\nturns: " + "[" * 120_000 + "]" * 120_000 + "\n", 2),
])
def test_deep_nesting_is_refused_without_recursion_error(tmp_path: Path, name: str, text: str,
                                                         line: int) -> None:
    problem = _only_problem(_load(tmp_path, {name: text}, seconds=3), name)
    assert (problem.line, problem.message) == (line, f"nesting is deeper than {MAX_DEPTH} levels")


def test_symlink_to_dev_zero_is_refused_without_reading(tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios" / "rag_quality"
    scenarios.mkdir(parents=True)
    os.symlink("/dev/zero", scenarios / "zero.yaml")
    problem = _only_problem(_load(tmp_path, {}), "zero.yaml")
    assert problem.message == ("is a character device (through a symlink), not a regular file; "
                               "refused without reading it")
    assert problem.line is None


def test_fifo_named_yaml_is_refused_without_hanging(tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios" / "rag_quality"
    scenarios.mkdir(parents=True)
    os.mkfifo(scenarios / "pipe.yaml")
    problem = _only_problem(_load(tmp_path, {}), "pipe.yaml")
    assert problem.message.startswith("is a FIFO (named pipe), not a regular file")
    # Given directly on the command line, too.
    direct = _finishes(lambda: load_suite([scenarios / "pipe.yaml"], CORPUS), 5)
    assert [p.message for p in direct.errors] == [problem.message]


def test_size_cap_boundary(tmp_path: Path) -> None:
    padding = MAX_YAML_BYTES - len(GOOD.replace("good", "edge").encode()) - 2
    at_cap = GOOD.replace("good", "edge") + "#" + "x" * padding + "\n"
    assert len(at_cap.encode()) == MAX_YAML_BYTES
    suite = _load(tmp_path, {"edge.yaml": at_cap, "over.yaml": at_cap + "\n"})
    assert "edge" in [s.id for s in suite.scenarios]
    (problem,) = [p for p in suite.problems if p.file.name == "over.yaml"]
    assert problem.message == ("file is 262,145 bytes; files over 256 KiB (262,144 bytes) "
                               "are refused")


@pytest.mark.parametrize(("name", "text", "words"), [
    ("date.yaml", GOOD.replace("id: good", "id: d") + "when: 2025-02-30\n",
     "a value cannot be read: day is out of range for month"),
    ("bigint.yaml", GOOD.replace("id: good", "id: n") + "n: " + "9" * 5000 + "\n",
     "a value cannot be read: Exceeds the limit (4300 digits)"),
])
def test_values_that_cannot_be_built_are_one_problem(tmp_path: Path, name: str, text: str,
                                                     words: str) -> None:
    problem = _only_problem(_load(tmp_path, {name: text}), name)
    assert problem.message.startswith(words) and problem.fix == "quote the value to keep it as text"


@pytest.mark.parametrize(("written", "why"), [
    ('"flour_stock\\n"', "is not snake_case"),
    ('"flour stock"', "is not snake_case"),
    ("flour__stock", "is not snake_case"),
    ("_flour", "is not snake_case"),
    ("a" * (MAX_ID_LENGTH + 1), (f"at most {MAX_ID_LENGTH} are allowed because it becomes "
                                 "file, container and network names")),
])
def test_ids_are_matched_whole_and_limited_in_length(tmp_path: Path, written: str,
                                                     why: str) -> None:
    text = GOOD.replace("id: good", f"id: {written}")
    problem = _only_problem(_load(tmp_path, {"bad_id.yaml": text}), "bad_id.yaml")
    assert (problem.line, problem.field) == (1, "id") and why in problem.message


@pytest.mark.parametrize("written", ["a" * MAX_ID_LENGTH, "2025_budget_lookup", "q1"])
def test_ids_that_are_fine(tmp_path: Path, written: str) -> None:
    suite = _load(tmp_path, {"fine.yaml": GOOD.replace("id: good", f"id: {written}")})
    assert suite.ok and written in [s.id for s in suite.scenarios]


def test_hostile_files_are_rejected_with_best_guesses(tmp_path: Path) -> None:
    suite = _load(tmp_path, {"bomb.yaml": BOMB})
    (rejected,) = suite.rejected
    assert (rejected.id, rejected.category, rejected.tags) == ("bomb", "rag_quality", None)


# --- manifests get the same limits ---------------------------------------------------------

def _manifest(tmp_path: Path, text: str) -> list[Problem]:
    (tmp_path / "manifest.json").write_text(text)
    manifest, problems = load_manifest(tmp_path)
    assert manifest is None
    return problems


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_deep_manifest_json(tmp_path: Path, depth: int) -> None:
    (problem,) = _manifest(tmp_path, "[" * depth + "]" * depth)
    assert problem.message == f"nesting is deeper than {MAX_DEPTH} levels" and problem.fix


def test_oversized_manifest(tmp_path: Path) -> None:
    text = json.dumps({"documents": [], "pad": "x" * MAX_JSON_BYTES})
    (problem,) = _manifest(tmp_path, text)
    assert "files over 1 MiB (1,048,576 bytes) are refused" in problem.message


def test_manifest_that_is_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "manifest.json")
    _, problems = _finishes_manifest(tmp_path)
    (problem,) = problems
    assert problem.message.startswith("is a FIFO (named pipe)")


def _finishes_manifest(corpus: Path) -> tuple[object, list[Problem]]:
    done: list[tuple[object, list[Problem]]] = []
    worker = threading.Thread(target=lambda: done.append(load_manifest(corpus)), daemon=True)
    worker.start()
    worker.join(5)
    assert done, "loading the manifest did not finish"
    return done[0]


def test_manifest_huge_integer(tmp_path: Path) -> None:
    (problem,) = _manifest(tmp_path, '{"documents": [], "n": ' + "9" * 5000 + "}")
    assert problem.message.startswith("a value cannot be read")


def test_python_object_tags_are_refused_not_executed(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = GOOD.replace("id: good", "id: tag") + (
        f"x: !!python/object/apply:os.system ['touch {marker}']\n")
    problem = _only_problem(_load(tmp_path, {"tag.yaml": text}), "tag.yaml")
    assert problem.line == 6 and "could not determine a constructor" in problem.message
    assert not marker.exists()
