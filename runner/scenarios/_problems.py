"""What is wrong with a scenario tree, said so that a person can fix it.

Every problem names the file, the line, the field, what is wrong and how to fix it. Loading
never stops at the first problem: one bad file must not hide the others.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from pydantic import BaseModel

from runner.system.json_input import field_path as json_field_path


class Level(str, Enum):
    ERROR = "error"  # the scenario (or the manifest) cannot be used as written
    WARNING = "warning"  # it can be used, but something looks unintended


class Problem(BaseModel):
    """One thing wrong with one file. `str(problem)` is the line a user reads."""

    file: Path
    line: int | None = None  # 1-based; None when the problem is about the whole file
    field: str = ""  # dotted path into the file, e.g. "turns[1].ground_truth.fact_id"
    message: str  # what is wrong
    fix: str = ""  # how to fix it
    level: Level = Level.ERROR

    @property
    def is_error(self) -> bool:
        return self.level is Level.ERROR

    def __str__(self) -> str:
        location = f"{self.file}:{self.line}" if self.line is not None else str(self.file)
        field = f" {self.field}:" if self.field else ""
        fix = f" — {self.fix}" if self.fix else ""
        return f"{location}:{field} {self.message}{fix}"


def field_path(path: tuple[str | int, ...]) -> str:
    """("turns", 0, "ground_truth") -> "turns[0].ground_truth"; "" for the whole file."""
    return json_field_path(path, top="")
