"""The two errors that end a command before or outside a run, and the exit codes (README).

Kept apart from runner.launch so the CLI can start without importing the engine, the judge
providers and their SDKs (seconds on a loaded machine): `trialbox images` and `validate` need
none of them.
"""

from __future__ import annotations

EXIT_OK, EXIT_QUALITY, EXIT_USAGE, EXIT_INFRA = 0, 1, 2, 3


class UsageError(Exception):
    """Bad input found before anything ran (exit 2). The message names the cause and the fix."""


class InfraError(Exception):
    """The appliance could not run (exit 3). The message names the cause and the fix."""
