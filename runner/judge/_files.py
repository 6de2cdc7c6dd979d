"""Where the judge's prompts and calibration examples live on disk.

They are project files under `eval/` (not package data) so that a reader can review them next to
the scenarios. TRIALBOX_EVAL_ROOT points elsewhere (the runner image copies `eval/` to its own
place); otherwise the repository checkout that holds this package is used.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from runner.judge._errors import JudgeError


def eval_root() -> Path:
    configured = os.environ.get("TRIALBOX_EVAL_ROOT")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[2] / "eval"


@cache
def prompt(name: str) -> str:
    """The text of eval/prompts/<name>.md. Cached: prompts do not change during a run."""
    path = eval_root() / "prompts" / f"{name}.md"
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise JudgeError(
            f"{path}: prompt file missing; set TRIALBOX_EVAL_ROOT to the folder that holds "
            "prompts/ and calibration/"
        ) from None
