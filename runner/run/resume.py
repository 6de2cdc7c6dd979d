"""Resuming a run folder: its saved settings checked, the model it started with, and the
results of scenarios the new selection lacks."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from runner.report import RunWriter, served_model_of
from runner.run.errors import ModelChanged, UsageError, first_line
from runner.run.llm_server import llm_identity
from runner.run.settings import RunSettings
from runner.scenarios import Scenario
from runner.system.bounded_read import checked_path

RUN_ID = re.compile(r"[0-9]{8}-[0-9]{6}-[0-9a-f]{4}")


def resume_settings(run_dir: Path) -> RunSettings:
    """The settings saved in RUN_DIR/run.json. The run id must be one trialbox made and match
    the folder's name: it names files and Docker labels, so `../../x` must never get in."""
    try:
        checked_path(run_dir / "run.json")
    except ValueError as exc:
        raise UsageError(f"{exc} — pass a folder made by `trialbox run` (results/<run_id>)") from None
    if not (run_dir / "run.json").is_file():
        raise UsageError(f"{run_dir}: no run.json here — pass a folder made by `trialbox run` (results/<run_id>)")
    try:
        settings = RunSettings.load(run_dir)
    except (ValueError, OSError) as exc:
        # The loader's line names the file, the field and the fix (never the value read).
        raise UsageError(f"cannot use {run_dir}: {first_line(exc)}") from None
    if not RUN_ID.fullmatch(settings.run_id) or settings.run_id != run_dir.resolve().name:
        raise UsageError(f"{run_dir}/run.json: field run_id: {settings.run_id!r} is not this "
                         f"folder's run id ({run_dir.resolve().name!r}) — pass the run folder "
                         "itself, unmodified")
    settings.results_root = run_dir.parent
    _check_resumable_scorecard(run_dir)
    return settings


def _check_resumable_scorecard(run_dir: Path) -> None:
    """A scorecard cut short (disk full, killed mid-write) is found before anything starts."""
    from runner.report import read_scorecard

    if (run_dir / "scorecard.json").exists():
        try:
            read_scorecard(run_dir / "scorecard.json")
        except (ValueError, OSError) as exc:
            raise UsageError(f"cannot resume: {first_line(exc)} — start a new run, "
                             "or restore the scorecard") from None


def check_served_model(settings: RunSettings, writer: RunWriter, say: Callable[[str], None]) -> None:
    """A resumed run must be answered by the model it started with: ModelChanged (exit 2)
    when the LLM server now serves another, unless --allow-model-change (then the scorecard
    says so). A server that does not answer is left to the health probe (exit 3)."""
    recorded = writer.config.served_model
    now = served_model_of(llm_identity(settings.llm_url))
    if recorded is None or now is None or now == recorded:
        return
    change = f"the LLM server now serves {now}; this run started with {recorded}"
    if not settings.allow_model_change:
        raise ModelChanged(f"--resume {settings.run_dir}: {change} — serve that model again, or "
                           "pass --allow-model-change to mix them in one scorecard")
    say(f"warning: {change} (--allow-model-change)")
    writer.warn(f"resumed with another model: {change}")


def say_kept_foreign(writer: RunWriter, scenarios: Sequence[Scenario], say: Callable[[str], None]) -> None:
    """A run folder resumed with a suite that lacks some of its results (another suite, or the
    scenarios were renamed): say which results it keeps — they stay in the scorecard."""
    known = {scenario.id for scenario in scenarios}
    foreign = sorted({r.id for r in writer.results if r.id not in known})
    if foreign:
        shown = ", ".join(foreign[:10]) + (f" and {len(foreign) - 10} more" if len(foreign) > 10 else "")
        line = (f"resume keeps {len(foreign)} result(s) of scenarios not in this suite's selection: "
                f"{shown}")
        say(line)
        if line not in writer.warnings:
            writer.warn(line)

