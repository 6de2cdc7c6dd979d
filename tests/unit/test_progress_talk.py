"""No silent minutes in the shell phases of `make bench`: a command run as a talking phase
(runner.run.progress.run_talking, scripts/talk) passes its output through and, in a log, says its
status after every 10 s without a line. The command is a real child process that stays silent
until the test lets it go; the seconds are an injected clock, so nothing here waits on time."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from pathlib import Path

from runner.run.progress import LOG_EVERY_S, Progress, run_talking
from runner.stack.images import repo_root


class Clock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


class Log(io.StringIO):
    """A log that remembers, for each line, the injected clock's time when it was written."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock
        self.stamps: list[float] = []
        self.seen = threading.Condition()

    def write(self, text: str) -> int:
        with self.seen:
            self.stamps.extend(self.clock.now for _ in range(text.count("\n")))
            written = super().write(text)
            self.seen.notify_all()
        return written

    def wait_for(self, text: str) -> None:
        with self.seen:
            assert self.seen.wait_for(lambda: text in self.getvalue(), timeout=30), self.getvalue()


# A long step that prints one line, then stays silent until its standard input closes.
SILENT_STEP = [sys.executable, "-c",
               "import sys; print('first line', flush=True); sys.stdin.read(); print('last line')"]


def talk_through(clock: Clock, silent_s: int) -> tuple[Log, int]:
    log = Log(clock)
    progress = Progress("installing the venv (pip)", None, stream=log, live=False, clock=clock,
                        log_every_s=LOG_EVERY_S)
    progress.start(progress.label)
    read, write = os.pipe()
    code: list[int] = []
    worker = threading.Thread(target=lambda: code.append(run_talking(SILENT_STEP, progress,
                                                                     stdin=read)))
    worker.start()
    log.wait_for("first line")
    os.close(read)  # the child holds its own copy
    for _ in range(silent_s * 2):  # the ticker's half-second looks, on the injected clock
        clock.now += 0.5
        progress.heartbeat()
    os.close(write)
    worker.join(timeout=30)
    progress.close()
    return log, code[0]


def test_planted_a_silent_minute_gets_a_status_line_at_least_every_ten_seconds() -> None:
    clock = Clock()
    log, code = talk_through(clock, silent_s=65)
    lines = log.getvalue().splitlines()
    assert code == 0
    assert lines[0] == "installing the venv (pip) ..."
    assert lines[1] == "first line"
    beats = [line for line in lines if line.startswith("installing the venv (pip): ")
             and "elapsed" in line and "done" not in line]
    assert beats[0] == "installing the venv (pip): 0:10 elapsed"
    assert len(beats) == 6  # 10, 20, … 60 s of a 65 s silence
    assert lines[-2] == "last line"
    assert lines[-1] == "installing the venv (pip): done  [1:05 elapsed]"
    gaps = [later - earlier for earlier, later in zip(log.stamps, log.stamps[1:], strict=False)]
    assert max(gaps) <= LOG_EVERY_S


def test_null_a_quick_command_gets_no_status_line() -> None:
    clock = Clock()
    log, code = talk_through(clock, silent_s=9)
    assert code == 0
    assert "elapsed" not in "".join(log.getvalue().splitlines()[:-1])


def test_a_failing_command_says_so_and_passes_its_exit_code_on() -> None:
    log = io.StringIO()
    progress = Progress("fetching the models", None, stream=log, live=False, log_every_s=10)
    code = run_talking([sys.executable, "-c", "import sys; print('no network', file=sys.stderr); "
                        "sys.exit(3)"], progress)
    progress.close()
    assert code == 3
    assert log.getvalue().splitlines()[0] == "no network"  # its stderr passes through too
    assert log.getvalue().splitlines()[-1].startswith("fetching the models: failed (exit 3)")


def test_a_command_that_cannot_start_is_one_line_and_exit_127() -> None:
    log = io.StringIO()
    progress = Progress("creating .venv", None, stream=log, live=False)
    assert run_talking(["/nonexistent/python3"], progress) == 127
    progress.close()
    assert "could not start /nonexistent/python3" in log.getvalue()


def test_scripts_talk_runs_with_the_hosts_python_outside_any_venv(tmp_path: Path) -> None:
    # The shell phases run before the venv exists: the wrapper must need nothing but python3's
    # standard library (a plain interpreter with -S finds no site-packages).
    done = subprocess.run(
        [str(repo_root() / "scripts" / "talk"), "a phase", "sh", "-c",
         'echo "out, PYTHONPATH=[${PYTHONPATH:-}]"; exit 4'],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={"PATH": os.environ["PATH"], "PYTHONNOUSERSITE": "1"},
    )
    assert done.returncode == 4
    # The command's environment is the caller's: the checkout on its PYTHONPATH made a pip
    # take the checkout's trialbox.egg-info for an installed trialbox.
    assert done.stdout.splitlines()[:2] == ["a phase ...", "out, PYTHONPATH=[]"]
    assert done.stdout.splitlines()[-1].startswith("a phase: failed (exit 4)")
    stdlib_only = subprocess.run(
        [sys.executable, "-S", "-c", "import runner.run.progress"], cwd=repo_root(),
        capture_output=True, text=True, timeout=60,
    )
    assert stdlib_only.returncode == 0, stdlib_only.stderr
