"""Memory scenarios' set-up and a turn in a new session, for real: a LocalBackend memory
sandbox (GAIA's Agent UI and MCP bridge from .venv-gaia) and the llm-cpu server.

- `setup.memory_clear` / `setup.memory_seed` go through GAIA's admin MCP tools and the rows
  land in the sandbox's memory store (read back with GAIA's own `memory_list`);
- a seed GAIA refuses (an item without content) is the target's failure (TargetError naming
  memory_seed), before any turn;
- a turn with `new_session: true` runs in a second chat session of the same Agent UI, which
  sees none of the first session's messages.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runner.conversation.target import TargetError, run_conversation
from runner.records.transcript import TurnRecord, UserMessage
from runner.sandbox import LocalBackend, Sandbox
from runner.scenarios import Scenario

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def memory_scenario(seed: list[Any]) -> Scenario:
    return Scenario.model_validate({
        "id": "memory_two_sessions", "category": "memory", "persona": "casual_user",
        "setup": {"index_documents": [], "memory_clear": True, "memory_seed": seed},
        "turns": [
            {"turn": 1, "objective": "Say hello.", "user_message": "Hello, say hi back in one word.",
             "success_criteria": "Greets."},
            {"turn": 2, "new_session": True, "objective": "Ask in a new session.",
             "user_message": "Which airport do I fly from?", "success_criteria": "Bergen."},
        ],
    })


class Verbatim:
    async def user_message(self, scenario: Scenario, turn: Any, history: list[TurnRecord]) -> UserMessage:
        return UserMessage(text=turn.user_message, source="verbatim")


async def mcp_call(box: Sandbox, tool: str, **arguments: Any) -> Any:
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    async with Client(StreamableHttpTransport(box.mcp_url, headers=box.mcp_headers)) as client:
        result = await client.call_tool(tool, arguments)
    data = result.structured_content or {}
    return data.get("result", data) if set(data) == {"result"} else data


def contents(listing: Any) -> list[str]:
    """The `content` of every row a memory_list reply holds (GAIA answers a list or {items})."""
    rows = listing.get("items", listing.get("knowledge", [])) if isinstance(listing, dict) else listing
    return sorted(str(row.get("content")) for row in rows)


def test_memory_is_seeded_cleared_and_a_new_session_starts_fresh(
    llm_url: str, gaia_python: Path, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "documents").mkdir(parents=True)
    backend = LocalBackend(llm_url, corpus, gaia_python=gaia_python)
    seed = ["The user's home airport is Bergen.",
            {"content": "The user prefers aisle seats.", "category": "preference"}]

    async def run() -> tuple[Any, ...]:
        async with backend.open("memory_two_sessions", memory=True) as box:
            # A stale row from "an earlier scenario": memory_clear must remove it.
            await mcp_call(box, "memory_seed", items=[{"content": "Stale row from before."}])
            with pytest.raises(TargetError, match="memory_seed failed for memory_two_sessions"):
                await run_conversation(box, memory_scenario([{"category": "fact"}]), Verbatim(),
                                       device="cpu", turn_timeout_s=240)
            transcript = await run_conversation(box, memory_scenario(seed), Verbatim(),
                                                device="cpu", turn_timeout_s=240)
            rows = await mcp_call(box, "memory_list", limit=50)
            await box.collect(tmp_path / "artifacts")
            return transcript, rows

    transcript, rows = asyncio.run(run())

    assert contents(rows) == ["The user prefers aisle seats.", "The user's home airport is Bergen."]
    assert [t.error for t in transcript.turns] == [None, None]
    with sqlite3.connect(tmp_path / "artifacts" / "gaia_chat.db") as db:
        by_session = db.execute(
            "SELECT session_id, COUNT(*) FROM messages GROUP BY session_id").fetchall()
        titles = dict(db.execute("SELECT id, title FROM sessions").fetchall())
    counts = {titles[sid]: n for sid, n in by_session}
    # Each session holds only its own turn (user + assistant); the first is the transcript's.
    assert counts == {"trialbox: memory_two_sessions": 2,
                      "trialbox: memory_two_sessions (new session)": 2}
    assert titles[transcript.session_id] == "trialbox: memory_two_sessions"
