"""Progress of a run or a long phase that reads well on a terminal and in a log.

On a terminal one live line at the bottom shows what is in flight, done/total, the time elapsed
and an ETA, redrawn in place (and every `tick_s` while nothing finishes, so a ten-minute
scenario does not look hung); finished steps and messages print above it as ordinary lines.

When the stream is not a terminal (CI, `| tee`, a file) nothing is redrawn: every finished step
is one plain line with its counter, elapsed time and ETA appended, and nothing is ever wrapped,
so `grep` and a CI log viewer see one line per step. With `log_every_s`, a log also gets the
status line whenever nothing was written for that long, so a three-minute image build is not
three silent minutes. The appended part comes after the caller's
text so lines keep starting with what the caller wrote (e.g. the engine's status column).

    with Progress("run", total=len(jobs)) as progress:     # the engine
        progress.advance(f"{status:<24} {key}  ({wall:.1f} s)")
        progress.say("3 identical infrastructure errors: stopping")

    with phase("starting the LLM server", expected_s=30) as step:   # one long wait
        url = up_llm(device)
        step.advance(f"LLM server healthy at {url}")

The shell phases of `make bench` (host packages, the engine, the venvs' pip installs, the
models) run their commands through `python3 -m runner.run.progress LABEL -- COMMAND...`
(scripts/talk): the command's output passes through and its silences get the status line.
This module uses the standard library only, so the host's python3 runs it before any venv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import IO

from runner.system.clock import clock_text

CLEAR_LINE = "\r\x1b[K"  # carriage return + erase to the end of the line


def is_terminal(stream: IO[str]) -> bool:
    """True when `stream` is an interactive terminal that can redraw a line in place."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM", "") != "dumb"


class Progress:
    """Done/total, elapsed and ETA for `total` steps (None: one long step, elapsed only).

    The ETA is the pace since the first step finished times the steps left: the first step
    carries the run's one-off start (a cold model, the first sandbox) and one long first
    scenario must not be extrapolated over the whole suite (a 13-minute run once read "ETA
    1:04:14"). Measured between completions, the pace already accounts for concurrent steps,
    and steps that finish together in a burst do not make it look faster than it is. Until a
    second step has finished there is no ETA, unless `expected_s` (the usual duration of the
    whole thing) says what to expect. Safe to call from the ticker thread and one caller thread (a lock guards
    every write).
    """

    def __init__(
        self,
        label: str,
        total: int | None = None,
        *,
        expected_s: float | None = None,
        stream: IO[str] | None = None,
        live: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        tick_s: float | None = 1.0,
        width: int | None = None,
        log_every_s: float | None = None,
        remaining: Callable[[], float] | None = None,
    ) -> None:
        if total is not None and total < 0:
            raise ValueError(f"progress total must be ≥ 0, got {total}")
        self.label = label
        self.total = total
        self.expected_s = expected_s
        # A model of the work left (runner/run/eta.py), asked on every redraw; None: the pace.
        self.remaining = remaining
        self.stream = stream if stream is not None else sys.stdout
        self.live = is_terminal(self.stream) if live is None else live
        self.clock = clock
        self.done = 0
        self.current = ""  # what is in flight, shown on the live line
        self._started = clock()
        # When the first step(s) finished and how many did then: the pace is measured after it.
        self._first_done_at: float | None = None
        self._first_done = 0
        self._last_done_at: float | None = None
        self._width = width
        self._lock = threading.RLock()
        self._shown = False  # a live line is on screen and must be cleared before printing
        self._closed = False
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self.log_every_s = log_every_s
        self._last_write = clock()
        # In a log the ticker looks twice a second, so a status line is at most half a second late.
        every = tick_s if self.live else (min(0.5, log_every_s) if log_every_s else None)
        if every:
            self._ticker = threading.Thread(
                target=self._tick, args=(every,), name=f"progress:{label}", daemon=True
            )
            self._ticker.start()
        self.redraw()

    # --- numbers ---------------------------------------------------------------------------

    @property
    def elapsed_s(self) -> float:
        return self.clock() - self._started

    @property
    def eta_s(self) -> float | None:
        """Seconds left: from the pace since the first finished step, else from `expected_s`;
        None when unknown."""
        if self.remaining is not None:
            return max(0.0, self.remaining())
        elapsed = self.elapsed_s
        pace = self.pace_s
        if self.total is not None and pace is not None and self._last_done_at is not None:
            # Counts down between finishes; a step that runs past the pace holds it at the
            # steps after it rather than at 0:00.
            left = self.total - self.done
            since = self.clock() - self._last_done_at
            return max(0.0, pace * left - since, pace * (left - 1))
        if self.total is not None and self.done > 0 and self.expected_s is None:
            return None  # one finished step says nothing yet about the next ones
        if self.expected_s is not None:
            return max(0.0, self.expected_s - elapsed)
        return None

    @property
    def pace_s(self) -> float | None:
        """Seconds per step, measured from the first completion to the last; None until steps
        have finished at two different moments."""
        steps = self.done - self._first_done
        if self._first_done_at is None or self._last_done_at is None or steps <= 0:
            return None
        return (self._last_done_at - self._first_done_at) / steps

    def counter_text(self) -> str:
        """`3/10 · 0:42 elapsed · ETA 1:38` (parts that are unknown are left out; no ETA once
        finished)."""
        parts = []
        if self.total is not None:
            parts.append(f"{self.done}/{self.total}")
        parts.append(f"{clock_text(self.elapsed_s)} elapsed")
        eta = self.eta_s
        if eta is not None and not self.finished:
            overdue = self.expected_s is not None and self.done == 0 and eta == 0
            parts.append("taking longer than usual" if overdue else f"ETA {clock_text(eta)}")
        return " · ".join(parts)

    @property
    def finished(self) -> bool:
        """Every step is done (one long step: it has advanced)."""
        return self.done >= self.total if self.total is not None else self.done > 0

    def status(self) -> str:
        """The live line: `run: 3/10 · 0:42 elapsed · ETA 1:38 · building trialbox/llm-cpu`."""
        text = f"{self.label}: {self.counter_text()}"
        shown = self.current and self.current != self.label
        return f"{text} · {self.current}" if shown else text

    # --- output ----------------------------------------------------------------------------

    def start(self, text: str) -> None:
        """Say what is in flight now. On a terminal it shows on the live line; in a log it is
        one line (`text ...`), so a hang shows what it hung in."""
        with self._lock:
            self.current = text
            if self.live:
                self.redraw()
            else:
                self._write(f"{text} ...\n")

    def show(self, text: str) -> None:
        """What is in flight now, without a line of its own: the live line shows it at once, a
        log's next status line (every `log_every_s`) carries it. "" takes it off."""
        with self._lock:
            self.current = text
            self.redraw()

    def advance(self, line: str, count: int = 1) -> None:
        """`count` steps finished; print `line` for them (with the counter, in a log)."""
        with self._lock:
            now = self.clock()
            self.done += count
            if self._first_done_at is None:
                self._first_done_at, self._first_done = now, self.done
            self._last_done_at = now
            self.current = ""
            if self.live:
                self._print_above(line)
            else:
                self._write(f"{_one_line(line)}  [{self.counter_text()}]\n")

    def say(self, text: str) -> None:
        """A message that is not a step (a warning, a stop reason): printed as it is."""
        with self._lock:
            if self.live:
                self._print_above(text)
            else:
                self._write(f"{_one_line(text)}\n")

    def redraw(self) -> None:
        """Draw the live line again (a no-op in a log or after close)."""
        with self._lock:
            if not self.live or self._closed:
                return
            self._write(CLEAR_LINE + self._fit(self.status()))
            self._shown = True

    def close(self) -> None:
        """Stop the ticker and take the live line off the screen (idempotent)."""
        self._stop.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join()
        with self._lock:
            if self._shown:
                self._write(CLEAR_LINE)
                self._shown = False
            self._closed = True

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- internals -------------------------------------------------------------------------

    def _tick(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            if self.live:
                self.redraw()
            else:
                self.heartbeat()

    def heartbeat(self) -> None:
        """In a log: the status line, when nothing was written for `log_every_s` (the ticker
        calls this; a no-op on a terminal, where the live line already moves)."""
        with self._lock:
            if self.live or self._closed or not self.log_every_s:
                return
            if self.clock() - self._last_write >= self.log_every_s:
                self._write(f"{_one_line(self.status())}\n")

    def _print_above(self, text: str) -> None:
        # Clear the live line, print the text where it was, and draw the live line under it.
        self._write((CLEAR_LINE if self._shown else "") + text.rstrip("\n") + "\n")
        self._shown = False
        self.redraw()

    def _fit(self, text: str) -> str:
        # A live line longer than the terminal would wrap, and `\r` would then redraw only its
        # last row, leaving the others behind on every tick.
        width = self._width or shutil.get_terminal_size((100, 24)).columns
        limit = max(10, width - 1)
        return text if len(text) <= limit else text[: limit - 1] + "…"

    def _write(self, text: str) -> None:
        self._last_write = self.clock()
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe (`| head`) must not turn progress into a crash


def _one_line(text: str) -> str:
    """Log lines are single lines: a message with newlines is joined with ' | '."""
    lines = [part.strip() for part in text.strip("\n").splitlines()]
    return " | ".join(part for part in lines if part)


def phase(
    label: str,
    *,
    expected_s: float | None = None,
    stream: IO[str] | None = None,
    live: bool | None = None,
    clock: Callable[[], float] = time.monotonic,
    tick_s: float | None = 1.0,
    log_every_s: float | None = None,
) -> Progress:
    """One long step (an image build, the corpus, the LLM server start) as a context manager:
    `label ...` when it starts, then the line given to `advance()` when it ends (with the time
    it took, in a log); on a terminal a live line with elapsed time and, with `expected_s`,
    an ETA in between; in a log, with `log_every_s`, the status line after that long without
    a line."""
    progress = Progress(
        label, None, expected_s=expected_s, stream=stream, live=live, clock=clock, tick_s=tick_s,
        log_every_s=log_every_s,
    )
    progress.start(label)
    return progress


#: In a log, a phase says its status after this long without a line: well inside the 15 s a
#: reader waits before deciding something hung (issue 22).
LOG_EVERY_S = 10.0


def run_talking(command: Sequence[str], progress: Progress, *, stdin: int | None = None) -> int:
    """Run `command` as one step of `progress`: each line it prints passes through (above the
    live line on a terminal), its silences get the status line (in a log, every
    `progress.log_every_s`), and its end is one line with the time it took. Returns its exit
    code (127 when it cannot be started, said in that line)."""
    try:
        child = subprocess.Popen(
            list(command), stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, errors="replace", bufsize=1,
        )
    except OSError as exc:
        progress.advance(f"{progress.label}: could not start {command[0]}: {exc}")
        return 127
    assert child.stdout is not None
    with child:
        for line in child.stdout:
            progress.say(line.rstrip("\n"))
        code = child.wait()
    ending = "done" if code == 0 else f"failed (exit {code})"
    # A log line gets the elapsed time in its counter; a terminal's line says it here.
    took = f" in {clock_text(progress.elapsed_s)}" if progress.live else ""
    progress.advance(f"{progress.label}: {ending}{took}")
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """`python3 -m runner.run.progress LABEL -- COMMAND...`: run COMMAND as a talking phase."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[1] != "--":
        print("usage: python3 -m runner.run.progress LABEL -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    with phase(args[0], log_every_s=LOG_EVERY_S) as progress:
        return run_talking(args[2:], progress)


if __name__ == "__main__":
    sys.exit(main())
