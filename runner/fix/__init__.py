"""Fix mode: a fixer repairs a copy of the agent in an isolated sandbox; trialbox re-runs the
failing scenarios with the patched copy and hands back a patch (``results/<run>/fix/``)."""

from runner.fix._fixers import FixerConfigError, FixerOptions, FixerSpec, fixer_spec
from runner.fix._gaia import check_imports, gaia_source
from runner.fix._loop import FixLoop, FixPlan
from runner.fix._models import (
    FixerRun,
    FixLogEntry,
    FixNote,
    FixReport,
    IterationRecord,
    Problem,
    Scope,
)
from runner.fix._sandbox import FIXER_IMAGE, FixSandbox, FixSandboxError
from runner.stack.fixer_image import build_fixer_image, image_has_claude

__all__ = [
    "FIXER_IMAGE",
    "FixLogEntry",
    "FixLoop",
    "FixNote",
    "FixPlan",
    "FixReport",
    "FixSandbox",
    "FixSandboxError",
    "FixerConfigError",
    "FixerOptions",
    "FixerRun",
    "FixerSpec",
    "IterationRecord",
    "Problem",
    "Scope",
    "build_fixer_image",
    "check_imports",
    "fixer_spec",
    "gaia_source",
    "image_has_claude",
]
