"""Where trialbox's own folders are: one module knows, every other module asks it.

The checkout (or the runner image) holds `eval/` beside the `runner` package; TRIALBOX_EVAL_ROOT
points elsewhere (the runner image mounts the host's `eval/` at its own path). The CLI resolves
these the same way from any working directory, so `trialbox run` in /tmp finds our suite.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The folder holding the `runner` package (a checkout, or /opt/trialbox in the runner image, where eval/ sits beside it)."""


def eval_root() -> Path:
    """Our scenarios, corpus, prompts and calibration examples."""
    configured = os.environ.get("TRIALBOX_EVAL_ROOT")
    return Path(configured) if configured else REPO_ROOT / "eval"


def cache_root() -> Path:
    """Downloaded models, build contexts and judge replies (never committed)."""
    return REPO_ROOT / ".cache"
