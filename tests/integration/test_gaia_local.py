"""The GAIA Agent UI under test, driven for real: LocalBackend sandboxes (GAIA's Agent UI and MCP
bridge as host processes from .venv-gaia) answering through the real llm-cpu server.

Skipped only when .venv-gaia is missing (scripts/setup-gaia-venv makes it).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from runner.conversation.target import run_conversation
from runner.records.transcript import TurnRecord, UserMessage
from runner.sandbox import LocalBackend, LocalSandbox, Sandbox, own_meter_records
from runner.scenarios import Scenario

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]

FACT_SHEET = """\
Harbor Lights Festival 2026 - organiser's fact sheet

The Harbor Lights Festival runs from 12 to 14 June 2026 on the Wexmoor waterfront.
The festival expects 18,400 visitors over its three days.
The total budget is 96,500 euros, of which 41,000 euros is spent on the lantern parade.
The festival director is Ilse Marandt.
"""


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    (root / "documents").mkdir(parents=True)
    (root / "documents" / "harbor_lights.txt").write_text(FACT_SHEET)
    return root


@pytest.fixture()
def backend(llm_url: str, gaia_python: Path, corpus: Path) -> LocalBackend:
    return LocalBackend(llm_url=llm_url, corpus_root=corpus, gaia_python=gaia_python)


def scenario() -> Scenario:
    return Scenario.model_validate(
        {
            "id": "harbor_two_turns",
            "category": "rag_quality",
            "persona": "casual_user",
            "setup": {"index_documents": [
                {"corpus_doc": "harbor_lights", "path": "documents/harbor_lights.txt"}]},
            "turns": [
                {"turn": 1, "objective": "Ask for the total budget.",
                 "user_message": "What is the total budget of the Harbor Lights Festival?",
                 "success_criteria": "Says 96,500 euros."},
                {"turn": 2, "objective": "Ask who directs it.",
                 "user_message": "And who is the festival director?",
                 "success_criteria": "Names Ilse Marandt."},
            ],
        }
    )  # fmt: skip


SIMULATOR_S = 0.3
"""How long the stand-in simulator takes to write a message."""


class RecordingSimulator:
    """Sends each turn's scripted message and remembers the history it was shown.

    Turn 1 comes back as a bare string (the Simulator protocol's old shape, still accepted),
    later turns as a UserMessage that says a model wrote them."""

    def __init__(self) -> None:
        self.seen: list[list[TurnRecord]] = []

    async def user_message(self, scenario: Scenario, turn, history: list[TurnRecord]) -> str | UserMessage:
        self.seen.append(list(history))
        if turn.turn == 1:
            return turn.user_message
        await asyncio.sleep(SIMULATOR_S)  # a model writing: timed apart from the agent's turn
        return UserMessage(text=turn.user_message, source="simulated", model="test-simulator")


def processes_using(home: Path) -> list[int]:
    """Pids of live processes whose environment names this GAIA_HOME (UI, bridge, daemon)."""
    marker = f"GAIA_HOME={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        if marker in environ.split(b"\0") and state != "Z":
            found.append(int(entry.name))
    return found


async def mcp_call(box: Sandbox, tool: str, **arguments) -> dict:
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    transport = StreamableHttpTransport(box.mcp_url, headers=box.mcp_headers)
    async with Client(transport) as client:
        result = await client.call_tool(tool, arguments)
    data = result.structured_content or {}
    return data.get("result", data) if set(data) == {"result"} else data


def test_sandbox_opens_ready_and_closes_without_leftovers(backend: LocalBackend) -> None:
    async def scenario_run() -> LocalSandbox:
        async with backend.open("open_close") as box, httpx.AsyncClient(timeout=5) as http:
            health = await http.get(f"{box.ui_url}/api/health")
            assert health.status_code == 200
            assert health.json()["stats"]["sessions"] == 0  # a fresh GAIA_HOME
            agents = (await http.get(f"{box.ui_url}/api/agents")).json()["agents"]
            assert [a["id"] for a in agents] == ["gaia"]  # our reference agent, loaded by GAIA
            status = await mcp_call(box, "system_status")
            assert status["lemonade_running"] is True  # the UI reaches the real LLM server
            assert len(processes_using(box.home)) >= 2  # at least the Agent UI and the bridge
            return box

    box = asyncio.run(scenario_run())
    # Each start-up phase is recorded (scripts/bench-sandbox reads cold_start_s); their order is
    # not asserted: the waits run one after the other, so it holds by construction.
    assert set(box.timings) == {"ui_ready_s", "mcp_ready_s", "cold_start_s"}, box.timings
    assert processes_using(box.home) == [], "processes outlived the sandbox"
    assert not box.home.exists(), "the temporary GAIA_HOME was not removed"


def test_cancelled_sandbox_still_tears_down(backend: LocalBackend) -> None:
    opened: list[LocalSandbox] = []

    async def hold_open() -> None:
        async with backend.open("cancelled") as box:
            opened.append(box)
            await asyncio.sleep(3600)

    async def cancel_when_ready() -> None:
        task = asyncio.create_task(hold_open())
        while not opened:
            await asyncio.sleep(0.1)
            assert not task.done(), task.exception()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_when_ready())
    assert processes_using(opened[0].home) == []
    assert not opened[0].home.exists()


def test_two_turn_conversation_over_an_indexed_document(
    backend: LocalBackend, tmp_path: Path
) -> None:
    simulator = RecordingSimulator()

    async def converse():
        async with backend.open("harbor_two_turns") as box:
            transcript = await run_conversation(
                box, scenario(), simulator, device="cpu", turn_timeout_s=300
            )
            await box.collect(tmp_path / "artifacts")
            return transcript

    transcript = asyncio.run(converse())
    print(transcript.model_dump_json(indent=1))

    assert transcript.scenario_id == "harbor_two_turns"
    assert transcript.session_id
    assert transcript.device == "cpu"  # switched away from GAIA's default 'gpu'
    [indexed] = transcript.indexed
    assert (indexed.corpus_doc, indexed.error) == ("harbor_lights", None)
    assert indexed.chunks >= 1

    assert [t.turn for t in transcript.turns] == [1, 2]
    assert [len(history) for history in simulator.seen] == [0, 1]
    assert [(t.user_message_source, t.simulator_model) for t in transcript.turns] == [
        ("verbatim", None), ("simulated", "test-simulator")]  # fmt: skip
    first, second = (t.performance.simulator_s for t in transcript.turns)
    assert first is None and second is not None and second >= SIMULATOR_S, (first, second)
    assert (transcript.agent_id, transcript.gaia_version) == ("gaia", "0.25.1")
    for record, sent in zip(transcript.turns, scenario().turns):
        assert record.user_message == sent.user_message
        assert record.error is None, record.error
        assert record.answer.strip(), "the agent gave no answer"
        assert "not available on this host" not in record.answer
        assert record.performance.wall_s > 0
        assert record.performance.output_tokens and record.performance.output_tokens > 0
        assert record.performance.time_to_first_token_s is not None
    # GAIA indexes the session's document at the start of the first turn and says so as a step.
    assert "index_documents" in [call.name for call in transcript.turns[0].tool_calls]

    artifacts = tmp_path / "artifacts"
    assert {p.name for p in artifacts.iterdir()} == {
        "gaia_chat.db", "agent-ui.log", "mcp.log", "llm-stats.json"}  # fmt: skip
    with sqlite3.connect(artifacts / "gaia_chat.db") as db:
        rows = db.execute("SELECT role, content FROM messages ORDER BY id").fetchall()
    assert [role for role, _ in rows] == ["user", "assistant", "user", "assistant"]
    assert rows[3][1].strip() == transcript.turns[1].answer.strip()


def test_two_sandboxes_do_not_see_each_other(backend: LocalBackend, corpus: Path) -> None:
    async def both() -> None:
        async with backend.open("iso_a") as a, backend.open("iso_b") as b:
            assert a.home != b.home and a.ui_url != b.ui_url and a.mcp_url != b.mcp_url
            session = await mcp_call(a, "create_session", title="only in A", agent_type="gaia")
            document = corpus / "documents" / "harbor_lights.txt"
            indexed = await mcp_call(
                a, "index_document", filepath=str(document), session_id=session["id"]
            )
            assert indexed["chunk_count"] >= 1
            a_sessions = await mcp_call(a, "list_sessions")
            b_sessions = await mcp_call(b, "list_sessions")
            assert [s["id"] for s in a_sessions["sessions"]] == [session["id"]]
            assert b_sessions["sessions"] == []
            assert len((await mcp_call(a, "list_documents"))["documents"]) == 1
            assert (await mcp_call(b, "list_documents"))["documents"] == []
            gone = await mcp_call(b, "get_session", session_id=session["id"])
            assert gone.get("status") == "error"

    asyncio.run(both())


def test_missing_gaia_interpreter_is_named(corpus: Path, tmp_path: Path) -> None:
    from runner.sandbox import SandboxError

    with pytest.raises(SandboxError, match="setup-gaia-venv"):
        LocalBackend("http://127.0.0.1:9", corpus, gaia_python=tmp_path / "nope" / "python")


@pytest.fixture(scope="module")
def forced_tool_llm_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second real llm-cpu server whose first model call per turn must call query_documents.

    SmolLM2-135M never picks a tool on its own, so without this switch GAIA's tool path (the
    model's tool call, the tool run, its result, the answer) would never run here.
    """
    from conftest import running_llm_server

    forced = {"TRIALBOX_LLM_FORCE_TOOL": "query_documents"}
    with running_llm_server(tmp_path_factory.mktemp("llm-forced"), forced) as url:
        yield url


def test_agent_tool_calls_reach_the_transcript(
    forced_tool_llm_url: str, gaia_python: Path, corpus: Path
) -> None:
    backend = LocalBackend(forced_tool_llm_url, corpus, gaia_python=gaia_python)
    one_turn = scenario().model_copy(update={"turns": scenario().turns[:1]})

    async def converse():
        async with backend.open("harbor_tool_path") as box:
            return await run_conversation(
                box, one_turn, RecordingSimulator(), device="cpu", turn_timeout_s=300
            )

    [record] = asyncio.run(converse()).turns
    print(record.model_dump_json(indent=1))
    assert record.error is None, record.error
    names = [call.name for call in record.tool_calls]
    # GAIA's own session indexing comes first, then the model's (forced) retrieval call.
    assert names[:2] == ["index_documents", "query_documents"], names
    query = record.tool_calls[1]
    assert "_detail" not in query.arguments  # read back as arguments, not as a label
    assert query.error is None and "chunk" in query.result_summary
    assert record.answer.strip()


def test_a_long_index_tells_its_chunks_as_they_are_embedded(llm_url: str, gaia_python: Path) -> None:
    """An 11 KB licence text of our corpus (eval/corpus, `trialbox corpus build`; ~10 s to index
    here at ~1 chunk/s — the 528 KB archive takes many minutes), indexed for real: the progress
    lines count up, the last one to the chunks GAIA says it indexed, and the front door's count
    of embedded inputs is those chunks, not an estimate (the counting itself, batch by batch:
    tests/unit/test_indexing_progress.py)."""
    corpus = ROOT / "eval" / "corpus"
    long = "real_world/apache-2.0.txt"
    assert (corpus / long).is_file(), "run `trialbox corpus build` (make test does)"
    backend = LocalBackend(llm_url, corpus, gaia_python=gaia_python)
    written = scenario().model_dump(mode="json", exclude_none=True)
    one_turn = Scenario.model_validate({
        **written, "id": "long_index", "turns": written["turns"][:1],
        "setup": {"index_documents": [{"corpus_doc": "rw_apache_2_0", "path": long}]}})
    told: list[str] = []

    async def converse():
        async with backend.open("long_index") as box:
            since = time.time()
            transcript = await run_conversation(box, one_turn, RecordingSimulator(), device="cpu",
                                                turn_timeout_s=300, activity=told.append)
            return transcript, await own_meter_records(box, since)

    transcript, records = asyncio.run(converse())
    embedded = [r.get("inputs") for r in records or [] if r["route"].endswith("/embeddings")]
    print("embeddings requests' inputs:", embedded)
    [indexed] = transcript.indexed
    assert indexed.error is None and indexed.chunks > 0, indexed
    lines = [line for line in told if line]
    print(f"{indexed.chunks} chunks in {indexed.duration_s} s;", lines[-3:])
    assert told[-1] == ""  # the line goes when the indexing is over
    assert lines and all(line.startswith("indexing apache-2.0.txt: ")
                         for line in lines), told
    counts = [int(line.split(": ")[1].split(" chunk")[0].replace(",", "")) for line in lines]
    assert counts == sorted(counts), counts
    assert counts[-1] == indexed.chunks, (counts, indexed.chunks)  # the look at the end
    # The inputs embedded, in order, add up to the document's chunks (GAIA 0.25.1 embeds the
    # document a second time when the turn's agent loads its session documents).
    sums = [sum(embedded[: i + 1]) for i in range(len(embedded))]
    assert indexed.chunks in sums, (embedded, indexed.chunks)
    # That second pass is the agent's, inside its first turn, and the turn's figures say so.
    [turn] = transcript.turns
    assert turn.performance.embedded_inputs is not None
    assert turn.performance.embedded_inputs >= indexed.chunks, turn.performance
    assert 0 < (turn.performance.embedding_s or 0) < turn.performance.wall_s, turn.performance


# -- the user's own agents, chat model and memory ---------------------------------------------

FIXTURE_AGENTS = ROOT / "tests" / "fixtures" / "agents"
CHAT_MODEL = "SmolLM2-135M-Instruct-GGUF"  # the llm-cpu server's own name for its chat model


async def tool_names(box: Sandbox) -> set[str]:
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    async with Client(StreamableHttpTransport(box.mcp_url, headers=box.mcp_headers)) as client:
        return {tool.name for tool in await client.list_tools()}


def test_user_agents_load_and_answer_under_their_own_id(
    llm_url: str, gaia_python: Path, corpus: Path
) -> None:
    from runner.conversation.agents import AgentRegistry
    from runner.records.evidence import Evidence

    registry = AgentRegistry([FIXTURE_AGENTS], agent="plain_talker")
    backend = LocalBackend(llm_url, corpus, gaia_python=gaia_python,
                           agent_dirs=[FIXTURE_AGENTS], agent_model=CHAT_MODEL)
    one_turn = scenario().model_copy(update={"turns": scenario().turns[:1]})
    homes: list[Path] = []

    async def converse():
        async with backend.open("harbor_plain") as box, httpx.AsyncClient(timeout=5) as http:
            homes.append(box.home)
            listed = (await http.get(f"{box.ui_url}/api/agents")).json()["agents"]
            assert {"gaia", "docs_helper", "plain_talker"} <= {a["id"] for a in listed}
            assert (box.home / "agents" / "docs_helper").resolve() == FIXTURE_AGENTS / "docs_helper"
            assert "memory_stats" not in await tool_names(box)  # memory is off unless asked for
            return await run_conversation(box, one_turn, RecordingSimulator(), device="cpu",
                                          turn_timeout_s=300, agent_id=registry.resolve(None))

    transcript = asyncio.run(converse())
    print(transcript.model_dump_json(indent=1))
    assert transcript.agent_id == "plain_talker"
    assert transcript.gaia_version == "0.25.1"
    assert transcript.agent_model == CHAT_MODEL  # --agent-model reached the Agent UI
    [record] = transcript.turns
    assert record.error is None, record.error
    assert record.answer.strip()
    assert Evidence.from_transcript(transcript).turns[0].calls == []  # the agent has no tools
    # Teardown removed the sandbox's link, never the user's folder; GAIA wrote nothing into it.
    assert not homes[0].exists()
    assert (FIXTURE_AGENTS / "plain_talker" / "agent.py").is_file()
    assert not list(FIXTURE_AGENTS.rglob("__pycache__"))


def test_a_memory_sandbox_has_gaias_memory_on_and_fresh(
    llm_url: str, gaia_python: Path, corpus: Path
) -> None:
    backend = LocalBackend(llm_url, corpus, gaia_python=gaia_python)

    async def check() -> None:
        async with backend.open("memory_on", memory=True) as box, httpx.AsyncClient(timeout=10) as http:
            assert {"memory_stats", "memory_clear"} <= await tool_names(box)
            settings = (await http.get(f"{box.ui_url}/api/memory/settings")).json()
            assert settings["memory_enabled"] is True
            stats = await mcp_call(box, "memory_stats")
            assert stats.get("status") != "error", stats
            cleared = await mcp_call(box, "memory_clear", scope="all")
            assert cleared.get("status") != "error", cleared  # the admin route is open
            ui_env = [pid for pid in processes_using(box.home)
                      if b"GAIA_MEMORY_ADMIN=1" in Path(f"/proc/{pid}/environ").read_bytes()]
            assert ui_env, "no process of this sandbox runs with GAIA_MEMORY_ADMIN=1"

    asyncio.run(check())


def test_attach_drives_an_agent_ui_that_is_already_running(
    backend: LocalBackend, llm_url: str, corpus: Path, tmp_path: Path
) -> None:
    """A running Agent UI + bridge (here a local sandbox, as a developer would start them by
    hand) driven through AttachBackend: nothing created, nothing torn down."""
    import json

    from runner.conversation.agents import AgentRegistry, attached_agent_ids
    from runner.sandbox import AttachBackend

    one_turn = scenario().model_copy(update={"turns": scenario().turns[:1]})

    async def converse():
        async with backend.open("already_running") as running:
            ids = await attached_agent_ids(running.ui_url)
            assert ids == ["chat", "email", "gaia"], ids
            assert AgentRegistry.attached(ids).problems([one_turn]) == []
            attach = AttachBackend(running.mcp_url, corpus_root=corpus, ui_url=running.ui_url,
                                   llm_url=llm_url)
            async with attach.open("harbor_attached") as box:
                transcript = await run_conversation(box, one_turn, RecordingSimulator(),
                                                    device="cpu", turn_timeout_s=300)
                await box.collect(tmp_path / "artifacts")
            # The UI is still the owner's: it runs on, holding the session we made.
            sessions = await mcp_call(running, "list_sessions")
            return transcript, [s["id"] for s in sessions["sessions"]]

    transcript, sessions = asyncio.run(converse())
    assert transcript.session_id in sessions
    assert transcript.gaia_version == "0.25.1" and transcript.agent_id == "gaia"
    assert transcript.indexed[0].chunks >= 1
    assert transcript.turns[0].error is None and transcript.turns[0].answer.strip()
    artifacts = tmp_path / "artifacts"
    assert json.loads((artifacts / "llm-stats.json").read_text()).get("output_tokens", 0) > 0
    assert "gaia_chat.db" in json.loads((artifacts / "attached.json").read_text())["not_collected"]


def test_no_secret_of_the_runner_reaches_the_sandbox_processes(
    backend: LocalBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judge's key (and anything else not allow-listed) stays in the runner's environment:
    the Agent UI runs the agent under test, whose tools can read their own environment."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-canary-0123456789")
    monkeypatch.setenv("TRIALBOX_CANARY_SECRET", "canary-value")

    async def environments() -> list[bytes]:
        async with backend.open("environment_probe") as box:
            pids = processes_using(box.home)
            assert len(pids) >= 2, "the Agent UI and the bridge must both run"
            return [Path(f"/proc/{pid}/environ").read_bytes() for pid in pids]

    for environ in asyncio.run(environments()):
        names = {item.split(b"=", 1)[0] for item in environ.split(b"\0") if item}
        assert b"ANTHROPIC_API_KEY" not in names
        assert b"TRIALBOX_CANARY_SECRET" not in names
        assert b"canary" not in environ
        assert b"PATH" in names and b"GAIA_HOME" in names  # what GAIA needs is still there
