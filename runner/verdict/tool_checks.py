"""The tool-call checks: a tool called or not, tools in order or exactly, at most N calls."""

from __future__ import annotations

import json
from typing import Any

# The module, not its names: the check models' list is spelt once, in runner/scenarios.
from runner import scenarios
from runner.records.evidence import CallEvidence, first_difference, in_order_matches
from runner.verdict.check_context import CheckContext, CheckDecider

Step = scenarios.ToolStep | scenarios.ToolCalled | scenarios.ToolNotCalled
"""What a call is matched against: a tool name and conditions on its arguments."""

_MISSING = object()


def argument_matches(matcher: scenarios.ArgumentMatcher, value: Any) -> bool:
    if value is _MISSING:
        return False
    if "equals" in matcher.model_fields_set:
        return bool(value == matcher.equals)
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    # RE2, not `re`: a user's pattern must not backtrack for seconds on the event loop.
    return scenarios.user_regex_search(matcher.matches or "", text)


def call_matches(step: Step, call: CallEvidence) -> bool:
    """The call is of the step's tool and every argument condition holds."""
    return call.name == step.tool and all(
        argument_matches(matcher, call.arguments.get(key, _MISSING))
        for key, matcher in step.arguments.items())


def call_does_step(step: scenarios.ToolStep, call: CallEvidence) -> bool:
    """The call fills a trajectory's step: it matches, and it succeeded unless the step expects
    the error (as `tool_called`: a search that errored has not searched)."""
    return call_matches(step, call) and (step.may_fail or not call.failed)


def _failed_lookalikes(step: scenarios.ToolStep, calls: list[CallEvidence]) -> str:
    """Why a step found no call when calls of it failed: said in the failure line, with the fix."""
    failed = [call for call in calls if call.failed and call_matches(step, call)]
    if not failed:
        return ""
    errors = "; ".join(f"call {call.position}: {call.error or 'failed'}" for call in failed[:3])
    return (f" ({len(failed)} matching call(s) failed: {errors} — set may_fail: true on the step "
            "if the scenario expects the error)")


def _describe_step(step: Step) -> str:
    if not step.arguments:
        return step.tool
    conditions = ", ".join(
        f"{key}={json.dumps(m.equals)}" if "equals" in m.model_fields_set
        else f"{key}~/{m.matches}/" for key, m in step.arguments.items())
    return f"{step.tool}({conditions})"


def _trajectory(calls: list[CallEvidence]) -> str:
    if not calls:
        return "no tool calls"
    return "[" + ", ".join(call.describe(width=60) for call in calls) + "]"


def _tool_called(check: scenarios.ToolCalled, context: CheckContext) -> tuple[bool, str]:
    matching = [call for call in context.calls if call_matches(check, call)]
    # A call that errored did not do the tool's work: an agent whose every search failed has
    # not searched, unless the scenario is about the failure itself.
    if any(check.may_fail or not call.failed for call in matching):
        return True, ""
    if matching:
        errors = "; ".join(f"call {call.position}: {call.error or 'failed'}" for call in matching)
        return False, (f"expected a call of {_describe_step(check)} that succeeded; "
                       f"{len(matching)} call(s) failed ({errors}) — set may_fail: true if "
                       "the scenario expects the error")
    same_tool = [call for call in context.calls if call.name == check.tool]
    if same_tool:
        got = (f"{len(same_tool)} call(s) of {check.tool}, none with matching arguments: "
               + _trajectory(same_tool))
    else:
        got = _trajectory(context.calls)
    return False, f"expected a call of {_describe_step(check)}; got {got}"


def _tool_not_called(check: scenarios.ToolNotCalled, context: CheckContext) -> tuple[bool, str]:
    offending = [call for call in context.calls if call_matches(check, call)]
    if not offending:
        return True, ""
    where = ", ".join(f"call {call.position} of {len(context.calls)}"
                      + (f" (turn {call.turn})" if context.turn is None else "")
                      + f": {call.describe()}" for call in offending)
    return False, f"expected no call of {_describe_step(check)}; got {where}"


def _tools_in_order(check: scenarios.ToolsInOrder, context: CheckContext) -> tuple[bool, str]:
    found = in_order_matches(check.tools, context.calls, call_does_step)
    if len(found) == len(check.tools):
        return True, ""
    expected = ", ".join(_describe_step(step) for step in check.tools)
    matched = "; ".join(f"{_describe_step(step)} at call {context.calls[index].position}"
                        for step, index in zip(check.tools, found, strict=False))
    step = check.tools[len(found)]
    after = f" after call {context.calls[found[-1]].position}" if found else ""
    rest = context.calls[found[-1] + 1:] if found else context.calls
    progress = f"matched {matched}; " if matched else ""
    failed = _failed_lookalikes(step, rest)
    return False, (f"expected in this order [{expected}]; {progress}no {_describe_step(step)}"
                   f"{' that succeeded' if failed else ''}{after}{failed}; "
                   f"got {_trajectory(context.calls)}")


def _tools_exact(check: scenarios.ToolsExact, context: CheckContext) -> tuple[bool, str]:
    index = first_difference(check.tools, context.calls, call_does_step)
    if index is None:
        return True, ""
    want = (_describe_step(check.tools[index]) if index < len(check.tools)
            else "no further call")
    got = context.calls[index].describe() if index < len(context.calls) else "no further call"
    if index < len(check.tools) and index < len(context.calls):
        got += _failed_lookalikes(check.tools[index], [context.calls[index]])
    expected = ", ".join(_describe_step(step) for step in check.tools)
    return False, (f"expected exactly [{expected}]; got {_trajectory(context.calls)} — "
                   f"first difference at call {index + 1}: expected {want}, got {got}")


def _max_tool_calls(check: scenarios.MaxToolCalls, context: CheckContext) -> tuple[bool, str]:
    counted = [call for call in context.calls if check.tool in (None, call.name)]
    if len(counted) <= check.max:
        return True, ""
    which = f" of {check.tool}" if check.tool else ""
    return False, (f"expected at most {check.max} tool call(s){which}; got {len(counted)}: "
                   f"{_trajectory(counted)}")


TOOL_DECIDERS: tuple[CheckDecider, ...] = (
    _tool_called, _tool_not_called, _tools_in_order, _tools_exact, _max_tool_calls,
)
