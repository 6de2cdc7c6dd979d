"""How a sandbox's GAIA_HOME gets its agents and memory switch (images/agent-ui/entrypoint.py),
and how a refused --agent-model is reported. The entrypoint runs under GAIA's interpreter in
the image; it uses only the standard library, so it is loaded here from its file."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from runner.sandbox import SandboxError
from runner.sandbox._configure import set_agent_model

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_AGENTS = ROOT / "tests" / "fixtures" / "agents"


def entrypoint():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("agent_ui_entrypoint", ROOT / "images" / "agent-ui" / "entrypoint.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_user_agents_are_linked_beside_ours(tmp_path: Path) -> None:
    home = tmp_path / "home"
    entrypoint().prepare_home(home, [str(FIXTURE_AGENTS)])
    agents = home / "agents"
    assert sorted(p.name for p in agents.iterdir()) == ["docs_helper", "gaia", "plain_talker"]
    assert (agents / "docs_helper").is_symlink()
    assert (agents / "docs_helper").resolve() == FIXTURE_AGENTS / "docs_helper"
    assert not (agents / "gaia").is_symlink()  # ours is copied in
    assert "AGENT_ID = \"gaia\"" in (agents / "gaia" / "agent.py").read_text()
    assert (home / "chat" / "initialized").is_file()


def test_a_user_gaia_agent_replaces_ours(tmp_path: Path) -> None:
    theirs = tmp_path / "mine" / "gaia"
    theirs.mkdir(parents=True)
    (theirs / "agent.py").write_text("# the user's own gaia agent\n")
    entrypoint().prepare_home(tmp_path / "home", [str(tmp_path / "mine")])
    assert (tmp_path / "home" / "agents" / "gaia").resolve() == theirs


def test_two_folders_with_one_agent_id_stop_the_start(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder / "twin").mkdir(parents=True)
        (tmp_path / folder / "twin" / "agent.py").write_text("")
    with pytest.raises(SystemExit, match="'twin' is in two --agent-dir folders"):
        entrypoint().prepare_home(tmp_path / "home", [str(tmp_path / "a"), str(tmp_path / "b")])
    with pytest.raises(SystemExit, match="is not a directory"):
        entrypoint().prepare_home(tmp_path / "home2", [str(tmp_path / "missing")])


@pytest.mark.parametrize("memory", [False, True])
def test_memory_is_off_unless_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory: bool) -> None:
    module = entrypoint()
    monkeypatch.setenv("GAIA_MEMORY_DB", "/somewhere/shared/memory.db")
    flags = ["--memory"] if memory else []
    args = module.parse(["ui", "--home", str(tmp_path), "--llm-url", "http://llm:13305",
                         "--agent-dir", str(FIXTURE_AGENTS), *flags])
    env = module.ui_environment(args, pid=1)
    assert ("GAIA_MEMORY_DISABLED" in env) is not memory
    assert (env.get("GAIA_MEMORY_ADMIN") == "1") is memory
    assert ("GAIA_MEMORY_DB" in env) is not memory  # memory on: this sandbox's own memory.db
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"  # nothing written into the user's agent folder
    bridge = module.parse(["mcp", "--ui-url", "http://ui:4200", *flags])
    assert bridge.memory is memory


@pytest.mark.parametrize("staged", [False, True])
def test_the_ui_works_from_the_corpus_or_where_fixtures_are_staged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, staged: bool
) -> None:
    """GAIA grants a session without documents its working directory: the corpus by default;
    with a fixture tree ~/gaia-eval, made at start (empty until staging), as GAIA's harness."""
    module = entrypoint()
    monkeypatch.chdir(tmp_path)
    corpus, work = tmp_path / "corpus", tmp_path / "home" / "gaia-eval"
    corpus.mkdir()
    flags = ["--work-dir", str(work)] if staged else []
    args = module.parse(["ui", "--home", str(tmp_path / "gaia-home"), "--llm-url",
                         "http://llm:13305", "--document-root", str(corpus), *flags])
    module.prepared_ui(args)
    assert Path.cwd() == (work if staged else corpus)
    assert work.is_dir() is staged


class _Refusing(BaseHTTPRequestHandler):
    def do_PUT(self) -> None:
        body = json.dumps({"detail": "custom_model is not a model this server knows"}).encode()
        self.send_response(422)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def refusing_ui() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_refused_agent_model_stops_the_sandbox_with_the_uis_reason(refusing_ui: str) -> None:
    with pytest.raises(SandboxError, match=r"did not take --agent-model Nope-GGUF: HTTP 422 .*not a model"):
        asyncio.run(set_agent_model(refusing_ui, "Nope-GGUF"))
