"""One owner per run folder: a live owner's lock refuses a second run or resume (exit 2, one
line); a dead owner's lock is taken over. The owner is a real second process holding flock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.run.errors import UsageError
from runner.run.lock import is_owned, lock_path, owning
from runner.run.settings import RunSettings, new_run_id

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "fixtures" / "engine_suite"
HOLDER = ("import sys, time\nfrom pathlib import Path\nfrom runner.run.lock import owning\n"
          "with owning(Path(sys.argv[1])):\n    print('held', flush=True)\n    time.sleep(600)\n")


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    settings = RunSettings(run_id=new_run_id(), suite_paths=[SUITE / "scenarios"],
                           corpus_root=SUITE / "corpus", results_root=tmp_path / "results",
                           backend="local")
    settings.save(settings.run_dir)
    return settings.run_dir


@pytest.fixture
def live_owner(run_dir: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process that owns the run folder, as a live `trialbox run` does."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    yield holder
    holder.kill()
    holder.wait()


def test_a_live_owner_refuses_a_second_owner_in_one_line(run_dir: Path, live_owner: subprocess.Popen[str]) -> None:
    assert is_owned(run_dir)
    with pytest.raises(UsageError) as refused:
        with owning(run_dir):
            pass
    message = str(refused.value)
    assert "\n" not in message and "in use by a live run" in message
    assert f"pid {live_owner.pid}" in message  # says who holds it


def test_a_dead_owners_lock_is_taken_over(run_dir: Path, live_owner: subprocess.Popen[str]) -> None:
    os.kill(live_owner.pid, signal.SIGKILL)
    live_owner.wait()
    assert lock_path(run_dir).is_file(), "the dead owner's file stays (else this probes nothing)"
    assert not is_owned(run_dir)
    with owning(run_dir):
        assert is_owned(run_dir)  # a probe from another open file sees our own hold
        assert f"pid {os.getpid()}" in lock_path(run_dir).read_text()
    assert not is_owned(run_dir)


def test_nothing_holds_a_fresh_folder(tmp_path: Path) -> None:
    assert not is_owned(tmp_path / "never-run")


def test_resume_of_a_live_run_exits_2_with_one_line_and_touches_nothing(
    run_dir: Path, live_owner: subprocess.Popen[str]
) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in run_dir.iterdir()}
    started = time.monotonic()
    result = CliRunner().invoke(app, ["run", "--resume", str(run_dir)],
                                env={"ANTHROPIC_API_KEY": "", "COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "in use by a live run" in lines[0], result.output
    assert "Traceback" not in result.output
    assert time.monotonic() - started < 20, "the refusal must come before any set-up"
    assert {p.name: p.stat().st_mtime_ns for p in run_dir.iterdir()} == before
    assert live_owner.poll() is None, "the live run was disturbed"


def test_clean_of_a_live_run_is_refused_in_one_line(run_dir: Path, live_owner: subprocess.Popen[str]) -> None:
    result = CliRunner().invoke(app, ["clean", "--run-id", run_dir.name, "--results", str(run_dir.parent)],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and f"run {run_dir.name} is alive" in lines[0], result.output
    assert live_owner.poll() is None
