"""The fix sandbox's egress proxy on loopback: exactly one host:port gets through, by CONNECT or
by an absolute-URI request; everything else is refused with 403 and logged."""

from __future__ import annotations

import asyncio
import http.server
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from runner.fix._proxy import parse_allow, serve, target_of


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 — http.server's name
        body = f"hello from {self.server.server_address[1]} path={self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _stop(loop: asyncio.AbstractEventLoop, server: asyncio.AbstractServer) -> None:
    """Close the proxy and finish its connection tasks before the loop stops."""
    async def shutdown() -> None:
        server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=10)
    loop.call_soon_threadsafe(loop.stop)


def _server() -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture()
def world() -> Iterator[tuple[int, int, int, list[dict]]]:
    """(allowed port, other port, proxy port, proxy log)."""
    allowed, other = _server(), _server()
    log: list[dict] = []
    loop = asyncio.new_event_loop()
    proxy = loop.run_until_complete(serve(("127.0.0.1", allowed.server_address[1]), 0, "127.0.0.1", log.append))
    threading.Thread(target=loop.run_forever, daemon=True).start()
    try:
        yield allowed.server_address[1], other.server_address[1], proxy.sockets[0].getsockname()[1], log
    finally:
        _stop(loop, proxy)
        allowed.shutdown()
        other.shutdown()


def _get(url: str, proxy_port: int) -> tuple[int, str]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": f"http://127.0.0.1:{proxy_port}"}))
    try:
        with opener.open(url, timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _connect(proxy_port: int, target: str) -> tuple[str, str]:
    with socket.create_connection(("127.0.0.1", proxy_port), timeout=5) as sock:
        sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        status = sock.recv(4096).decode().split("\r\n")[0]
        if " 200 " not in status:
            return status, ""
        sock.sendall(b"GET /through HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
        return status, data.decode()


def test_the_allowed_endpoint_answers_over_plain_http_and_connect(world) -> None:  # type: ignore[no-untyped-def]
    allowed, _, proxy, log = world
    status, body = _get(f"http://127.0.0.1:{allowed}/v1/models?x=1", proxy)
    assert (status, body) == (200, f"hello from {allowed} path=/v1/models?x=1")
    status, body = _connect(proxy, f"127.0.0.1:{allowed}")
    assert "200" in status and body.endswith(f"hello from {allowed} path=/through")
    assert [e["decision"] for e in log] == ["allowed", "allowed"]


def test_everything_else_is_refused_and_logged(world) -> None:  # type: ignore[no-untyped-def]
    allowed, other, proxy, log = world
    assert _get(f"http://127.0.0.1:{other}/", proxy)[0] == 403
    assert _get(f"http://localhost:{allowed}/", proxy)[0] == 403  # another name for it: not the allowed host
    assert " 403 " in _connect(proxy, f"127.0.0.1:{other}")[0]
    with socket.create_connection(("127.0.0.1", proxy), timeout=5) as sock:  # not a proxy request
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b" 400 " in sock.recv(4096)
    refused = [e for e in log if e["decision"] == "refused"]
    assert [e["target"] for e in refused] == [f"127.0.0.1:{other}", f"localhost:{allowed}",
                                              f"127.0.0.1:{other}", "/"]
    assert all(e["reason"] for e in refused)


def test_a_dead_upstream_is_a_502_not_a_hang(world) -> None:  # type: ignore[no-untyped-def]
    _, _, proxy, log = world
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(serve(("127.0.0.1", port), 0, "127.0.0.1", log.append))
    threading.Thread(target=loop.run_forever, daemon=True).start()
    try:
        assert _get(f"http://127.0.0.1:{port}/", server.sockets[0].getsockname()[1])[0] == 502
        assert log[-1]["decision"] == "failed"
    finally:
        _stop(loop, server)


def test_allow_and_targets_parse_strictly() -> None:
    assert parse_allow("API.Anthropic.com:443") == ("api.anthropic.com", 443)
    for bad in ("", "host", "host:", "host:0", "host:http", ":80"):
        with pytest.raises(ValueError, match="TRIALBOX_EGRESS_ALLOW"):
            parse_allow(bad)
    assert target_of("CONNECT", "h:443") == ("h", 443)
    assert target_of("GET", "http://h/x") == ("h", 80)
    assert target_of("GET", "https://h/x") is None  # https goes through CONNECT, never in clear
    assert target_of("GET", "/x") is None
    assert target_of("CONNECT", "h") is None
