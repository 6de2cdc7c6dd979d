"""Fix mode: a fixer repairs a copy of the agent in an isolated sandbox; trialbox re-runs the
failing scenarios with the patched copy and hands back a patch (``results/<run>/fix/``)."""

from runner.fix._command import fix_command
from runner.fix._image import build_fixer_image, image_has_claude
from runner.fix._models import FixerRun, FixLogEntry, FixNote, FixReport, IterationRecord, Problem
from runner.fix._sandbox import FIXER_IMAGE, FixSandbox, FixSandboxError

__all__ = [
    "FIXER_IMAGE",
    "FixLogEntry",
    "FixNote",
    "FixReport",
    "FixSandbox",
    "FixSandboxError",
    "FixerRun",
    "IterationRecord",
    "Problem",
    "build_fixer_image",
    "fix_command",
    "image_has_claude",
]
