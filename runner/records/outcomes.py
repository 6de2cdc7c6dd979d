"""The result of one exact check, verified by code (never by a model)."""

from pydantic import BaseModel, Field


class CheckResult(BaseModel):
    type: str = Field(description="the check's type, e.g. tool_called, or expected_tools")
    turn: int | None = Field(default=None, description="the turn; None for a scenario-level check")
    passed: bool = Field(description="the check held")
    diagnostic: str = Field(
        default="", description="on failure: what was expected and what happened")
    derived: bool = Field(
        default=False,
        description="true when trialbox derived the check from the turn's ground_truth."
        "expected_answer instead of the scenario declaring it (--no-derived-checks turns "
        "these off)")
