"""Hostile copies of trialbox's own files, by generation (issue 34, item 7).

Hand-written cases (tests/unit/test_own_files.py) cover the kinds of damage we thought of; here
hypothesis mutates a real run folder's scorecard.json, a trace and run.json — a value anywhere
replaced by NaN, infinity, a huge or negative number, a boolean, null, a wrong type, a key
removed, or the file cut short — and runs `compare` and `rescore` on the copy through the real
typer app. Whatever the mutation: the exit code is one of the README's (0, 1, 2, 3), no exception
escapes the command, the damaged inputs are left byte for byte as they were, and nothing is
written outside the results folder. Seeded (derandomize) and bounded so it fits CI.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_rescore_cli import RIGHT, WRONG, conversation, fixture_scenarios, saved_run
from typer.testing import CliRunner

from runner.cli.app import app

EXIT_CODES = {0, 1, 2, 3}
HOSTILE_VALUES = st.sampled_from([
    float("nan"), float("inf"), float("-inf"), -1, -1e308, 1e308, 10**30, 12, 2.5, True, False,
    None, "", "x" * 10_000, [], {}, {"schema_version": 999}, 999, "PASS", "../../etc/passwd",
])


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real finished run folder (two scenarios), copied for every example."""
    scenarios = fixture_scenarios()
    return saved_run(tmp_path_factory.mktemp("pristine"), {
        "orchard_apples": conversation(scenarios["orchard_apples"], RIGHT),
        "lighthouse_fuel": conversation(scenarios["lighthouse_fuel"], WRONG)})


def paths_in(data: Any, here: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every location in a JSON document (the document itself excluded)."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield here + (key,)
            yield from paths_in(value, here + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield here + (index,)
            yield from paths_in(value, here + (index,))


@st.composite
def damaged(draw: st.DrawFn, text: str) -> str:
    """`text` (a JSON document) with one hostile change."""
    if draw(st.integers(0, 9)) == 0:  # cut short, as a killed writer or a full disk leaves it
        return text[:draw(st.integers(0, max(0, len(text) - 1)))]
    data = json.loads(text)
    where = draw(st.sampled_from(sorted(paths_in(data), key=repr)))
    parent = data
    for key in where[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and draw(st.booleans()) and draw(st.booleans()):
        del parent[where[-1]]
    else:
        parent[where[-1]] = draw(HOSTILE_VALUES)
    return json.dumps(data, allow_nan=True)


def _snapshot(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and not p.is_symlink()}


def check(command: list[str], work: Path, damaged_file: Path) -> None:
    before = _snapshot(work)
    result = CliRunner().invoke(app, command, catch_exceptions=True)
    assert result.exit_code in EXIT_CODES, result.output
    if result.exception is not None:
        assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output, result.output
    after = _snapshot(work)
    for path, content in before.items():
        if path.parent.parent == work or path.parent.parent.parent == work:  # the run's inputs
            assert after.get(path) == content, f"{path} changed"
    results = damaged_file.parents[1] if damaged_file.parent.name == "traces" else damaged_file.parent
    assert all(p.is_relative_to(results.parent) for p in after), "written outside results"


PROPERTY = settings(max_examples=20, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


def _copy(pristine: Path, into: Path) -> Path:
    run = into / "results" / pristine.name
    shutil.copytree(pristine, run, symlinks=True)
    return run


@PROPERTY
@given(data=st.data())
def test_compare_survives_any_damaged_scorecard(pristine: Path, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as folder:
        run = _copy(pristine, Path(folder))
        card = run / "scorecard.json"
        card.write_text(data.draw(damaged(card.read_text())))
        check(["compare", str(run), str(pristine)], Path(folder), card)
        check(["compare", str(pristine), str(card)], Path(folder), card)


@PROPERTY
@given(data=st.data())
def test_rescore_survives_any_damaged_trace(pristine: Path, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as folder:
        run = _copy(pristine, Path(folder))
        trace = sorted((run / "traces").glob("*.json"))[data.draw(st.integers(0, 1))]
        trace.write_text(data.draw(damaged(trace.read_text())))
        check(["rescore", str(run), "--judge-provider", "none"], Path(folder), trace)


@PROPERTY
@given(data=st.data())
def test_rescore_survives_any_damaged_run_json(pristine: Path, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as folder:
        run = _copy(pristine, Path(folder))
        settings_file = run / "run.json"
        settings_file.write_text(data.draw(damaged(settings_file.read_text())))
        check(["rescore", str(run), "--judge-provider", "none"], Path(folder), settings_file)
