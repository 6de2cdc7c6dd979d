"""Hostile copies of trialbox's own files, by generation (issue 34, item 7).

Hand-written cases (tests/unit/test_own_files.py) cover the kinds of damage we thought of; here
hypothesis mutates a real run folder's scorecard.json, a trace and run.json — a value anywhere
replaced by NaN, infinity, a huge or negative number, a boolean, null, a wrong type, a key
removed, or the file cut short — and runs `compare` and `rescore` on the copy through the real
typer app; likewise `export inspect` on a damaged scorecard, run.json or trace, and `compare` on
a damaged GAIA scorecard or meta.json (tests/fixtures/gaia_scorecards) or on a GAIA row drawn
from our committed schema (where nothing may read "unchanged" with a score on one side only). Whatever the mutation: the exit code is one of the README's (0, 1, 2, 3), no exception
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


def _invoked(command: list[str], work: Path) -> tuple[Any, dict[Path, bytes], dict[Path, bytes]]:
    """Run `command` in-process: the README's exit codes only and no traceback, with the files
    under `work` before and after."""
    before = _snapshot(work)
    result = CliRunner().invoke(app, command, catch_exceptions=True)
    assert result.exit_code in EXIT_CODES, result.output
    if result.exception is not None:
        assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output, result.output
    return result, before, _snapshot(work)


def check(command: list[str], work: Path, damaged_file: Path) -> None:
    _, before, after = _invoked(command, work)
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


# --- export inspect, GAIA scorecards (issue 34, item 3) -------------------------------------
# `selftest --json` is not here: it reads scenario trees and the corpus, not trialbox's own files
# (those are covered by the scenario loader's own tests).

GAIA = Path(__file__).resolve().parents[1] / "fixtures" / "gaia_scorecards"
SCHEMAS = Path(__file__).resolve().parents[2] / "runner" / "report" / "schemas"


def outcome(command: list[str], work: Path, *, writes_to: Path | None = None) -> str:
    """Run `command`; the README's exit codes only, no traceback, every file under `work`
    unchanged, and nothing new outside `writes_to` (nothing new at all without one)."""
    result, before, after = _invoked(command, work)
    for path, content in before.items():
        assert after.get(path) == content, f"{path} changed"
    new = [p for p in after if p not in before]
    assert all(writes_to is not None and p.is_relative_to(writes_to) for p in new), new
    return result.output


def _run_file(run: Path, data: st.DataObject) -> Path:
    """One of the files `export inspect` reads: scorecard.json, run.json or a trace."""
    files = [run / "scorecard.json", run / "run.json", *sorted((run / "traces").glob("*.json"))]
    return data.draw(st.sampled_from(files))


EXPORT = settings(PROPERTY, max_examples=12)


@EXPORT
@given(data=st.data())
def test_export_inspect_survives_any_damaged_run_file(pristine: Path, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as folder:
        run = _copy(pristine, Path(folder))
        damaged_file = _run_file(run, data)
        damaged_file.write_text(data.draw(damaged(damaged_file.read_text())))
        out = Path(folder) / "out"
        outcome(["export", "inspect", str(run), "--out", str(out)], Path(folder), writes_to=out)


def _gaia_copy(into: Path) -> Path:
    copy = into / "gaia"
    shutil.copytree(GAIA, copy, symlinks=True)
    return copy


GAIA_FILES = ["baseline/baseline.json", "baseline/meta.json",
              "run_eval-20261120-140200/scorecard.json"]


@PROPERTY
@given(data=st.data())
def test_compare_survives_any_damaged_gaia_scorecard(pristine: Path, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as folder:
        gaia = _gaia_copy(Path(folder))
        name = data.draw(st.sampled_from(GAIA_FILES))
        hurt = gaia / name
        hurt.write_text(data.draw(damaged(hurt.read_text())))
        other = gaia / ("run_eval-20261120-140200" if name.startswith("baseline") else "baseline")
        outcome(["compare", str(other), str(hurt.parent)], Path(folder))
        outcome(["compare", str(hurt.parent), str(other)], Path(folder))
        outcome(["compare", str(hurt.parent), str(pristine)], Path(folder))


# Rows valid by our committed schema (runner/report/schemas/gaia_scorecard.schema.json), drawn
# from the schema itself. hypothesis-jsonschema 0.23.1 (the newest) installs but fails on every
# object schema with this hypothesis (6.170: "'many' object has no attribute 'more'"), so this
# reads the subset pydantic writes: $ref, anyOf, type, properties, required, items.
STATUS_WORDS = ["PASS", "FAIL", "BLOCKED_BY_ARCHITECTURE", "TIMEOUT", "ERRORED", "INFRA_ERROR",
                "SKIPPED_NO_DOCUMENT", "NOT_RUN", "BUDGET_EXCEEDED", "pass", ""]
JSON_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                        st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))


def from_schema(node: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    if "$ref" in node:
        return from_schema(defs[node["$ref"].rsplit("/", 1)[-1]], defs, depth)
    if "anyOf" in node:
        return st.one_of([from_schema(option, defs, depth) for option in node["anyOf"]])
    kind = node.get("type")
    if kind == "object":
        properties = node.get("properties", {})
        required = set(node.get("required", []))
        if not properties:
            return st.dictionaries(st.text(max_size=8), JSON_LEAVES, max_size=3)
        return st.fixed_dictionaries(
            {k: from_schema(v, defs, depth + 1) for k, v in properties.items() if k in required},
            optional={k: from_schema(v, defs, depth + 1)
                      for k, v in properties.items() if k not in required})
    if kind == "array":
        items = node.get("items", {})
        return st.lists(from_schema(items, defs, depth + 1), max_size=0 if depth > 2 else 3)
    if kind == "string":
        return st.one_of(st.sampled_from(STATUS_WORDS), st.text(max_size=20))
    if kind == "number":
        return st.one_of(st.floats(-1e6, 1e6), st.sampled_from([0.0, 9.0, 10.0, -1.0, 11.0]))
    if kind == "integer":
        return st.integers(-5, 10**6)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return JSON_LEAVES  # no type: any JSON value


GAIA_SCHEMA = json.loads((SCHEMAS / "gaia_scorecard.schema.json").read_text())
GAIA_ROW = from_schema(GAIA_SCHEMA["$defs"]["GaiaScenario"], GAIA_SCHEMA["$defs"])


@PROPERTY
@given(data=st.data())
def test_compare_survives_any_schema_valid_gaia_row(pristine: Path, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as folder:
        gaia = _gaia_copy(Path(folder))
        card = gaia / "run_eval-20261120-140200" / "scorecard.json"
        document = json.loads(card.read_text())
        index = data.draw(st.integers(0, len(document["scenarios"]) - 1))
        row = data.draw(GAIA_ROW)
        # Mostly keyed like a baseline row (so it is compared, not listed) and with its verdict,
        # so that only the row's numbers differ.
        if data.draw(st.integers(0, 3)) != 0:
            row["scenario_id"] = document["scenarios"][index]["scenario_id"]
            if data.draw(st.integers(0, 3)) != 0:
                row["status"] = document["scenarios"][index]["status"]
        document["scenarios"][index] = row
        card.write_text(json.dumps(document))
        outcome(["compare", str(gaia / "baseline"), str(card.parent)], Path(folder))
        text = outcome(["compare", str(card.parent), str(gaia / "baseline"), "--json"],
                       Path(folder))
        if text.lstrip().startswith("{"):  # a verdict: nothing "unchanged" against no number
            for entry in json.loads(text)["unchanged"]:
                scored = (entry["baseline_score"] is None, entry["current_score"] is None)
                assert scored in {(True, True), (False, False)}, entry


def test_the_generated_suites_start_from_inputs_that_work(pristine: Path, tmp_path: Path) -> None:
    """Not vacuous: undamaged, the same commands succeed (export writes its log, compare of
    GAIA's baseline and run gives a verdict)."""
    run = _copy(pristine, tmp_path)
    out = tmp_path / "out"
    assert "wrote" in outcome(["export", "inspect", str(run), "--out", str(out)], tmp_path,
                              writes_to=out)
    assert list(out.glob("*.eval"))
    gaia = _gaia_copy(tmp_path)
    text = outcome(["compare", str(gaia / "baseline"), str(gaia / "run_eval-20261120-140200")],
                   tmp_path)
    assert "result:" in text, text
