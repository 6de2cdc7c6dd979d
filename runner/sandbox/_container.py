"""A sandbox container's layout (image, ports, mounts, exit codes) and how it ended, in words."""

from __future__ import annotations

from typing import Any

from docker.errors import NotFound
from docker.models.containers import Container

AGENT_UI_IMAGE = "trialbox/agent-ui:dev"
UI_PORT = 4200
MCP_PORT = 8765
#: The container's exit code when its bridge ended first, and what starts each of the bridge's
#: lines in the container's log (images/agent-ui/entrypoint.py BRIDGE_ENDED_EXIT and
#: BRIDGE_PREFIX; a unit test keeps them equal).
BRIDGE_ENDED_EXIT = 70
BRIDGE_PREFIX = b"[mcp] "
LLM_PORT = 13305
CORPUS_MOUNT = "/corpus"
# Where the user's --agent-dir folders are mounted (read-only), one numbered folder each; the
# entrypoint links their <id> sub-folders into $GAIA_HOME/agents, where GAIA loads agents.
AGENT_DIRS_MOUNT = "/opt/trialbox/agent-dirs"
# Where the agent-ui image keeps GAIA's state; the chat DB is collected from here.
GAIA_HOME = "/home/gaia/.gaia"
# GAIA's bridge accepts a non-loopback bind only with a bearer token of 32+ characters.
MCP_TOKEN_ENV = "GAIA_AGENT_UI_MCP_TOKEN"


def state_of(container: Container) -> str | None:
    """None while the container runs, else what happened to it, in words."""
    try:
        container.reload()
    except NotFound:
        return "was removed"
    return described(container.status, container.attrs.get("State", {}))


def described(status: str, state: dict[str, Any]) -> str | None:
    """A container's status and `docker inspect`'s State, in words; None while it runs.

    Only an ended container has an exit code to tell: a paused one reads ExitCode 0 and is
    neither finished nor well."""
    if status == "running":
        return None
    if status == "paused":
        return "is paused (frozen by `docker pause`: it gets no CPU until `docker unpause`)"
    killed = " (killed: out of memory)" if state.get("OOMKilled") else ""
    ended = f" (exit code {state.get('ExitCode')})" if status in ("exited", "dead") else ""
    return f"is {status}{ended}{killed}"


def death_of(ui: Container) -> str | None:
    """How the sandbox's container ended, in words; None while it runs."""
    state = state_of(ui)
    if state is None:
        return None
    return f"the Agent UI container {ui.name} {state}{whose_end(ui)} mid-scenario"


def whose_end(container: Container) -> str:
    """Which of its two processes ended the container, when its exit code says so."""
    if container.attrs.get("State", {}).get("ExitCode") == BRIDGE_ENDED_EXIT:
        return ": its MCP bridge ended, and the Agent UI with it"
    return ""
