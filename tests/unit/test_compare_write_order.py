"""`compare --html` writes its report before it prints the verdict (issue 34): a write that
failed after "no regression (exit 0)" had been printed gave two answers, the last one exit 3."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_own_files import a_run
from typer.testing import CliRunner

import runner.report
from runner.cli.app import app
from runner.run.errors import EXIT_INFRA, EXIT_OK
from runner.system.writes import WriteRefused


def compare(work: Path, *extra: str) -> tuple[int, str]:
    run = a_run(work)
    result = CliRunner().invoke(app, ["compare", str(run), str(run), *extra],
                                env={"COLUMNS": "300"})
    return result.exit_code, result.output


def test_a_report_that_cannot_be_written_is_the_only_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def disk_full(path: Path, text: str) -> None:
        raise WriteRefused(f"{path}: cannot write: the disk is full; free space and run again",
                           infrastructure=True)

    monkeypatch.setattr(runner.report, "atomic_write", disk_full)
    code, output = compare(tmp_path, "--html", str(tmp_path / "report.html"))
    assert code == EXIT_INFRA, output
    assert "no regression" not in output and "exit 0" not in output, output
    assert [line for line in output.splitlines() if line.strip()] == [
        f"error: {tmp_path / 'report.html'}: cannot write: the disk is full; free space and run "
        "again"], output


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_a_report_written_comes_with_the_verdict(tmp_path: Path, extra: list[str]) -> None:
    code, output = compare(tmp_path, "--html", str(tmp_path / "report.html"), *extra)
    assert code == EXIT_OK, output
    assert (tmp_path / "report.html").stat().st_size > 0
    if not extra:
        assert "no regression" in output and output.rstrip().endswith(
            f"driver-build report: {tmp_path / 'report.html'}"), output


def test_a_row_without_its_score_on_one_side_exits_2_naming_row_and_side(tmp_path: Path) -> None:
    # Issue 34: baseline PASS 9.0 against current PASS with a null score read "unchanged", exit 0.
    import json

    from runner.run.errors import EXIT_USAGE

    run = a_run(tmp_path / "base")
    card = json.loads((run / "scorecard.json").read_text())
    row = card["scenarios"][0]
    row.update(status="PASS", score=9.0)
    (run / "scorecard.json").write_text(json.dumps(card))
    other = a_run(tmp_path / "current")
    card = json.loads((other / "scorecard.json").read_text())
    twin = next(r for r in card["scenarios"] if r["id"] == row["id"])
    twin.update(status="PASS", score=None)
    (other / "scorecard.json").write_text(json.dumps(card))
    result = CliRunner().invoke(app, ["compare", str(run), str(other)], env={"COLUMNS": "300"})
    assert result.exit_code == EXIT_USAGE, result.output
    assert "unchanged" not in result.output and "Traceback" not in result.output
    assert f"{row['id']}: current row is PASS with no score, baseline has 9.00" in result.output
