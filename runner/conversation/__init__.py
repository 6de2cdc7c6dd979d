"""Talking to the agent under test: its MCP tools, the simulated user, agent definitions.

The modules, bottom up: ``agents`` (which GAIA agent answers a scenario), ``simulator_config``
(what a simulator is), ``user_words`` and ``model_simulators`` and ``simulate`` (the simulated
user), ``prompts``, ``tool_calls`` and ``turn_speed`` (reading and answering a turn), and
``target`` (one scenario's conversation through GAIA's MCP tools).

Names are loaded on first use: any import of this package runs this file, and the judge, which
needs only ``SimulatorConfig``, should not load the sandbox layer that ``target`` stands on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner.system.lazy import lazy_names

if TYPE_CHECKING:
    from runner.conversation.agents import (
        AgentError,
        AgentRegistry,
        attached_agent_ids,
        needs_memory,
    )
    from runner.conversation.model_simulators import LLMSimulator, LocalSimulator
    from runner.conversation.prompts import permission_decision
    from runner.conversation.simulate import ScriptedSimulator, make_simulator, preflight
    from runner.conversation.simulator_config import (
        Simulator,
        SimulatorConfig,
        SimulatorError,
        SimulatorUnavailable,
    )
    from runner.conversation.target import (
        OpenedSession,
        TargetError,
        as_user_message,
        open_session,
        run_conversation,
    )
    from runner.conversation.tool_calls import parse_tool_detail, tool_calls_from_steps
    from runner.conversation.turn_speed import turn_performance_from_meter
    from runner.conversation.user_words import situation

# name → the module of this package that defines it
_HOMES = {
    "AgentError": "agents", "AgentRegistry": "agents", "attached_agent_ids": "agents",
    "needs_memory": "agents",
    "LLMSimulator": "model_simulators", "LocalSimulator": "model_simulators",
    "permission_decision": "prompts",
    "ScriptedSimulator": "simulate", "make_simulator": "simulate", "preflight": "simulate",
    "Simulator": "simulator_config", "SimulatorConfig": "simulator_config",
    "SimulatorError": "simulator_config", "SimulatorUnavailable": "simulator_config",
    "OpenedSession": "target", "TargetError": "target", "as_user_message": "target",
    "open_session": "target", "run_conversation": "target",
    "parse_tool_detail": "tool_calls", "tool_calls_from_steps": "tool_calls",
    "turn_performance_from_meter": "turn_speed",
    "situation": "user_words",
}  # fmt: skip


__getattr__ = lazy_names(__name__, _HOMES)


__all__ = [
    "AgentError",
    "AgentRegistry",
    "LLMSimulator",
    "LocalSimulator",
    "OpenedSession",
    "ScriptedSimulator",
    "Simulator",
    "SimulatorConfig",
    "SimulatorError",
    "SimulatorUnavailable",
    "TargetError",
    "as_user_message",
    "attached_agent_ids",
    "make_simulator",
    "needs_memory",
    "open_session",
    "parse_tool_detail",
    "permission_decision",
    "preflight",
    "run_conversation",
    "situation",
    "tool_calls_from_steps",
    "turn_performance_from_meter",
]
