"""The two errors that end a command before or outside a run, and the exit codes (README).

Kept apart from runner.run.launch so the CLI can start without importing the engine, the judge
providers and their SDKs (seconds on a loaded machine): `trialbox images` and `validate` need
none of them.
"""

from __future__ import annotations

EXIT_OK, EXIT_QUALITY, EXIT_USAGE, EXIT_INFRA = 0, 1, 2, 3
#: `run --baseline`: the baseline was made with other agent or judge models, so no verdict
#: (better, worse) can be drawn — neither a regression nor an infrastructure failure.
EXIT_NOT_COMPARABLE = 4


class UsageError(Exception):
    """Bad input found before anything ran (exit 2). The message names the cause and the fix."""


class ModelChanged(UsageError):
    """`--resume` found the LLM server serving another model than the run started with (exit 2):
    results of two models must not be mixed in one scorecard."""


class InfraError(Exception):
    """The appliance could not run (exit 3). The message names the cause and the fix."""


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (a pydantic error lists every field below it): what
    a one-line refusal quotes; the whole message when it has no line."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else str(exc)
