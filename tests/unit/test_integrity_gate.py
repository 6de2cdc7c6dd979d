"""--integrity, GAIA main's integrity gate on our rows: nothing missing and everything measured
passes; a missing baseline scenario or a row without a measurement fails (exit 1) by name; a
--not-measured ID=REASON excuses its rows, always shown with the reason."""

from __future__ import annotations

import pytest
from test_rescore_cli import RIGHT, conversation, finished, fixture_scenarios, rescore, saved_run
from typer.testing import CliRunner

from runner.cli.app import app
from runner.records.status import Status
from runner.report import ScenarioResult
from runner.run.errors import EXIT_OK, EXIT_QUALITY, EXIT_USAGE, UsageError
from runner.run.gate import integrity_lines
from runner.run.prepare import selected_scenarios
from runner.run.settings import RunSettings, new_run_id
from runner.verdict import NO_MEASUREMENT, integrity


def row(scenario_id: str, status: Status, category: str = "rag_quality") -> ScenarioResult:
    return ScenarioResult(id=scenario_id, status=status, category=category)


BASELINE = [row("a", Status.PASS), row("b", Status.FAIL), row("c", Status.PASS, "vision")]


def test_a_run_that_measured_every_baseline_scenario_is_complete_even_with_failures():
    measured = integrity([row("a", Status.PASS), row("b", Status.FAIL), row("c", Status.FAIL, "vision")],
                         baseline=BASELINE, not_measured={})
    assert measured.complete and measured.missing == [] and measured.unmeasured == []
    assert integrity_lines(measured) == [
        "integrity: OK — 3 row(s) run, every one measured (3 scenario(s) in the baseline)"]


@pytest.mark.parametrize("status", sorted(NO_MEASUREMENT, key=lambda s: s.value))
def test_every_status_without_a_measurement_fails_the_gate(status: Status):
    measured = integrity([row("a", Status.PASS), row("b", status)], baseline=None, not_measured={})
    assert not measured.complete and measured.unmeasured == [f"b ({status.value})"]
    assert "no --baseline, so coverage was not checked" in integrity_lines(measured)[0]


def test_a_missing_baseline_scenario_and_an_unmeasured_row_are_named():
    measured = integrity([row("a", Status.PASS), row("b", Status.TIMEOUT)], baseline=BASELINE,
                         not_measured={})
    assert measured.missing == ["c"] and measured.unmeasured == ["b (TIMEOUT)"]
    lines = integrity_lines(measured)
    assert lines[0].startswith("integrity: INCOMPLETE — 1 baseline scenario(s) missing, 1 row(s) "
                               "without a measurement (3 scenario(s) in the baseline)")
    assert "  missing from the run: c" in lines and "  no measurement: b (TIMEOUT)" in lines


def test_not_measured_excuses_by_id_or_category_with_its_reason_and_names_an_unused_one():
    measured = integrity(
        [row("a", Status.PASS), row("b", Status.SKIPPED_NO_MODEL)], baseline=BASELINE,
        not_measured={"vision": "no display on this runner", "b": "no embedder (#3016)",
                      "a": "flaky GPU"})
    assert measured.complete
    assert measured.excused == ["c (missing): no display on this runner",
                                "b (SKIPPED_NO_MODEL): no embedder (#3016)"]
    assert measured.unused == ["a"]
    lines = integrity_lines(measured)
    assert "  NOT MEASURED (excused): c (missing): no display on this runner" in lines
    assert "  --not-measured a: measured after all, nothing to excuse" in lines


def saved(tmp_path, **settings):
    scenarios = fixture_scenarios()
    return saved_run(tmp_path, {"orchard_apples": conversation(scenarios["orchard_apples"], RIGHT),
                                "lighthouse_fuel": None}, integrity=True, **settings)


def test_rescore_holds_a_run_saved_with_integrity_to_it(tmp_path):
    code, output = finished(rescore(saved(tmp_path / "plain"), "--judge-provider", "none"))
    assert code == EXIT_QUALITY, output
    assert "integrity: INCOMPLETE — 0 baseline scenario(s) missing, 1 row(s) without" in output
    assert "  no measurement: lighthouse_fuel (INFRA_ERROR)" in output

    excused = saved(tmp_path / "excused", not_measured={"lighthouse_fuel": "no GPU on this runner"})
    code, output = finished(rescore(excused, "--judge-provider", "none"))
    assert code == EXIT_OK, output
    assert "NOT MEASURED (excused): lighthouse_fuel (INFRA_ERROR): no GPU on this runner" in output


@pytest.mark.parametrize(("args", "says"), [
    (["--not-measured", "vision=no display"], "add --integrity"),
    (["--integrity", "--not-measured", "vision"], "give ID=REASON"),
    (["--integrity", "--not-measured", "=why"], "give ID=REASON"),
])
def test_a_not_measured_without_integrity_or_reason_is_a_usage_error(args, says):
    result = CliRunner().invoke(app, ["run", *args])
    assert result.exit_code == EXIT_USAGE and says in result.output, result.output


def test_a_misspelt_not_measured_name_stops_the_run_before_it_starts(tmp_path):
    from test_rescore_cli import SUITE

    settings = RunSettings(run_id=new_run_id(), suite_paths=[SUITE / "scenarios"],
                           corpus_root=SUITE / "corpus", results_root=tmp_path, integrity=True,
                           not_measured={"orchard_aples": "typo"})
    with pytest.raises(UsageError, match="--not-measured orchard_aples: no scenario id or "
                                         "category of the suite or the baseline"):
        selected_scenarios(settings)
    settings.not_measured = {"orchard_apples": "known"}
    assert selected_scenarios(settings)[0]
