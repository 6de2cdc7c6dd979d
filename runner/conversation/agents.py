"""Which GAIA agent answers each scenario: the agent ids a sandbox's Agent UI will know.

GAIA's repository scenarios say ``agent_type: doc|chat|data|file`` (0.23-era names), while an
amd-gaia 0.25.1 Agent UI knows only the agents it registers: its built-ins (``chat``,
``email``), trialbox's reference agent (``gaia``, images/agent-ui/agent/agent.py) and every
custom agent under ``$GAIA_HOME/agents/<id>/agent.py`` — which is where the sandboxes put the
user's ``--agent-dir`` folders. A scenario naming any other id would make every turn fail
inside GAIA (``Unknown agent_type 'doc'``), so the registry finds that before anything starts
and says how to map it (``--agent-map doc=<id>``).

User code is never imported on the host: an agent's id is read from its ``agent.py`` with
``ast`` (the class attribute ``AGENT_ID = "<id>"``), and the code itself only runs inside the
sandbox, under GAIA.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from runner.system.bounded_read import SOURCE_BYTES, BoundedReadError, read_bounded

#: Agent UI ids the amd-gaia 0.25.1 wheel registers by itself (DESIGN 2.8).
BUILTIN_AGENT_IDS: tuple[str, ...] = ("chat", "email")
#: trialbox's reference document agent, copied into every sandbox by the image's entrypoint.
REFERENCE_AGENT_ID = "gaia"
#: The agent a scenario without ``agent_type`` runs when no ``--agent`` is given.
DEFAULT_AGENT_ID = REFERENCE_AGENT_ID
#: GAIA's categories whose scenarios read or write long-term memory (gaia/eval/runner.py).
MEMORY_CATEGORIES = frozenset({"memory", "gaia_memory"})
#: Setup keys that clear or seed GAIA's memory store: such a scenario needs memory on too.
MEMORY_SETUP_KEYS = ("memory_clear", "memory_seed")

AgentKind = Literal["builtin", "reference", "user"]


class AgentError(ValueError):
    """An --agent-dir, --agent or --agent-map value cannot be used; the message says the fix."""


@dataclass(frozen=True)
class AgentSource:
    """One agent id the sandbox's Agent UI will register, and where it comes from."""

    id: str
    kind: AgentKind
    folder: Path | None = None  # the user's <dir>/<id> folder (kind "user" only)


def read_agent_id(agent_py: Path) -> str:
    """The ``AGENT_ID`` string of the agent class in ``agent_py``, read without running it.

    GAIA registers the first ``Agent`` subclass that has both ``AGENT_ID`` and ``AGENT_NAME``;
    we look for class-level assignments of both, and need ``AGENT_ID`` to be a string literal
    (anything computed could only be known by running the user's code).
    """
    try:
        tree = ast.parse(read_bounded(agent_py, SOURCE_BYTES), filename=str(agent_py))
    except BoundedReadError as exc:
        raise AgentError(f"{exc}; an agent is a regular Python file") from None
    except SyntaxError as exc:
        raise AgentError(f"{agent_py}:{exc.lineno}: not valid Python ({exc.msg}); "
                         "fix the file so GAIA can load it") from None
    except OSError as exc:
        raise AgentError(f"{agent_py}: cannot be read ({exc.strerror})") from None
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        values = _class_constants(node)
        if "AGENT_ID" not in values:
            continue
        value = values["AGENT_ID"]
        if not isinstance(value, str) or not value:
            raise AgentError(
                f"{agent_py}:{node.lineno}: class {node.name}: AGENT_ID must be a non-empty "
                "string literal (e.g. AGENT_ID = \"my_agent\") so trialbox can read it "
                "without running your code")
        if "AGENT_NAME" not in values:
            raise AgentError(
                f"{agent_py}:{node.lineno}: class {node.name} has AGENT_ID but no AGENT_NAME; "
                "GAIA only registers an agent class that has both — add AGENT_NAME = \"...\"")
        found.setdefault(value, node.lineno)
    if not found:
        raise AgentError(
            f"{agent_py}: no agent class with AGENT_ID found; GAIA loads the Agent subclass "
            "that sets AGENT_ID = \"<folder name>\" and AGENT_NAME = \"...\"")
    if len(found) > 1:
        listed = ", ".join(f"'{i}' (line {line})" for i, line in found.items())
        raise AgentError(f"{agent_py}: several agent classes set AGENT_ID ({listed}); GAIA "
                         "registers only one per folder — keep one agent per agent.py")
    return next(iter(found))


def _class_constants(node: ast.ClassDef) -> dict[str, Any]:
    """Class-body assignments ``NAME = <literal>`` (a non-literal value maps to None)."""
    values: dict[str, Any] = {}
    for statement in node.body:
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets, value = [statement.target], statement.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                values[target.id] = value.value if isinstance(value, ast.Constant) else None
    return values


def discover_user_agents(agent_dirs: Sequence[Path]) -> dict[str, Path]:
    """``{agent id: <dir>/<id> folder}`` for every agent in the user's ``--agent-dir`` folders.

    Each folder holds one sub-folder per agent with an ``agent.py`` in it — the layout of
    GAIA's own ``~/.gaia/agents``. Sub-folders without ``agent.py`` are skipped, as GAIA does.
    """
    agents: dict[str, Path] = {}
    for given in agent_dirs:
        folder = Path(given).expanduser().resolve()
        if not folder.is_dir():
            raise AgentError(f"--agent-dir {given}: not a folder; pass a folder that holds "
                             "<id>/agent.py sub-folders (like ~/.gaia/agents)")
        if (folder / "agent.py").is_file():
            raise AgentError(f"--agent-dir {given}: holds agent.py itself; pass its parent "
                             f"folder ({folder.parent}) — GAIA loads <dir>/<id>/agent.py")
        found = 0
        for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
            agent_py = sub / "agent.py"
            if not agent_py.is_file():
                continue
            agent_id = read_agent_id(agent_py)
            if agent_id != sub.name:
                raise AgentError(
                    f"{agent_py}: AGENT_ID is '{agent_id}' but the folder is '{sub.name}'; "
                    f"rename the folder to {agent_id}/ or set AGENT_ID = \"{sub.name}\" "
                    "(trialbox names agents by folder, GAIA by AGENT_ID: they must agree)")
            if agent_id in BUILTIN_AGENT_IDS:
                raise AgentError(
                    f"{agent_py}: AGENT_ID '{agent_id}' is one of GAIA's built-in agents "
                    f"({', '.join(BUILTIN_AGENT_IDS)}), which GAIA will not let a custom agent "
                    "replace; choose another id (folder and AGENT_ID)")
            if agent_id in agents:
                raise AgentError(f"agent '{agent_id}' is in two --agent-dir folders: "
                                 f"{agents[agent_id]} and {sub}; keep one")
            agents[agent_id] = sub
            found += 1
        if not found:
            raise AgentError(f"--agent-dir {given}: no <id>/agent.py inside; each agent needs "
                             "its own sub-folder named after its AGENT_ID")
    return agents


def parse_agent_map(values: str | Iterable[str]) -> dict[str, str]:
    """``"doc=docs_helper,chat=chat"`` (or several such strings) → ``{"doc": "docs_helper", ...}``."""
    items = [values] if isinstance(values, str) else list(values)
    mapping: dict[str, str] = {}
    for item in items:
        for pair in (p.strip() for p in item.split(",")):
            if not pair:
                continue
            agent_type, sep, agent_id = (s.strip() for s in pair.partition("="))
            if not sep or not agent_type or not agent_id:
                raise AgentError(f"--agent-map {pair!r}: write TYPE=ID pairs separated by "
                                 "commas, e.g. --agent-map doc=gaia,data=my_agent")
            if mapping.get(agent_type, agent_id) != agent_id:
                raise AgentError(f"--agent-map maps '{agent_type}' twice "
                                 f"({mapping[agent_type]} and {agent_id}); keep one")
            mapping[agent_type] = agent_id
    return mapping


def needs_memory(scenario: Any) -> bool:
    """True when the scenario reads or writes GAIA's long-term memory (GAIA's own rule:
    a memory category, or a setup that clears or seeds the store)."""
    if getattr(scenario, "category", None) in MEMORY_CATEGORIES:
        return True
    setup = getattr(scenario, "setup", None)
    if setup is None:
        return False
    # GAIA asks whether the key is present (`"memory_clear" in setup`), so a null value counts.
    written = set(getattr(setup, "model_fields_set", set())) | set(getattr(setup, "model_extra", None) or {})
    return any(key in written for key in MEMORY_SETUP_KEYS)


class AgentRegistry:
    """The agent ids a sandbox will register, and the rule that picks one per scenario.

    ``resolve`` applies ``--agent-map`` to a scenario's ``agent_type``, then ``--agent`` to a
    scenario without one, then the default (``gaia``). ``problems`` lists, before anything
    starts, every scenario whose agent the Agent UI would not know.
    """

    def __init__(
        self,
        agent_dirs: Sequence[Path] = (),
        agent: str | None = None,
        agent_map: Mapping[str, str] | None = None,
        builtins: Sequence[str] = BUILTIN_AGENT_IDS,
        reference: bool = True,
    ) -> None:
        """``builtins``: the ids the Agent UI registers by itself; ``reference``: whether our
        reference agent is there too (every sandbox trialbox creates has it)."""
        self.agent_dirs = [Path(d) for d in agent_dirs]
        self.user_agents = discover_user_agents(self.agent_dirs)
        self.sources: dict[str, AgentSource] = {i: AgentSource(i, "builtin") for i in builtins}
        # A user's own "gaia" agent takes the reference agent's place (the entrypoint does
        # the same inside the sandbox): the user's folder wins, visibly, in `source()`.
        if reference:
            self.sources[REFERENCE_AGENT_ID] = AgentSource(REFERENCE_AGENT_ID, "reference")
        for agent_id, folder in self.user_agents.items():
            self.sources[agent_id] = AgentSource(agent_id, "user", folder)
        self.agent = agent
        self.agent_map = dict(agent_map or {})
        if agent is not None and agent not in self.sources:
            raise AgentError(f"--agent {agent}: {self._unknown(agent)}")
        for agent_type, agent_id in self.agent_map.items():
            if agent_id not in self.sources:
                raise AgentError(f"--agent-map {agent_type}={agent_id}: {self._unknown(agent_id)}")

    @classmethod
    def attached(
        cls, ids: Iterable[str], agent: str | None = None, agent_map: Mapping[str, str] | None = None
    ) -> AgentRegistry:
        """The registry of an Agent UI someone else runs (``--target-url``): exactly the ids it
        reports (``attached_agent_ids``); its agents are its owner's, so no --agent-dir."""
        return cls(agent=agent, agent_map=agent_map, builtins=sorted(set(ids)), reference=False)

    @property
    def ids(self) -> list[str]:
        """Every registered agent id, sorted."""
        return sorted(self.sources)

    def source(self, agent_id: str) -> AgentSource:
        return self.sources[agent_id]

    def resolve(self, agent_type: str | None) -> str:
        """The agent id a scenario with this ``agent_type`` runs; AgentError if none is known."""
        if agent_type is not None and agent_type in self.agent_map:
            return self.agent_map[agent_type]  # checked against the registry in __init__
        if agent_type is None:
            chosen = self.agent or DEFAULT_AGENT_ID
            if chosen not in self.sources:  # only an attached Agent UI may lack our default
                raise AgentError(f"no agent_type, so '{chosen}' would run: {self._unknown(chosen)}; "
                                 "or choose one with --agent <id>")
            return chosen
        if agent_type in self.sources:
            return agent_type
        raise AgentError(f"agent_type '{agent_type}': {self._unknown(agent_type)}; or map it: "
                         f"--agent-map {agent_type}=<id>")

    def problems(self, scenarios: Iterable[Any]) -> list[str]:
        """One line per scenario whose agent no registered agent id answers, in given order."""
        lines = []
        registered = ", ".join(self.ids)
        for scenario in scenarios:
            agent_type = getattr(scenario, "agent_type", None)
            try:
                self.resolve(agent_type)
            except AgentError:
                where = _where(scenario)
                if agent_type is None:
                    lines.append(
                        f"{where} agent_type: not set, so it would run '{DEFAULT_AGENT_ID}', which "
                        f"this Agent UI does not register (registered: {registered}) — choose "
                        "one for such scenarios with --agent <id>")
                    continue
                lines.append(
                    f"{where} agent_type: '{agent_type}' is not an agent this Agent UI registers "
                    f"(registered: {registered}) — map it to one with "
                    f"--agent-map {agent_type}=<id>, or add your agent with --agent-dir DIR "
                    f"(DIR/{agent_type}/agent.py)")
        return lines

    def describe(self) -> dict[str, Any]:
        """What the scorecard records about the agents of a run."""
        return {
            "registered": {i: (str(s.folder) if s.folder else s.kind) for i, s in
                           sorted(self.sources.items())},
            "agent": self.agent,
            "agent_map": dict(self.agent_map),
            "default": self.agent or DEFAULT_AGENT_ID,
        }

    def _unknown(self, agent_id: str) -> str:
        return (f"no agent '{agent_id}' is registered (registered: {', '.join(self.ids)}); "
                f"add its folder with --agent-dir DIR (DIR/{agent_id}/agent.py)")


async def attached_agent_ids(ui_url: str) -> list[str]:
    """The agent ids a running Agent UI accepts: those it lists (``GET /api/agents``) plus the
    built-ins it accepts without listing them (0.25.1 lists only loaded agents, yet takes
    ``chat`` and ``email``)."""
    import httpx

    try:
        async with httpx.AsyncClient(timeout=10) as http:
            reply = await http.get(f"{ui_url.rstrip('/')}/api/agents")
        reply.raise_for_status()
        listed = [str(a["id"]) for a in reply.json().get("agents", []) if a.get("id")]
    except (httpx.HTTPError, ValueError, KeyError, AttributeError) as exc:
        raise AgentError(f"cannot list the agents of the Agent UI at {ui_url} "
                         f"({type(exc).__name__}: {exc}); is it running?") from exc
    return sorted(set(listed) | set(BUILTIN_AGENT_IDS))


def _where(scenario: Any) -> str:
    """``file:line:`` of the scenario's agent_type when it came from a file, else its id."""
    source = getattr(scenario, "source_file", None)
    if source is None:
        return f"scenario {getattr(scenario, 'id', '?')}:"
    line_of = getattr(scenario, "line_of", None)
    line = line_of("agent_type") if callable(line_of) else None
    return f"{source}:{line}:" if line else f"{source}:"
