"""Collecting a sandbox's artifacts step by step: a step that fails is written down, not raised.

Why: the conversation is the result; the chat DB and logs only explain it. A container that
died mid-scenario (OOM, killed) must cost the artifacts it took with it and nothing more, and
the results must say which ones are missing and why (``collect-errors.txt``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

#: The file in an artifacts folder that lists what could not be collected.
ERRORS_FILE = "collect-errors.txt"


class Collector:
    """Runs collection steps into ``dest``; each failure becomes one line in ``problems``."""

    def __init__(self, dest: Path) -> None:
        self.dest = dest
        self.problems: list[str] = []
        dest.mkdir(parents=True, exist_ok=True)

    async def step(self, artifact: str, action: Callable[[], Awaitable[object]]) -> None:
        try:
            await action()
        except Exception as exc:  # noqa: BLE001 — any failure of one artifact is written down
            first = str(exc).strip().splitlines()
            self.problems.append(f"{artifact}: {type(exc).__name__}: {first[0] if first else ''}".rstrip(": "))

    def note(self, artifact: str, why: str) -> None:
        """An artifact known not to be collectable (no exception involved)."""
        self.problems.append(f"{artifact}: {why}")

    def finish(self) -> list[str]:
        """Write the problems (if any) beside the artifacts and return them."""
        if self.problems:
            (self.dest / ERRORS_FILE).write_text("\n".join(self.problems) + "\n", encoding="utf-8")
        return list(self.problems)
