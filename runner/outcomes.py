"""The result of one exact check, verified by code (never by a model)."""

from pydantic import BaseModel


class CheckResult(BaseModel):
    type: str  # the check's type, e.g. "tool_called"
    turn: int | None = None  # None for a scenario-level check
    passed: bool
    diagnostic: str = ""  # on failure: what was expected and what happened
