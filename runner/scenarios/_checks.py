"""The vocabulary of exact checks a scenario may declare (verified by code, never by a model).

The models live here, beside the scenario models, because a scenario file declares them and
the scenario package is the leftmost module of the one-way flow (design/architecture.md):
`runner/checks.py` imports these models and evaluates them, never the other way round.

Unlike scenario keys (where an unknown key only warns, for GAIA compatibility), a check is
our own vocabulary: a misspelt argument such as `tolerence` would silently weaken a check,
so unknown keys inside a check are errors.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ArgumentMatcher(_Strict):
    """A condition on one argument of a tool call: exactly one of `equals` or `matches`."""

    equals: Any = None
    matches: str | None = None  # a regular expression searched for in str(value)

    @model_validator(mode="after")
    def _exactly_one(self) -> ArgumentMatcher:
        given = [name for name in ("equals", "matches") if name in self.model_fields_set]
        if len(given) != 1:
            raise ValueError("give exactly one of 'equals' or 'matches'")
        return self

    @field_validator("matches")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as err:
                raise ValueError(f"invalid regular expression {pattern!r}: {err}") from err
        return pattern


Arguments = dict[str, ArgumentMatcher]


class ToolStep(_Strict):
    """One expected tool call in a trajectory: a tool name and optional argument conditions.

    In YAML a step may be a bare tool name; it then matches any call of that tool.
    """

    tool: str = Field(min_length=1)
    arguments: Arguments = Field(default_factory=dict)


def _steps_from_names(value: Any) -> Any:
    if isinstance(value, list):
        return [{"tool": item} if isinstance(item, str) else item for item in value]
    return value


class ToolCalled(_Strict):
    """At least one call of `tool` (whose arguments match, when given)."""

    type: Literal["tool_called"]
    tool: str = Field(min_length=1)
    arguments: Arguments = Field(default_factory=dict)


class ToolNotCalled(_Strict):
    """No call of `tool` at all (or none with matching arguments, when given)."""

    type: Literal["tool_not_called"]
    tool: str = Field(min_length=1)
    arguments: Arguments = Field(default_factory=dict)


class ToolsInOrder(_Strict):
    """The declared calls appear in this order; other calls may come before, between, after."""

    type: Literal["tools_in_order"]
    tools: list[ToolStep] = Field(min_length=1)

    @field_validator("tools", mode="before")
    @classmethod
    def _bare_names(cls, value: Any) -> Any:
        return _steps_from_names(value)


class ToolsExact(_Strict):
    """The whole trajectory is exactly these calls, call for call (an empty list = no calls)."""

    type: Literal["tools_exact"]
    tools: list[ToolStep]

    @field_validator("tools", mode="before")
    @classmethod
    def _bare_names(cls, value: Any) -> Any:
        return _steps_from_names(value)


class MaxToolCalls(_Strict):
    """At most `max` tool calls (of `tool` only, when given) — catches tool loops."""

    type: Literal["max_tool_calls"]
    max: int = Field(ge=0)
    tool: str | None = None


class AnswerContains(_Strict):
    """The final answer contains `text` (case-insensitively when `ignore_case`)."""

    type: Literal["answer_contains"]
    text: str = Field(min_length=1)
    ignore_case: bool = False


class AnswerNotContains(_Strict):
    """The final answer does not contain `text` (case-insensitively when `ignore_case`)."""

    type: Literal["answer_not_contains"]
    text: str = Field(min_length=1)
    ignore_case: bool = False


class AnswerNumber(_Strict):
    """Some number in the final answer is within `tolerance` (relative) of `value`.

    "$14.2 million", "14,200,000" and "14.2M" all read as 14200000; "12.5%" reads as 12.5
    and as 0.125, so either way of writing the expected value works.
    """

    type: Literal["answer_number"]
    value: float
    tolerance: float = Field(default=0.01, ge=0)


class DocumentsIndexed(_Strict):
    """Scenario-level: every setup document was indexed into at least one chunk."""

    type: Literal["documents_indexed"]


Check = Annotated[
    ToolCalled | ToolNotCalled | ToolsInOrder | ToolsExact | MaxToolCalls
    | AnswerContains | AnswerNotContains | AnswerNumber | DocumentsIndexed,
    Field(discriminator="type"),
]

CHECK_TYPES: tuple[str, ...] = (
    "tool_called", "tool_not_called", "tools_in_order", "tools_exact", "max_tool_calls",
    "answer_contains", "answer_not_contains", "answer_number", "documents_indexed",
)
TOOL_CHECKS = frozenset({"tool_called", "tool_not_called", "tools_in_order", "tools_exact",
                         "max_tool_calls"})
ANSWER_CHECKS = frozenset({"answer_contains", "answer_not_contains", "answer_number"})
SCENARIO_ONLY_CHECKS = frozenset({"documents_indexed"})
"""Where a check may be declared: tool checks in a turn (that turn's calls) or at scenario
level (the whole trajectory); answer checks only in a turn; documents_indexed only at
scenario level."""
