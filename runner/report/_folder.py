"""The results folder's file names, its one way to write a file, and the scorecard.json reader.

Below both the writer (runner/report/_writer.py) and the inspect_ai export: each names and
reads the folder's files through here, so neither imports the other's module to do it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pydantic import ValidationError

from runner.report._models import Scorecard
from runner.system.bounded_read import SCORECARD_BYTES, BoundedReadError, read_bounded_text

SCORECARD = "scorecard.json"
GAIA_SCORECARD = "scorecard.gaia.json"
SUMMARY = "summary.md"
JUNIT = "junit.xml"
HTML = "report.html"


def atomic_write(path: Path, text: str) -> None:
    """Replace `path` with `text` in one step: readers see the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are for whoever reads the folder
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_scorecard(path: Path) -> Scorecard:
    """Load a scorecard.json, with one clear error naming the file when it is not valid."""
    try:
        return Scorecard.model_validate_json(read_bounded_text(path, SCORECARD_BYTES))
    except BoundedReadError as exc:
        if not os.path.lexists(path):
            raise FileNotFoundError(
                f"{path}: no scorecard here; pass the run folder's scorecard.json") from None
        raise ValueError(f"{exc}; pass the scorecard.json a run wrote") from None
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deeply to be a scorecard") from None
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path}: no scorecard here; pass the run folder's scorecard.json"
        ) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ValueError(
            f"{path}: field {field}: {first['msg']}; the file is not a trialbox scorecard "
            f"(schema runner/report/schemas/scorecard.schema.json) or is from another version"
        ) from None
