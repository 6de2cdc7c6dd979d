"""Resuming a run folder: its saved settings checked, the model it started with, the
results of scenarios the new selection lacks, and kept rows' artifacts that were cut short."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

from runner.report import RunWriter, ScorecardError, read_trace, served_model_of
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


#: The note a kept row gets for each artifact an earlier attempt left damaged.
DAMAGED_ARTIFACT = "artifact {name} was damaged ({why}) and is removed: its sandbox is gone, so it cannot be collected again"


#: Artifacts that are never empty when whole, by suffix: JSON documents, the chat database
#: (its `-wal`/`-shm` companions may be empty and are not checked), the logs (the Agent UI and
#: the bridge log their start-up before anything else) and `collect-errors.txt` (written only
#: with something in it).
CHECKED_SUFFIXES = (".json", ".db", ".log", ".txt")


def damage_of(path: Path) -> str | None:
    """Why an artifact file cannot be what it claims to be (None: it can, or it is not a kind
    we check). A full disk in an older trialbox left files at 0 bytes and chat databases cut
    short; today's writes are whole or absent, so anything damaged came from before."""
    if path.suffix not in CHECKED_SUFFIXES:
        return None
    try:
        size = path.stat().st_size
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    if size == 0:
        return "0 bytes"
    if path.suffix == ".json":
        try:
            json.loads(path.read_bytes())
        except (ValueError, OSError):
            return "not JSON"
    elif path.suffix == ".db":
        try:
            # immutable: read the file as it lies, with no -shm to create or WAL to replay.
            with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as database:
                verdict = database.execute("PRAGMA quick_check").fetchone()
        except sqlite3.Error:
            return "not an SQLite database"
        if verdict is None or verdict[0] != "ok":
            return "an SQLite database that fails its own check"
    return None


def flag_damaged_artifacts(writer: RunWriter, say: Callable[[str], None]) -> int:
    """Before a resume runs anything: every kept row's artifact that is damaged is removed and
    named in that row's notes (and its trace), so no cut file passes for evidence. Returns how
    many were found."""
    found = 0
    rows = 0
    for result in list(writer.results):
        folder = writer.run_dir / "artifacts" / result.key
        if not folder.is_dir() or folder.is_symlink():
            continue
        notes = []
        for path in sorted(folder.iterdir()):
            if not path.is_file() or path.is_symlink():
                continue
            why = damage_of(path)
            if why is not None:
                path.unlink()
                notes.append(DAMAGED_ARTIFACT.format(name=path.name, why=why))
        if not notes:
            continue
        found, rows = found + len(notes), rows + 1
        try:
            trace = read_trace(writer.run_dir / (result.trace or f"traces/{result.key}.json"))
            trace.result.notes += [n for n in notes if n not in trace.result.notes]
            writer.add(trace)  # refuses a trace path outside traces/ (a damaged scorecard)
        except ScorecardError:
            result.notes += notes  # no trace to rewrite: the row alone says it
            writer.write()
    if found:
        say(f"resume: {found} damaged artifact(s) of {rows} kept scenario(s) removed and named "
            "in their rows' notes (written before by a run that ran out of space or was cut short)")
    return found
