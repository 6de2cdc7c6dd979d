"""The vocabulary of exact checks a scenario may declare (verified by code, never by a model).

The models live here, beside the scenario models, because a scenario file declares them and
the scenario package is the leftmost module of the one-way flow (design/architecture.md):
`runner/verdict/checks.py` imports these models and evaluates them, never the other way round.

Unlike scenario keys (where an unknown key only warns, for GAIA compatibility), a check is
our own vocabulary: a misspelt argument such as `tolerence` would silently weaken a check,
so unknown keys inside a check are errors.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    field_validator,
    model_validator,
)

from runner.scenarios._regex import compile_user_regex


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


Placement = Literal["anywhere", "turn", "scenario"]
"""Where a check may be declared: "anywhere" (in a turn it sees that turn's tool calls, at
scenario level the whole trajectory), only in a "turn" (it reads that turn's answer), or only
at "scenario" level (it reads the scenario's setup)."""


class _CheckModel(_Strict):
    placement: ClassVar[Placement] = "anywhere"


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
            compile_user_regex(pattern)  # RegexError (a ValueError): refused at validate time
        return pattern


Arguments = dict[str, ArgumentMatcher]


class ToolStep(_Strict):
    """One expected tool call in a trajectory: a tool name and optional argument conditions.

    In YAML a step may be a bare tool name; it then matches any call of that tool.
    """

    tool: str = Field(min_length=1)
    arguments: Arguments = Field(default_factory=dict)
    may_fail: bool = Field(False, description=(
        "the scenario expects this call to fail (a missing file, a refused path): a failed call "
        "fills the step too; by default only a call that succeeded does"))


def _steps_from_names(value: Any) -> Any:
    if isinstance(value, list):
        return [{"tool": item} if isinstance(item, str) else item for item in value]
    return value


Steps = Annotated[list[ToolStep], BeforeValidator(_steps_from_names)]
"""A trajectory of expected calls; in YAML a step may be a bare tool name."""


class ToolCalled(_CheckModel):
    """At least one call of `tool` that succeeded (whose arguments match, when given)."""

    type: Literal["tool_called"]
    tool: str = Field(min_length=1)
    arguments: Arguments = Field(default_factory=dict)
    may_fail: bool = Field(False, description=(
        "the scenario expects the call to fail (a missing file, a refused path): a failed call "
        "counts too; by default only a call that succeeded does"))


class ToolNotCalled(_CheckModel):
    """No call of `tool` at all (or none with matching arguments, when given)."""

    type: Literal["tool_not_called"]
    tool: str = Field(min_length=1)
    arguments: Arguments = Field(default_factory=dict)


class ToolsInOrder(_CheckModel):
    """The declared calls appear in this order; other calls may come before, between, after."""

    type: Literal["tools_in_order"]
    tools: Steps = Field(min_length=1)


class ToolsExact(_CheckModel):
    """The whole trajectory is exactly these calls, call for call (an empty list = no calls)."""

    type: Literal["tools_exact"]
    tools: Steps


class MaxToolCalls(_CheckModel):
    """At most `max` tool calls (of `tool` only, when given) — catches tool loops."""

    type: Literal["max_tool_calls"]
    max: StrictInt = Field(ge=0)
    tool: str | None = None


class AnswerContains(_CheckModel):
    """The final answer contains `text` (case-insensitively when `ignore_case`)."""

    type: Literal["answer_contains"]
    placement: ClassVar[Placement] = "turn"
    text: str = Field(min_length=1)
    ignore_case: StrictBool = False


class AnswerNotContains(_CheckModel):
    """The final answer does not contain `text` (case-insensitively when `ignore_case`)."""

    type: Literal["answer_not_contains"]
    placement: ClassVar[Placement] = "turn"
    text: str = Field(min_length=1)
    ignore_case: StrictBool = False


class AnswerNumber(_CheckModel):
    """Some number in the final answer is within `tolerance` (relative) of `value`.

    "$14.2 million", "14,200,000" and "14.2M" all read as 14200000; "12.5%" reads as 12.5
    and as 0.125, so either way of writing the expected value works.
    """

    type: Literal["answer_number"]
    placement: ClassVar[Placement] = "turn"
    # Finite: `.nan` matches nothing ever and `.inf` tolerance passes any number.
    value: StrictFloat = Field(allow_inf_nan=False, description="The expected number.")
    tolerance: StrictFloat = Field(default=0.01, ge=0, allow_inf_nan=False,
                             description="Relative tolerance, finite and ≥ 0 (0.01 = 1 %).")


class DocumentsIndexed(_CheckModel):
    """Scenario-level: every setup document was indexed into at least one chunk."""

    type: Literal["documents_indexed"]
    placement: ClassVar[Placement] = "scenario"


Check = Annotated[
    ToolCalled | ToolNotCalled | ToolsInOrder | ToolsExact | MaxToolCalls
    | AnswerContains | AnswerNotContains | AnswerNumber | DocumentsIndexed,
    Field(discriminator="type"),
]



# Everything below is derived from the union above, so a new check type is declared once.
def _type_name(model: type[BaseModel]) -> str:
    (name,) = typing.get_args(model.model_fields["type"].annotation)  # Literal["…"]'s one value
    return str(name)


CHECK_MODELS: Mapping[str, type[_CheckModel]] = MappingProxyType({
    _type_name(model): model for model in typing.get_args(typing.get_args(Check)[0])
})
"""Check type name (the YAML `type:`) → its model, in the union's order."""

CHECK_TYPES: tuple[str, ...] = tuple(CHECK_MODELS)
