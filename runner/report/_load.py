"""Read any scorecard a user hands us: ours or GAIA's, a file or a run folder.

Why one entry point: `trialbox compare` must accept a trialbox run, a GAIA run folder and GAIA's
committed `eval/results/baseline.json` on either side. Every way the input can be wrong ends in
one `ScorecardError` (a ValueError) naming the file, the field and the fix; the CLI maps it to
exit 2 (unreadable input).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from runner.report._from_gaia import gaia_to_scorecard
from runner.report._gaia import BaselineMeta, GaiaScorecard
from runner.report._models import SCHEMA_VERSION, Scorecard, Trace
from runner.scenarios import MAX_TURNS
from runner.system.bounded_read import (
    SCORECARD_BYTES,
    SETTINGS_BYTES,
    TRACE_BYTES,
    BoundedReadError,
    checked_path,
)
from runner.system.json_input import (
    InputError,
    check_schema_version,
    field_path,
    read_json_input,
)

#: Looked for, in this order, when a folder is given.
SCORECARD_NAMES = ("scorecard.json", "baseline.json", "scorecard.gaia.json")
BASELINE_META = "meta.json"  # beside a baseline scorecard, as GAIA keeps it


class ScorecardError(InputError):
    """A scorecard, trace or meta.json that cannot be read; the message says how to fix it."""


def _first_error(path: Path, exc: ValidationError, fix: str) -> ScorecardError:
    # Only the location and pydantic's message: its `input` would echo the file's content.
    first = exc.errors()[0]
    return ScorecardError(f"{path}: {field_path(first['loc'])}: {first['msg']}; {fix}")


def locate_scorecard(path: Path) -> Path:
    """The scorecard file `path` names: itself, or the first known name inside a folder."""
    try:
        path = checked_path(Path(path))
    except BoundedReadError as exc:
        raise ScorecardError(f"{exc}; pass a run folder or its scorecard.json") from None
    if path.is_dir():
        for name in SCORECARD_NAMES:
            if (path / name).is_file():
                return path / name
        raise ScorecardError(
            f"{path}: no {', '.join(SCORECARD_NAMES)} in this folder; pass a run folder "
            f"(results/<run_id>) or a scorecard file"
        )
    if not path.exists():
        raise ScorecardError(
            f"{path}: no such file or folder; pass a run folder or its scorecard.json "
            f"(trialbox's or GAIA's)"
        )
    return path


def _json(path: Path, fix: str, limit: int = SCORECARD_BYTES) -> Any:
    try:
        return read_json_input(path, limit, fix)
    except InputError as exc:
        raise ScorecardError(str(exc)) from None


def read_baseline_meta(folder: Path) -> BaselineMeta | None:
    """meta.json in `folder`, when there is one."""
    path = Path(folder) / BASELINE_META
    if not path.is_file():
        return None
    data = _json(path, "fix or delete meta.json (it names the baseline's models)", SETTINGS_BYTES)
    if not isinstance(data, dict):
        raise ScorecardError(
            f"{path}: top level is {type(data).__name__}, not an object; meta.json names the "
            f"baseline's models (model, eval_model): fix or delete it"
        )
    try:
        return BaselineMeta.model_validate(data)
    except ValidationError as exc:
        raise _first_error(
            path, exc, "fix or delete meta.json (it names the baseline's models)"
        ) from None


def _validate(model: type[BaseModel], path: Path, data: dict[str, Any], fix: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _first_error(path, exc, fix) from None


def is_ours(data: dict[str, Any]) -> bool:
    """Ours always carries schema_version; GAIA's never does."""
    return "schema_version" in data


def read_any_scorecard(path: Path) -> Scorecard:
    """Our Scorecard from a trialbox or GAIA scorecard file, or a folder holding one.

    A GAIA scorecard is converted: the agent model comes from meta.json beside it when there is
    one (it outranks the scorecard, as in GAIA), the judge model from config.model.
    """
    file = locate_scorecard(path)
    data = _json(file, "pass the scorecard.json a run wrote (it may be cut short: re-run)")
    if not isinstance(data, dict):
        raise ScorecardError(
            f"{file}: top level is {type(data).__name__}, not a scorecard object; pass the "
            f"scorecard.json a run wrote"
        )
    if is_ours(data):
        return _our_scorecard(file, data)
    gaia: GaiaScorecard = _validate(
        GaiaScorecard,
        file,
        data,
        "read as GAIA's scorecard format: every row needs scenario_id and status (a "
        "`scenarios` list of them); fix that row or re-run `gaia eval agent`",
    )
    mtime = datetime.fromtimestamp(file.stat().st_mtime, UTC)
    return gaia_to_scorecard(
        gaia, meta=read_baseline_meta(file.parent), run_id=file.parent.name, timestamp=mtime
    )


def _check_version(path: Path, data: dict[str, Any]) -> None:
    try:
        check_schema_version(path, data, SCHEMA_VERSION, _written_by(data))
    except InputError as exc:
        raise ScorecardError(str(exc)) from None


def _our_scorecard(file: Path, data: dict[str, Any]) -> Scorecard:
    _check_version(file, data)
    card: Scorecard = _validate(
        Scorecard,
        file,
        data,
        "the file is not a valid trialbox scorecard (schema "
        "runner/report/schemas/scorecard.schema.json); re-run or restore it",
    )
    return card


def read_scorecard(path: Path) -> Scorecard:
    """A run folder's own scorecard.json (trialbox's format only), refused as `read_any_scorecard`
    refuses; FileNotFoundError when there is none (a run that has not written one yet)."""
    path = Path(path)
    if not os.path.lexists(path):
        raise FileNotFoundError(f"{path}: no scorecard here; pass the run folder's scorecard.json")
    data = _json(path, "pass the scorecard.json a run wrote (it may be cut short: re-run)")
    if not isinstance(data, dict):
        raise ScorecardError(f"{path}: top level is {type(data).__name__}, not a scorecard "
                             "object; pass the scorecard.json a run wrote")
    return _our_scorecard(path, data)


def _written_by(data: dict[str, Any]) -> str | None:
    """The trialbox version a scorecard's config (or a trace's row) says wrote it."""
    config = data.get("config")
    version = config.get("trialbox_version") if isinstance(config, dict) else None
    return version if isinstance(version, str) else None


TRACE_FIX = "delete the trace or re-run its scenario"

#: Most turns one trace may hold: as many as a scenario may have (scenarios.MAX_TURNS; real
#: traces hold tens). A 20,000-turn trace took minutes to rescore and a 1,000,000-turn one
#: aborted the interpreter, so more than this is refused unvalidated.
TRACE_TURNS = MAX_TURNS


def read_trace(path: Path) -> Trace:
    """One trace file, refused (ScorecardError) as any scorecard would be: bounded, no link out
    of traces/, finite numbers, a schema_version this trialbox reads, a valid Trace."""
    data = _json(path, TRACE_FIX, TRACE_BYTES)
    if not isinstance(data, dict):
        raise ScorecardError(f"{path}: not a trace object; {TRACE_FIX}")
    _check_version(path, data)
    _check_turn_count(path, data)
    trace: Trace = _validate(Trace, path, data, f"not a valid trialbox trace; {TRACE_FIX}")
    return trace


def _check_turn_count(path: Path, data: dict[str, Any]) -> None:
    """ScorecardError when the trace's transcript holds more than TRACE_TURNS turns (counted
    before the model validates them: validating a million turns is what never ends)."""
    transcript = data.get("transcript")
    turns = transcript.get("turns") if isinstance(transcript, dict) else None
    if isinstance(turns, list) and len(turns) > TRACE_TURNS:
        raise ScorecardError(f"{path}: transcript.turns: {len(turns)} turns, more than the "
                             f"{TRACE_TURNS} a trace may hold; {TRACE_FIX}")


def read_traces(run: Path) -> list[Trace]:
    """Every trace of a run folder (traces/*.json); [] when it has none (e.g. GAIA's)."""
    folder = Path(run)
    if folder.is_file():
        folder = folder.parent
    return [read_trace(path) for path in sorted((folder / "traces").glob("*.json"))]
