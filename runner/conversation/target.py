"""Drive one scenario's conversation with the GAIA Agent UI through GAIA's own MCP tools.

Everything the agent under test does is reached the way GAIA's own eval reaches it — through
its Agent UI MCP bridge: ``system_status`` → ``create_session`` → ``index_document`` per setup
document → per turn ``start_message`` + ``wait_for_turn`` (answering permission prompts) →
``turn_view`` + ``turn_metrics``. The one step GAIA's MCP tools lack is the session's device:
a session is created for ``gpu`` and, on a host without one, every turn fails until the
session is switched through the Agent UI's own REST route (``PUT /api/sessions/{id}``), which
is what the browser's device picker does. We do that openly, and record the device used.

"The agent answered badly" is never an exception here: the transcript records what happened
(including per-turn infrastructure errors) and later stages judge it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from runner.conversation.agents import DEFAULT_AGENT_ID
from runner.conversation.indexing_progress import IndexingWatch, embedded_since
from runner.conversation.prompts import permission_decision, question_reply
from runner.conversation.simulator_config import Simulator
from runner.conversation.tool_calls import tool_calls_from_steps
from runner.conversation.turn_speed import turn_performance
from runner.records.transcript import (
    IndexedDocument,
    SetupTimings,
    Transcript,
    TurnPerformance,
    TurnRecord,
    UserMessage,
)
from runner.sandbox import Sandbox, own_meter_records

#: Longest a single wait_for_turn call may block (GAIA caps it at 10 minutes).
WAIT_SLICE_MS = 60_000
#: Default ceiling for one turn; the engine passes the scenario's own budget.
DEFAULT_TURN_TIMEOUT_S = 600.0
#: Longest a background indexing job (files > 5 MB) is polled before giving up.
INDEX_TIMEOUT_S = 900.0


class TargetError(RuntimeError):
    """The conversation could not start (session creation failed): an infrastructure failure."""


@dataclass(frozen=True)
class OpenedSession:
    """A scenario's empty chat session, made before its conversation starts (the warm pool
    makes it while the sandbox waits for its job): what ``system_status`` said, the session as
    ``create_session`` returned it, and what it was made for. The agent sees exactly the
    session the conversation would have made itself — the same title, agent and device, no
    history — only earlier, so the conversation uses it only when all three match."""

    status: dict[str, Any]
    session: dict[str, Any]
    title: str
    agent_id: str
    device: str


def session_agent(scenario: Any, agent_id: str | None) -> str:
    """The GAIA agent a scenario's session runs: the resolved id, else the scenario's own
    ``agent_type`` as written, else our reference agent."""
    return agent_id or getattr(scenario, "agent_type", None) or DEFAULT_AGENT_ID


async def open_session(box: Sandbox, scenario: Any, device: str, agent_id: str | None = None) -> OpenedSession:
    """Make the scenario's empty session in ``box`` ahead of its conversation (its own
    connection to the bridge): ``run_conversation(session=...)`` then starts at indexing."""
    from fastmcp import Client  # imported late: fastmcp is slow to import
    from fastmcp.client.transports import StreamableHttpTransport

    transport = StreamableHttpTransport(box.mcp_url, headers=dict(box.mcp_headers))
    async with Client(transport) as client:
        return await _open(_Gaia(client), box, scenario, session_agent(scenario, agent_id), device)


async def _open(gaia: _Gaia, box: Sandbox, scenario: Any, agent_id: str, device: str) -> OpenedSession:
    """``system_status`` → ``create_session`` → the session's device switched."""
    status = await gaia.call("system_status")
    title = f"trialbox: {scenario.id}"
    session = await gaia.call("create_session", title=title, agent_type=agent_id)
    if _failed(session) or not session.get("id"):
        raise TargetError(
            f"create_session (agent {agent_id!r}) failed for {scenario.id}: {_detail(session)}"
        )
    switched = await _switch_device(box, session, device)
    return OpenedSession(status=status, session=session, title=title, agent_id=agent_id, device=switched)


async def run_conversation(
    box: Sandbox,
    scenario: Any,
    simulator: Simulator,
    device: str,
    turn_timeout_s: float = DEFAULT_TURN_TIMEOUT_S,
    agent_id: str | None = None,
    keep: Callable[[Transcript], None] | None = None,
    session: OpenedSession | None = None,
    activity: Callable[[str], None] | None = None,
) -> Transcript:
    """Run ``scenario`` against the Agent UI in ``box`` and return what happened, turn by turn.

    ``keep`` is handed the transcript as soon as the session exists, and it grows in place turn
    by turn: when the conversation is cut short (timeout, dead container, any error) the caller
    still has the turns done so far.

    ``agent_id`` is the GAIA agent the session runs, as ``AgentRegistry.resolve`` picked it
    from the scenario's ``agent_type``; without one, the scenario's own ``agent_type`` (or our
    reference agent) is sent as written.

    ``session``: the scenario's session made ahead (``open_session``), used when it was made
    for this scenario, agent and device; otherwise the conversation makes its own.

    ``activity`` is told what the set-up is doing while it takes long (a document indexing:
    its chunks embedded so far), and "" when that is over.
    """
    from fastmcp import Client  # imported late: fastmcp is slow to import
    from fastmcp.client.transports import StreamableHttpTransport

    connecting = time.perf_counter()
    transport = StreamableHttpTransport(box.mcp_url, headers=dict(box.mcp_headers))
    async with Client(transport) as client:
        gaia = _Gaia(client)
        agent_id = session_agent(scenario, agent_id)
        made_for = (f"trialbox: {scenario.id}", agent_id, device)
        fits = session is not None and (session.title, session.agent_id, session.device) == made_for
        opened = session if session is not None and fits else await _open(gaia, box, scenario, agent_id, device)
        status, created = opened.status, opened.session
        transcript = Transcript(
            scenario_id=scenario.id,
            session_id=created["id"],
            agent_model=created.get("effective_model") or status.get("default_model_name"),
            agent_id=str(created.get("agent_type") or agent_id),
            gaia_version=status.get("version"),  # the Agent UI's own amd-gaia version
            device=opened.device,
        )
        if keep is not None:
            keep(transcript)
        current = created  # GAIA's record of the session the turns go to
        # The session's set-up counts from connecting to the bridge: that too is time before
        # the first turn that the agent under test does not spend.
        indexing, indexing_since = time.perf_counter(), time.time()
        for document in scenario.setup.index_documents:
            transcript.indexed.append(await _index(gaia, box, current["id"], document, activity))
        indexing_s = round(time.perf_counter() - indexing, 3)
        # What the embedder did for the documents (and what its cache answered): the front door's
        # records of this sandbox, read once.
        embedded = await embedded_since(box, indexing_since) if transcript.indexed else None
        transcript.setup = SetupTimings(
            session_s=round(indexing - connecting, 3),
            indexing_s=indexing_s,
            indexing_embedded_inputs=None if embedded is None else embedded.texts,
            indexing_embedded_cached=None if embedded is None else embedded.cached,
        )
        await _prepare_memory(gaia, scenario)
        for turn in scenario.turns:
            if getattr(turn, "new_session", False):
                current = await _new_session(gaia, box, scenario, agent_id, device)
            writing = time.perf_counter()
            said = as_user_message(await simulator.user_message(scenario, turn, list(transcript.turns)))
            written_s = round(time.perf_counter() - writing, 3)
            record = await _run_turn(gaia, box, current["id"], turn.turn, said.text, turn_timeout_s)
            if said.source == "simulated":  # a model's time: the phase table shows it apart
                record.performance.simulator_s = written_s
            record.user_message_source = said.source
            record.simulator_model = said.model
            transcript.turns.append(record)
    return transcript


async def _prepare_memory(gaia: _Gaia, scenario: Any) -> None:
    """``setup.memory_clear`` / ``setup.memory_seed`` through GAIA's own admin MCP tools, as
    GAIA's simulator calls them (a memory sandbox sets GAIA_MEMORY_ADMIN=1 on UI and bridge).
    A seed item written as a bare string becomes ``{"content": ...}``, the row GAIA stores."""
    setup = scenario.setup
    if setup.memory_clear:
        reply = await gaia.call("memory_clear", scope="all")
        if _failed(reply) or "error" in reply:
            raise TargetError(f"memory_clear failed for {scenario.id}: {_detail(reply)}")
    if setup.memory_seed:
        items = [{"content": item} if isinstance(item, str) else item for item in setup.memory_seed]
        reply = await gaia.call("memory_seed", items=items)
        if _failed(reply) or "error" in reply or reply.get("count") != len(items):
            raise TargetError(f"memory_seed failed for {scenario.id}: {_detail(reply)}")


async def _new_session(
    gaia: _Gaia, box: Sandbox, scenario: Any, agent_id: str, device: str
) -> dict[str, Any]:
    """A turn with ``new_session: true`` opens a fresh chat session in the same sandbox (same
    memory store, no chat history, no indexed documents): recall across sessions."""
    session = await gaia.call("create_session", title=f"trialbox: {scenario.id} (new session)",
                              agent_type=agent_id)
    if _failed(session) or not session.get("id"):
        raise TargetError(f"create_session (new session) failed for {scenario.id}: "
                          f"{_detail(session)}")
    await _switch_device(box, session, device)
    return session


def as_user_message(said: UserMessage | str) -> UserMessage:
    """The simulator's reply as a UserMessage.

    The Simulator protocol is moving from ``str`` to ``UserMessage`` (runner/conversation/simulate.py is
    being changed at the same time as this module); until every simulator returns a
    UserMessage, a bare string is accepted and recorded as the scenario's words, verbatim.
    """
    if isinstance(said, UserMessage):
        return said
    return UserMessage(text=str(said), source="verbatim")


class _Gaia:
    """Calls GAIA MCP tools and returns their JSON result as a dict (errors included)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments, raise_on_error=False)
        if result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            return {"status": "error", "detail": f"MCP tool {tool} failed: {text[:500]}"}
        data = result.structured_content or {}
        # GAIA's tools return Dict[str, Any]; the MCP SDK wraps such results as {"result": ...}.
        if set(data) == {"result"} and isinstance(data["result"], dict):
            data = data["result"]
        return data


def _failed(reply: dict[str, Any]) -> bool:
    return reply.get("status") == "error"


def _detail(reply: dict[str, Any]) -> str:
    return str(reply.get("detail") or reply.get("error") or reply)[:500]


async def _switch_device(box: Sandbox, session: dict[str, Any], device: str) -> str:
    """Put the session on ``device`` the way the UI's device picker does (no MCP tool exists).

    Through ``box.ui_request``: a Docker sandbox's UI port is reachable by nobody but its own
    bridge, so the request is made from inside the sandbox (``docker exec``)."""
    if session.get("device") == device:
        return device
    response = await box.ui_request("PUT", f"/api/sessions/{session['id']}", {"device": device})
    if response.status != 200:
        raise TargetError(
            f"switching session {session['id']} to device {device!r} failed: "
            f"HTTP {response.status} {response.text[:300]}"
        )
    data = response.json()
    return str((data.get("device") if isinstance(data, dict) else None) or device)


async def _index(gaia: _Gaia, box: Sandbox, session_id: str, document: Any,
                 activity: Callable[[str], None] | None = None) -> IndexedDocument:
    """Index one setup document into the session; failures are recorded, not raised. While
    it indexes, `activity` is told how far it is (``watch_indexing``)."""
    path = str(PurePath(box.corpus_root) / document.relative_path)  # GAIA repo-relative and captured paths too
    started = time.perf_counter()
    watch = IndexingWatch(box, document.path, activity) if activity is not None else None
    if watch is not None:
        watch.start()
    try:
        reply = await gaia.call("index_document", filepath=path, session_id=session_id)
        if reply.get("indexing_status") in ("pending", "indexing") and reply.get("id"):
            reply = await _wait_for_indexing(gaia, str(reply["id"]), reply)
        if watch is not None:
            await watch.finish()
    finally:
        if watch is not None:
            await watch.stop()
            watch.tell("")  # the indexing is over: its line goes
    record = IndexedDocument(
        corpus_doc=getattr(document, "corpus_doc", None),
        path=document.path,
        chunks=int(reply.get("chunk_count") or 0),
        duration_s=round(time.perf_counter() - started, 3),
    )
    if _failed(reply):
        record.error = _detail(reply)
    elif reply.get("indexing_status") not in (None, "complete"):
        record.error = f"indexing {reply.get('indexing_status')}: {reply.get('last_error') or ''}"
    elif record.chunks == 0:
        record.error = reply.get("last_error") or "indexing produced 0 chunks"
    elif reply.get("linked_to_session") != session_id:
        record.error = "indexed, but GAIA did not link the document to the session"
    return record


async def _wait_for_indexing(gaia: _Gaia, doc_id: str, reply: dict[str, Any]) -> dict[str, Any]:
    """Large files index in the background: poll the library until this one settles."""
    deadline = time.monotonic() + INDEX_TIMEOUT_S
    while time.monotonic() < deadline:
        await asyncio.sleep(1.0)
        library = await gaia.call("list_documents")
        for entry in library.get("documents", []):
            if entry.get("id") == doc_id and entry.get("indexing_status") not in (
                "pending",
                "indexing",
            ):
                return {**entry, "linked_to_session": reply.get("linked_to_session")}
    return {"status": "error", "detail": f"indexing did not finish within {INDEX_TIMEOUT_S:.0f} s"}


async def _run_turn(
    gaia: _Gaia, box: Sandbox, session_id: str, number: int, message: str, timeout_s: float
) -> TurnRecord:
    started = time.perf_counter()
    since = time.time()  # the front door's records of this turn arrive from now on
    reply = await gaia.call("start_message", session_id=session_id, message=message)
    if _failed(reply):
        return _errored(number, message, started, f"start_message: {_detail(reply)}")
    error = await _wait_until_idle(gaia, box, session_id, started + timeout_s)
    wall_s = time.perf_counter() - started
    view = await gaia.call("turn_view", session_id=session_id)
    metrics = await gaia.call("turn_metrics", session_id=session_id)
    records = await own_meter_records(box, since)
    if view.get("outcome") == "error" and not error:
        error = f"the Agent UI reported an error: {view.get('error')}"
    return TurnRecord(
        turn=number,
        user_message=message,
        answer=str(view.get("content") or ""),
        tool_calls=tool_calls_from_steps(view.get("steps") or [], view.get("denials") or []),
        performance=turn_performance(wall_s, metrics, records),
        error=error,
    )


def _errored(number: int, message: str, started: float, error: str) -> TurnRecord:
    wall_s = time.perf_counter() - started
    return TurnRecord(
        turn=number, user_message=message, answer="",
        performance=TurnPerformance(wall_s=round(wall_s, 3)), error=error,
    )  # fmt: skip


async def _wait_until_idle(
    gaia: _Gaia, box: Sandbox, session_id: str, deadline: float
) -> str | None:
    """Block until the turn ends, answering prompts on the way; an error text or None."""
    answered: set[str] = set()  # prompt/question ids already answered once
    while True:
        remaining_ms = int((deadline - time.perf_counter()) * 1000)
        if remaining_ms <= 0:
            await gaia.call("stop_turn", session_id=session_id)
            await gaia.call("wait_for_turn", session_id=session_id, until="idle", timeout_ms=30_000)
            return "turn ran past its time budget; stopped it"
        state = await gaia.call(
            "wait_for_turn", session_id=session_id, until="attention",
            timeout_ms=min(WAIT_SLICE_MS, remaining_ms),
        )  # fmt: skip
        if state.get("timed_out"):
            continue
        if state.get("ended") or state.get("state") == "idle":
            return None
        if _failed(state):
            return f"wait_for_turn: {_detail(state)}"
        pending = await _answer_pending(gaia, box, session_id, state, answered)
        if pending in answered:
            # GAIA still shows a prompt we answered: give its event a moment instead of spinning.
            await asyncio.sleep(0.5)
        answered.add(pending)


async def _answer_pending(
    gaia: _Gaia, box: Sandbox, session_id: str, state: dict[str, Any], answered: set[str]
) -> str:
    """Answer the pending prompt or question once; its id ('' when nothing was pending)."""
    if prompt := state.get("pending_prompt"):
        confirm_id = str(prompt.get("confirm_id", ""))
        if confirm_id not in answered:
            decision = permission_decision(prompt, box.corpus_root)
            await gaia.call(
                "answer_prompt", session_id=session_id, confirm_id=confirm_id, decision=decision
            )
        return confirm_id
    if question := state.get("pending_question"):
        request_id = str(question.get("request_id", ""))
        if request_id not in answered:
            await gaia.call(
                "answer_question", session_id=session_id,
                request_id=request_id, value=question_reply(question),
            )  # fmt: skip
        return request_id
    return ""
