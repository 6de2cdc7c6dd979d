"""The agent registry: which agent ids a sandbox knows, and which one each scenario runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.conversation.agents import (
    AgentError,
    AgentRegistry,
    discover_user_agents,
    needs_memory,
    parse_agent_map,
    read_agent_id,
)
from runner.scenarios import Scenario, load_suite

FIXTURE_AGENTS = Path(__file__).resolve().parents[1] / "fixtures" / "agents"

AGENT_PY = '''\
from gaia.agents.base.agent import Agent


class {cls}(Agent):
    AGENT_ID = {agent_id}
    AGENT_NAME = "Some agent"

    def _register_tools(self):
        pass
'''


def write_agent(root: Path, folder: str, agent_id: str = "", cls: str = "MyAgent") -> Path:
    path = root / folder / "agent.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(AGENT_PY.format(cls=cls, agent_id=repr(agent_id or folder)))
    return path


def scenario(agent_type: str | None = None, **fields: Any) -> Scenario:
    """A scenario as a user's YAML file gives it, with only what these tests vary."""
    data = {"id": f"s_{agent_type}", "category": "rag_quality", "persona": "casual_user",
            "description": "Questions about the travel policy.",
            "turns": [{"turn": 1, "objective": "Ask for the per diem."}], **fields}
    if agent_type is not None:
        data["agent_type"] = agent_type
    return Scenario.model_validate(data)


# -- reading agent folders without running them ----------------------------------------------


def test_the_fixture_agents_are_found_by_folder_and_agent_id() -> None:
    found = discover_user_agents([FIXTURE_AGENTS])
    assert found == {"docs_helper": FIXTURE_AGENTS / "docs_helper",
                     "plain_talker": FIXTURE_AGENTS / "plain_talker"}  # fmt: skip


def test_agent_id_is_read_statically_never_imported(tmp_path: Path) -> None:
    path = write_agent(tmp_path, "boom")
    # Running this file would raise; reading it must not.
    path.write_text("raise SystemExit('imported!')\n" + path.read_text())
    assert read_agent_id(path) == "boom"


def test_annotated_agent_id_is_read(tmp_path: Path) -> None:
    path = tmp_path / "typed" / "agent.py"
    path.parent.mkdir()
    path.write_text('class T:\n    AGENT_ID: str = "typed"\n    AGENT_NAME: str = "T"\n')
    assert read_agent_id(path) == "typed"


def test_folder_and_agent_id_must_agree(tmp_path: Path) -> None:
    write_agent(tmp_path, "reports", agent_id="report_writer")
    with pytest.raises(AgentError, match=r"AGENT_ID is 'report_writer' but the folder is 'reports'"):
        discover_user_agents([tmp_path])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("class A:\n    AGENT_NAME = 'a'\n", "no agent class with AGENT_ID"),
        ("class A:\n    AGENT_ID = make_id()\n    AGENT_NAME = 'a'\n", "string literal"),
        ("class A:\n    AGENT_ID = 'bad'\n", "no AGENT_NAME"),
        ("class A:\n    AGENT_ID = 'bad'\n    AGENT_NAME = 'a'\n\n"
         + "class B:\n    AGENT_ID = 'other'\n    AGENT_NAME = 'b'\n", "several agent classes"),
        ("class A(:\n", "not valid Python"),
    ],
)
def test_a_bad_agent_py_is_one_clear_error_naming_the_file(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "bad" / "agent.py"
    path.parent.mkdir()
    path.write_text(body)
    with pytest.raises(AgentError, match=message) as caught:
        discover_user_agents([tmp_path])
    assert str(path) in str(caught.value)


def test_folder_problems_say_the_fix(tmp_path: Path) -> None:
    with pytest.raises(AgentError, match="not a folder"):
        discover_user_agents([tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(AgentError, match="no <id>/agent.py inside"):
        discover_user_agents([tmp_path / "empty"])
    write_agent(tmp_path / "single", "solo")
    with pytest.raises(AgentError, match="holds agent.py itself; pass its parent"):
        discover_user_agents([tmp_path / "single" / "solo"])


def test_builtin_ids_and_duplicates_are_refused(tmp_path: Path) -> None:
    write_agent(tmp_path / "a", "chat")
    with pytest.raises(AgentError, match="built-in"):
        discover_user_agents([tmp_path / "a"])
    write_agent(tmp_path / "b", "twin")
    write_agent(tmp_path / "c", "twin")
    with pytest.raises(AgentError, match="'twin' is in two --agent-dir folders"):
        discover_user_agents([tmp_path / "b", tmp_path / "c"])


def test_folders_without_agent_py_and_dot_folders_are_skipped_like_gaia(tmp_path: Path) -> None:
    write_agent(tmp_path, "real")
    (tmp_path / "notes").mkdir()
    write_agent(tmp_path, ".backup")
    assert list(discover_user_agents([tmp_path])) == ["real"]


# -- resolving agent types -------------------------------------------------------------------


def test_registered_ids_are_builtins_ours_and_the_users() -> None:
    registry = AgentRegistry([FIXTURE_AGENTS])
    assert registry.ids == ["chat", "docs_helper", "email", "gaia", "plain_talker"]
    assert registry.source("docs_helper").folder == FIXTURE_AGENTS / "docs_helper"
    assert registry.source("gaia").kind == "reference"


def test_a_users_gaia_agent_takes_the_reference_agents_place(tmp_path: Path) -> None:
    write_agent(tmp_path, "gaia")
    assert AgentRegistry([tmp_path]).source("gaia").kind == "user"


def test_resolve_applies_map_then_agent_then_default() -> None:
    registry = AgentRegistry([FIXTURE_AGENTS], agent="plain_talker", agent_map={"doc": "docs_helper"})
    assert registry.resolve("doc") == "docs_helper"  # --agent-map
    assert registry.resolve(None) == "plain_talker"  # --agent, for scenarios without agent_type
    assert registry.resolve("chat") == "chat"  # a registered id as written
    assert AgentRegistry().resolve(None) == "gaia"  # the default


def test_a_map_may_replace_a_registered_id() -> None:
    assert AgentRegistry([FIXTURE_AGENTS], agent_map={"chat": "docs_helper"}).resolve("chat") == "docs_helper"


def test_unknown_agent_type_is_refused_naming_the_registered_ids_and_the_fix() -> None:
    registry = AgentRegistry([FIXTURE_AGENTS])
    with pytest.raises(AgentError, match=r"--agent-map doc=<id>"):
        registry.resolve("doc")
    problems = registry.problems([scenario("doc"), scenario(None), scenario("chat"), scenario("data")])
    assert len(problems) == 2
    assert problems[0].startswith("scenario s_doc: agent_type: 'doc'")
    assert "registered: chat, docs_helper, email, gaia, plain_talker" in problems[0]
    assert "--agent-map doc=<id>" in problems[0]
    assert "'data'" in problems[1]


def test_problems_name_the_scenario_file_and_line(tmp_path: Path) -> None:
    tree = tmp_path / "scenarios" / "rag_quality"
    tree.mkdir(parents=True)
    (tree / "doc_lookup.yaml").write_text(
        "id: doc_lookup\ncategory: rag_quality\npersona: casual_user\nagent_type: doc\n"
        "turns:\n  - turn: 1\n    objective: Ask anything.\n    user_message: Hello?\n"
        "    success_criteria: Answers.\n"
    )
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "manifest.json").write_text('{"documents": []}')
    suite = load_suite([tmp_path / "scenarios"], tmp_path / "corpus")
    [line] = AgentRegistry().problems(suite.scenarios)
    assert line.startswith(f"{tree / 'doc_lookup.yaml'}:4: agent_type: 'doc'")
    assert AgentRegistry(agent_map={"doc": "gaia"}).problems(suite.scenarios) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"agent": "nobody"}, r"--agent nobody: no agent 'nobody' is registered \(registered: chat, email, gaia\)"),
        ({"agent_map": {"doc": "nobody"}}, r"--agent-map doc=nobody: no agent 'nobody'"),
    ],
)
def test_flags_naming_unknown_agents_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(AgentError, match=message):
        AgentRegistry(**kwargs)


def test_agent_map_text_is_parsed_and_checked() -> None:
    assert parse_agent_map("doc=docs_helper, chat=chat") == {"doc": "docs_helper", "chat": "chat"}
    assert parse_agent_map(["doc=gaia", "data=gaia"]) == {"doc": "gaia", "data": "gaia"}
    with pytest.raises(AgentError, match="TYPE=ID"):
        parse_agent_map("doc")
    with pytest.raises(AgentError, match="maps 'doc' twice"):
        parse_agent_map("doc=a,doc=b")


def test_describe_records_where_each_agent_comes_from() -> None:
    described = AgentRegistry([FIXTURE_AGENTS], agent="docs_helper").describe()
    assert described["registered"]["chat"] == "builtin"
    assert described["registered"]["docs_helper"] == str(FIXTURE_AGENTS / "docs_helper")
    assert described["default"] == "docs_helper"


# -- memory ----------------------------------------------------------------------------------


def test_memory_scenarios_are_the_memory_categories_or_a_memory_setup() -> None:
    assert needs_memory(scenario(category="memory"))
    assert needs_memory(scenario(category="gaia_memory"))
    assert needs_memory(scenario(setup={"memory_clear": True}))
    # GAIA's rule is the key's presence: a seeded store, or a clear written as null, need memory.
    assert needs_memory(scenario(setup={"memory_seed": [{"fact": "The user's name is Ada."}]}))
    assert needs_memory(scenario(setup={"memory_clear": None}))
    assert not needs_memory(scenario(setup={"index_documents": []}))
    assert not needs_memory(scenario())


def test_an_attached_agent_ui_knows_exactly_the_ids_it_reports() -> None:
    registry = AgentRegistry.attached(["chat", "email", "reporter"], agent_map={"doc": "reporter"})
    assert registry.ids == ["chat", "email", "reporter"]  # no reference agent in someone's UI
    assert registry.resolve("doc") == "reporter"
    with pytest.raises(AgentError, match="'gaia'"):
        registry.resolve("gaia")
    [line] = registry.problems([scenario(None)])  # our default agent is not in their UI
    assert "not set, so it would run 'gaia'" in line and "--agent <id>" in line
    assert AgentRegistry.attached(["chat"], agent="chat").resolve(None) == "chat"


def test_listing_an_agent_ui_that_does_not_answer_is_one_clear_error() -> None:
    import asyncio
    import socket

    from runner.conversation.agents import attached_agent_ids

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(AgentError, match=r"cannot list the agents of the Agent UI at .*is it running"):
        asyncio.run(attached_agent_ids(f"http://127.0.0.1:{port}"))


def test_a_real_scenario_with_gaias_memory_clear_needs_memory() -> None:
    from runner.scenarios import Scenario

    base = {"id": "recall", "category": "context_retention", "persona": "casual_user",
            "turns": [{"turn": 1, "objective": "Ask.", "user_message": "Hi", "success_criteria": "Answers."}]}
    assert not needs_memory(Scenario.model_validate(base))
    assert needs_memory(Scenario.model_validate({**base, "setup": {"memory_clear": True}}))
    assert needs_memory(Scenario.model_validate({**base, "category": "memory"}))
