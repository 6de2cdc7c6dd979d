"""Where the judge's prompts and calibration examples live on disk.

They are project files under `eval/` (not package data) so that a reader can review them next to
the scenarios; runner/system/paths.py says where `eval/` is (TRIALBOX_EVAL_ROOT, else the checkout).
"""

from __future__ import annotations

from functools import cache

from runner.judge._errors import JudgeError
from runner.system.paths import eval_root


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
