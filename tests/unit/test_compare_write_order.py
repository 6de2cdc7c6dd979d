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
