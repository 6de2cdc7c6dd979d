"""RunWriter: keeps a results folder readable at every moment of a run.

Why this shape: a run can die at any point (Ctrl-C, OOM, a lost container). Each scenario's
trace is written the moment it ends, then scorecard.json, scorecard.gaia.json (the same results
in GAIA's field names, for `gaia eval agent --compare`), summary.md, junit.xml and report.html
are rewritten from everything finished so far. inspect.eval (the run as an inspect_ai log, for
`inspect view`, when the optional extra is installed) is written once the run ends and when a
run folder is resumed, not after every scenario: it is a zip of every sample, so rebuilding it
at each scenario's end made a long run quadratic. A killed run leaves no (or last run's) log;
its --resume writes one from the scorecard before it goes on, so nothing is lost. Every write
goes to a temporary file in the same folder and is renamed over the old one, so a reader (or a
crash) never sees half a file.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from runner.report._assemble import build_scorecard
from runner.report._folder import (
    GAIA_SCORECARD,
    HTML,
    JUNIT,
    SCORECARD,
    SUMMARY,
    atomic_write,
    read_scorecard,
)
from runner.report._html import render_html
from runner.report._inspect import (
    INSPECT_LOG,
    INSTALL_HINT,
    inspect_available,
    suite_name,
    write_inspect_log,
)
from runner.report._junit import render_junit
from runner.report._load import ScorecardError, read_trace
from runner.report._models import RunConfig, ScenarioResult, Scorecard, Trace
from runner.report._summary_md import render_summary_md
from runner.report._to_gaia import gaia_json
from runner.verdict.trials import JudgeAgreement


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _note_on_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def declared_order(scenario_ids: Sequence[str]) -> Callable[[ScenarioResult], int]:
    """Results in the suite's declared order, trials of one scenario in trial order, whatever
    order they finished in (scenarios run concurrently); ids not declared go last."""
    position = {scenario_id: index for index, scenario_id in enumerate(scenario_ids)}
    return lambda result: position.get(result.id, len(position)) * 1000 + (result.trial or 0)


class RunWriter:
    """Owns results/<run_id>/: traces, scorecard, summary, JUnit and HTML report."""

    def __init__(
        self,
        run_dir: Path,
        *,
        run_id: str,
        config: RunConfig,
        results: Sequence[ScenarioResult] = (),
        order: Callable[[ScenarioResult], int] | None = None,
        clock: Callable[[], datetime] = _utc_now,
        note: Callable[[str], None] | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_id = run_id
        self.config = config
        self.clock = clock
        self.started = clock()
        self.results: list[ScenarioResult] = list(results)
        self.judge_agreement: JudgeAgreement | None = None
        self.warnings: list[str] = []
        self.finished = False
        # How results are ordered in every file (see declared_order); None keeps the order they
        # finished in.
        self.order = order
        # The engine may finish scenarios from several threads; files are rewritten one at a time.
        self._lock = threading.RLock()
        # Where the one note about the inspect_ai log goes (extra missing, or its write failed).
        self.note = note or _note_on_stderr
        self._inspect_log: bool | None = None  # None: not yet known whether the extra is there

    @classmethod
    def resume(
        cls,
        run_dir: Path,
        order: Callable[[ScenarioResult], int] | None = None,
        clock: Callable[[], datetime] = _utc_now,
    ) -> RunWriter:
        """Continue a run folder: keeps the results its scorecard.json already holds."""
        card = read_scorecard(Path(run_dir) / SCORECARD)
        writer = cls(
            run_dir, run_id=card.run_id, config=card.config, results=card.scenarios, order=order,
            clock=clock,
        )
        writer.started = card.timestamp
        writer.warnings = list(card.warnings)
        writer._adopt_unrecorded_traces()
        # A killed run wrote no log at its end: the scorecard's rows are in it from now on.
        writer.write_inspect()
        return writer

    def _adopt_unrecorded_traces(self) -> None:
        """A run killed between `add`'s two writes left a finished scenario's trace without its
        scorecard row: keep it (it is exactly what `add` was recording) instead of running the
        scenario again. A trace that cannot be read is left for the resume to re-run."""
        known = self.done_keys()
        adopted = []
        for path in sorted((self.run_dir / "traces").glob("*.json")):
            try:
                trace = read_trace(path)
            except ScorecardError:
                continue
            if trace.result.key not in known:
                adopted.append(trace.result)
        if adopted:
            self.results += adopted
            if self.order is not None:
                self.results.sort(key=self.order)
            self.write()

    def done_keys(self) -> set[str]:
        """Result keys already recorded (what --resume must not run again)."""
        return {r.key for r in self.results}

    def add(self, trace: Trace) -> Path:
        """Record one finished scenario: its trace first, then every summary file."""
        result = trace.result
        result.trace = result.trace or f"traces/{result.key}.json"
        path = self.run_dir / result.trace
        traces = (self.run_dir / "traces").resolve()
        if path.resolve().parent != traces:
            # An id or trace field like ../../x (a damaged scorecard resumed) names a file
            # outside this run's traces/: refused, never written there.
            raise ScorecardError("a scorecard row's trace path is not a file in this "
                                 "run's traces/ folder; restore the scorecard row or re-run")
        with self._lock:
            atomic_write(path, trace.model_dump_json(indent=2) + "\n")
            self.results = [r for r in self.results if r.key != result.key] + [result]
            if self.order is not None:
                self.results.sort(key=self.order)
            self.write()
        return path

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def set_judge_agreement(self, agreement: JudgeAgreement) -> None:
        self.judge_agreement = agreement
        self.write()

    def scorecard(self) -> Scorecard:
        return build_scorecard(
            run_id=self.run_id,
            timestamp=self.started,
            config=self.config,
            results=self.results,
            finished=self.finished,
            judge_agreement=self.judge_agreement,
            warnings=self.warnings,
        )

    def write(self) -> Scorecard:
        with self._lock:
            card = self.scorecard()
            atomic_write(self.run_dir / SCORECARD, card.model_dump_json(indent=2) + "\n")
            atomic_write(self.run_dir / GAIA_SCORECARD, gaia_json(card))
            atomic_write(self.run_dir / SUMMARY, render_summary_md(card))
            atomic_write(self.run_dir / JUNIT, render_junit(card))
            atomic_write(self.run_dir / HTML, render_html(card))
        return card

    def write_inspect(self) -> None:
        """Write inspect.eval from everything recorded so far (the run's end, a resume)."""
        with self._lock:
            self._write_inspect_log(self.scorecard())

    def _write_inspect_log(self, card: Scorecard) -> None:
        # Optional: without the extra the run says so once and writes everything else; a failed
        # write is said once too and never costs the run its scorecard.
        if self._inspect_log is None:
            self._inspect_log = inspect_available()
            if not self._inspect_log:
                self.note(f"note: no {INSPECT_LOG} for this run — {INSTALL_HINT}")
        if not self._inspect_log:
            return
        try:
            write_inspect_log(card, self.run_dir / INSPECT_LOG, suite=suite_name(self.run_dir))
        except Exception as exc:  # noqa: BLE001 — the viewer's copy must not stop the run
            self._inspect_log = False
            self.note(f"note: {INSPECT_LOG} not written: {type(exc).__name__}: {exc}")

    def close(self) -> Scorecard:
        """Mark the run finished and write the final files, inspect.eval among them."""
        with self._lock:
            self.finished = True
            card = self.write()
            self._write_inspect_log(card)
        return card
