"""The fix sandbox's egress proxy: forwards to exactly one host:port, refuses and logs the rest.

Runs inside the ``trialbox/fixer`` image (``python3 /opt/trialbox/egress_proxy.py``) on the fix
sandbox's internal network, so this file uses the standard library only. The fixer's container
has no route out; its HTTP(S)_PROXY points here, and this process is the one thing on that
network that also sits on a network with a way out.

Why our own proxy rather than Debian's tinyproxy: the allow-list is one exact ``host:port`` (not
a domain pattern), every decision is logged as one JSON line in a format the fix report reads
(``proxy.log``), and nothing has to be installed into the image from a package mirror. Both
forms a client uses through a proxy are handled: ``CONNECT host:port`` (HTTPS, the Anthropic
and OpenAI SDKs) and an absolute-URI request ``GET http://host:port/path`` (plain HTTP, a local
Lemonade server). The host is compared as written (no resolution), so a client cannot reach
another address by naming it differently.

Environment: ``TRIALBOX_EGRESS_ALLOW`` (``host:port``, required), ``TRIALBOX_EGRESS_PORT``
(default 3128). Log lines: ``{"time", "client", "method", "target", "decision", "reason"}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from urllib.parse import urlsplit

DEFAULT_PORT = 3128
#: A request head larger than this is refused (no legitimate model request needs more).
MAX_HEAD = 64 * 1024
HEAD_TIMEOUT_S = 30.0


def parse_allow(text: str) -> tuple[str, int]:
    """``host:port`` → (lower-cased host, port); raises ValueError naming the fix."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]").lower()
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"TRIALBOX_EGRESS_ALLOW={text!r}: write host:port, e.g. api.anthropic.com:443")
    return host, int(port)


def target_of(method: str, target: str) -> tuple[str, int] | None:
    """The host:port a request asks for: CONNECT's authority or an absolute http URL's."""
    if method == "CONNECT":
        host, sep, port = target.rpartition(":")
        if not sep or not port.isdigit():
            return None
        return host.strip("[]").lower(), int(port)
    parts = urlsplit(target)
    if parts.scheme != "http" or not parts.hostname:
        return None
    try:
        number = parts.port or 80
    except ValueError:
        return None
    return parts.hostname.lower(), number


#: Where the proxy's decisions go, one JSON-able dict each (default: a JSON line on stdout).
LogSink = Callable[[dict[str, object]], None]


class EgressProxy:
    """One allowed destination; `log` receives every decision as a dict."""

    def __init__(self, allow: tuple[str, int], log: LogSink | None = None) -> None:
        self.allow = allow
        self.log = log or _print_json

    def _record(self, client: str, method: str, target: str, decision: str, reason: str) -> None:
        self.log({"time": round(time.time(), 3), "client": client, "method": method,
                  "target": target, "decision": decision, "reason": reason})

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        client = f"{peer[0]}:{peer[1]}" if peer else "?"
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            self._record(client, "?", "?", "refused", "no complete request head")
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, _, rest = lines[0].partition(" ")
        target = rest.rpartition(" ")[0] or rest
        wanted = target_of(method, target)
        if wanted is None:
            self._record(client, method, target, "refused", "not a proxy request (CONNECT host:port or http://host:port/...)")
            await _reply(writer, 400, "Bad Request")
            return
        if wanted != self.allow:
            self._record(client, method, f"{wanted[0]}:{wanted[1]}", "refused",
                         f"only {self.allow[0]}:{self.allow[1]} is allowed")
            await _reply(writer, 403, "Forbidden")
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(*wanted), 15)
        except (TimeoutError, OSError) as exc:
            self._record(client, method, f"{wanted[0]}:{wanted[1]}", "failed", f"upstream: {exc}")
            await _reply(writer, 502, "Bad Gateway")
            return
        self._record(client, method, f"{wanted[0]}:{wanted[1]}", "allowed", "on the allow-list")
        if method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            up_writer.write(_origin_form(lines, target))
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


def _origin_form(lines: list[str], target: str) -> bytes:
    """Rewrite an absolute-URI request for the origin server: path only, no proxy headers, and
    one request per connection (a kept-alive connection must not carry a request elsewhere)."""
    parts = urlsplit(target)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    method, _, rest = lines[0].partition(" ")
    version = rest.rpartition(" ")[2] or "HTTP/1.1"
    headers = [h for h in lines[1:] if h and not h.lower().startswith(("proxy-", "connection:"))]
    return "\r\n".join([f"{method} {path} {version}", *headers, "Connection: close", "", ""]).encode("latin-1")


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        try:
            writer.close()
        except RuntimeError:
            pass


async def _reply(writer: asyncio.StreamWriter, code: int, text: str) -> None:
    body = f"trialbox egress proxy: {code} {text}\n".encode()
    writer.write(f"HTTP/1.1 {code} {text}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    try:
        await writer.drain()
    finally:
        writer.close()


def _print_json(entry: dict[str, object]) -> None:
    print(json.dumps(entry), flush=True)


async def serve(allow: tuple[str, int], port: int, host: str = "0.0.0.0",
                log: LogSink | None = None) -> asyncio.AbstractServer:
    proxy = EgressProxy(allow, log)
    return await asyncio.start_server(proxy.handle, host, port, limit=MAX_HEAD)


def main() -> int:
    try:
        allow = parse_allow(os.environ.get("TRIALBOX_EGRESS_ALLOW", ""))
    except ValueError as exc:
        print(f"egress proxy: {exc}", file=sys.stderr)
        return 2
    port = int(os.environ.get("TRIALBOX_EGRESS_PORT", DEFAULT_PORT))

    async def run() -> None:
        server = await serve(allow, port)
        _print_json({"time": round(time.time(), 3), "event": "listening", "port": port,
                     "allow": f"{allow[0]}:{allow[1]}"})
        async with server:
            await server.serve_forever()

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
