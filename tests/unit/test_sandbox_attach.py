"""Attaching to a running Agent UI: the bridge URL, the refusals, what collect() leaves behind.

A real MCP server on loopback (fastmcp, in this process) stands in for "something answers MCP
but is not GAIA's bridge"; the full attach-and-converse path against GAIA's own bridge is in
tests/integration/test_gaia_local.py.
"""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path, PurePosixPath

import pytest

from runner.sandbox import AttachBackend, SandboxError
from runner.sandbox.attach import default_ui_url, mcp_endpoint
from runner.system.ports import free_port


@pytest.mark.parametrize(
    ("given", "endpoint"),
    [("http://localhost:8765", "http://localhost:8765/mcp"),
     ("http://localhost:8765/", "http://localhost:8765/mcp"),
     ("http://10.0.0.5:9000/mcp", "http://10.0.0.5:9000/mcp"),
     ("https://ui.example/custom/path", "https://ui.example/custom/path")],
)
def test_a_bare_origin_gets_gaias_mcp_path(given: str, endpoint: str) -> None:
    assert mcp_endpoint(given) == endpoint


@pytest.mark.parametrize(
    ("bridge", "ui"),
    [("http://localhost:8765/mcp", "http://localhost:4200"),
     ("http://172.18.0.5:8765/mcp", "http://172.18.0.5:4200"),
     ("http://[fd00::5]:8765/mcp", "http://[fd00::5]:4200")],
)
def test_the_ui_is_looked_for_beside_its_bridge(bridge: str, ui: str) -> None:
    assert default_ui_url(bridge) == ui
    assert AttachBackend(bridge, "/c").ui_url == ui
    assert AttachBackend(bridge, "/c", ui_url="http://elsewhere:9/").ui_url == "http://elsewhere:9"


@pytest.mark.parametrize("given", ["localhost:8765", "ftp://x/mcp", ""])
def test_a_url_that_is_not_http_is_refused(given: str) -> None:
    with pytest.raises(SandboxError, match="give the MCP bridge's http"):
        AttachBackend(given, corpus_root=PurePosixPath("/corpus"))


def test_the_bridge_token_comes_from_gaias_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GAIA_AGENT_UI_MCP_TOKEN", "t" * 40)
    assert AttachBackend("http://h:1", "/c").headers == {"Authorization": "Bearer " + "t" * 40}
    monkeypatch.delenv("GAIA_AGENT_UI_MCP_TOKEN")
    assert AttachBackend("http://h:1", "/c").headers == {}


def test_nothing_listening_is_one_clear_error() -> None:
    backend = AttachBackend(f"http://127.0.0.1:{free_port()}", "/corpus", ready_timeout_s=3)

    async def attach() -> None:
        async with backend.open("s"):
            pass

    with pytest.raises(SandboxError, match=r"no GAIA MCP bridge answers .*agent_ui_mcp"):
        asyncio.run(attach())


def test_an_mcp_server_that_is_not_gaias_bridge_is_refused() -> None:
    from fastmcp import FastMCP

    other = FastMCP("not-gaia")

    @other.tool()
    def echo(text: str) -> str:
        """Say it back."""
        return text

    port = free_port()

    async def attach() -> None:
        server = asyncio.create_task(other.run_http_async(host="127.0.0.1", port=port, show_banner=False))
        try:
            for _ in range(100):
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                        break
                except OSError:
                    await asyncio.sleep(0.1)
            async with AttachBackend(f"http://127.0.0.1:{port}", "/corpus").open("s"):
                pass
        finally:
            server.cancel()
            await asyncio.gather(server, return_exceptions=True)

    with pytest.raises(SandboxError, match="offers no create_session tool"):
        asyncio.run(attach())


def test_collect_says_what_it_could_not_collect(tmp_path: Path) -> None:
    from runner.sandbox.attach import AttachedSandbox

    box = AttachedSandbox("s", "http://ui", "http://bridge/mcp", "", PurePosixPath("/corpus"))
    asyncio.run(box.collect(tmp_path / "artifacts"))
    note = json.loads((tmp_path / "artifacts" / "attached.json").read_text())
    assert note["attached"] == "http://bridge/mcp"
    assert set(note["not_collected"]) == {"gaia_chat.db", "agent-ui.log", "mcp.log"}
    assert not (tmp_path / "artifacts" / "llm-stats.json").exists()  # no LLM server was named
