"""Our own suite passes GAIA 0.25.1's own scenario validator (`gaia.eval.runner.
validate_scenario`), run from the amd-gaia venv in a subprocess, so a GAIA user can copy our
scenarios into their tree; and our GAIA-shaped fixture is rejected by it only where GAIA
0.25.1 itself rejects its older repository's files (`agent_type`, DESIGN 2.8)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
GAIA_PYTHON = REPO / ".venv-gaia" / "bin" / "python"
FIXTURE = REPO / "tests" / "fixtures" / "gaia_repo" / "eval" / "scenarios"

# Reads every *.yaml under each argument the way GAIA's discovery does (yaml.safe_load),
# runs GAIA's validator on it and prints {tree: {checked, failures: {file: [errors]}}}.
VALIDATE = """
import json, sys, yaml
from pathlib import Path
from gaia.eval.runner import validate_scenario
report = {}
for tree in sys.argv[1:]:
    failures = {}
    files = sorted(Path(tree).rglob("*.yaml"))
    for path in files:
        try:
            validate_scenario(path, yaml.safe_load(path.read_text(encoding="utf-8")))
        except ValueError as error:
            failures[path.name] = str(error).splitlines()[1:]
    report[tree] = {"checked": len(files), "failures": failures}
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def verdicts() -> dict[str, Any]:
    """One GAIA interpreter for both trees (importing gaia.eval costs seconds)."""
    assert GAIA_PYTHON.exists(), f"{GAIA_PYTHON} missing: run scripts/setup-gaia-venv"
    trees = [str(REPO / "eval" / "scenarios"), str(FIXTURE)]
    done = subprocess.run([str(GAIA_PYTHON), "-c", VALIDATE, *trees], capture_output=True,
                          text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def _gaia_validate(verdicts: dict[str, Any], tree: Path) -> tuple[int, dict[str, list[str]]]:
    return verdicts[str(tree)]["checked"], verdicts[str(tree)]["failures"]


def test_our_suite_passes_gaia_0_25_1_validator(verdicts: dict[str, Any]) -> None:
    checked, failures = _gaia_validate(verdicts, REPO / "eval" / "scenarios")
    assert checked == len(list((REPO / "eval" / "scenarios").rglob("*.yaml"))) >= 50
    assert failures == {}


def test_gaia_rejects_the_fixture_only_for_agent_type(verdicts: dict[str, Any]) -> None:
    """The fixture is a 0.23-era GAIA tree: 0.25.1 refuses `agent_type`, trialbox loads it."""
    checked, failures = _gaia_validate(verdicts, FIXTURE)
    assert checked == 8
    assert sorted(failures) == ["empty_minutes_decision.yaml", "ferry_last_departure.yaml",
                                "harbour_march_catch.yaml", "library_followup.yaml"]
    for errors in failures.values():
        assert len(errors) == 1 and "'agent_type' is not honoured" in errors[0]
