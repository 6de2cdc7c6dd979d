"""What follows a run's last scenario: the summary, the quality gate, and the baseline saved and
compared; each returns the exit code and prints through the `say` it is given."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from runner.run.errors import EXIT_NOT_COMPARABLE, EXIT_OK, EXIT_QUALITY, EXIT_USAGE, UsageError

if TYPE_CHECKING:
    from runner.report import Scorecard
    from runner.run.settings import RunSettings
    from runner.verdict import Integrity

Say = Callable[[str], None]


def finish(card: Scorecard, settings: RunSettings, say: Say) -> int:
    """The summary, the gate, then --save-baseline and --baseline: the run's exit code.
    Raises UsageError when the baseline cannot be read (exit 2)."""
    return baseline_steps(settings, card, report_and_gate(card, settings, say), say)


def report_and_gate(card: Scorecard, settings: RunSettings, say: Say) -> int:
    """Print the summary and, when a --min-pass-rate applies, which rate decided the exit code."""
    print_summary(card, settings.run_dir, say)
    return hold_gates(card, settings, say)


def hold_gates(card: Scorecard, settings: RunSettings, say: Say) -> int:
    """The run's gates held against `card` (--min-pass-rate, --integrity), each said in its
    lines: the exit code they give (`trialbox ab` holds them against each side)."""
    from runner.run.gate import exit_code, integrity_lines, quality_gate_line

    if settings.min_pass_rate is not None:
        say(quality_gate_line(card, settings.min_pass_rate, settings.allow_incomplete))
    code = exit_code(card, settings.min_pass_rate, settings.allow_incomplete)
    if settings.integrity:
        measured = integrity_of(card, settings)
        for line in integrity_lines(measured):
            say(line)
        if code == EXIT_OK and not measured.complete:
            return EXIT_QUALITY
    return code


def integrity_of(card: Scorecard, settings: RunSettings) -> Integrity:
    """--integrity: the run's rows held to the baseline's scenarios (when --baseline is given)."""
    from runner.report import ScorecardError, read_any_scorecard
    from runner.verdict import integrity

    baseline = None
    if settings.baseline is not None:
        try:
            baseline = read_any_scorecard(settings.baseline).scenarios
        except ScorecardError as exc:
            raise UsageError(str(exc)) from exc
    return integrity(card.scenarios, baseline=baseline, not_measured=settings.not_measured)


def baseline_steps(settings: RunSettings, card: Scorecard, code: int, say: Say) -> int:
    """--save-baseline and --baseline after a run. A regression against the baseline is a
    failed quality gate (1) unless the run already failed harder."""
    from runner.report import ScorecardError, compare, read_any_scorecard, save_baseline

    if settings.save_baseline is not None:
        try:
            for path in save_baseline(card, settings.save_baseline):
                say(f"baseline saved: {path}")
        except (ScorecardError, OSError) as exc:
            say(f"warning: baseline not saved: {exc}")
    if settings.baseline is None:
        return code
    try:
        result = compare(read_any_scorecard(settings.baseline), card)
    except ScorecardError as exc:
        raise UsageError(str(exc)) from exc
    say(result.render())
    if code != 0:
        return code
    if result.exit_code == 3:  # compare's "models differ": its own outcome, not infrastructure
        say(f"--baseline {settings.baseline}: not comparable — the baseline was made with other "
            f"agent or judge models, so no verdict is drawn (exit {EXIT_NOT_COMPARABLE})")
        return EXIT_NOT_COMPARABLE
    return {0: 0, 1: 1}.get(result.exit_code, EXIT_USAGE)


def print_summary(card: Scorecard, run_dir: Path, say: Say) -> None:
    """The run's summary.md (or the summary's text) and where its files are."""
    say("")
    summary = run_dir / "summary.md"
    say(summary.read_text(encoding="utf-8") if summary.exists() else str(card.summary))
    say(f"results: {run_dir}/ (scorecard.json, summary.md, junit.xml, report.html, traces/, artifacts/)")
