"""What trialbox runs inside a sandbox's container with ``docker exec``: UI requests, DB snapshots,
a command fed bytes on its stdin."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, cast

from docker.errors import APIError, NotFound
from docker.models.containers import Container

from runner.sandbox._container import GAIA_HOME, UI_PORT, state_of
from runner.sandbox._hardening import read_file
from runner.sandbox._protocol import SandboxError
from runner.sandbox._ui import UiReply
from runner.system.writes import atomic_write_bytes

#: Longest one ``docker exec`` request to the UI may take (a device switch answers in < 1 s).
UI_REQUEST_TIMEOUT_S = 30

# GAIA's chat DB runs in WAL mode: copying the file alone can miss committed rows, so take a
# consistent snapshot with SQLite's backup API inside the container, then copy that out.
_SNAPSHOT = (
    "import sqlite3, sys, os\n"
    "src = sys.argv[1]\n"
    "if os.path.exists(src):\n"
    "    out = sqlite3.connect('/tmp/gaia_chat.db')\n"
    "    sqlite3.connect(src).backup(out)\n"
    "    out.close()\n"
)


def snapshot_chat_db(container: Container, dest: Path) -> None:
    """The chat DB, snapshotted inside the container, copied to ``dest``/gaia_chat.db."""
    result = container.exec_run(["python", "-c", _SNAPSHOT, f"{GAIA_HOME}/chat/gaia_chat.db"])
    if result.exit_code != 0:
        atomic_write_bytes(dest / "gaia_chat.db.error", cast(bytes, result.output))  # not streamed
        raise SandboxError(f"the chat database snapshot failed (exit {result.exit_code}); "
                           "see gaia_chat.db.error")
    # /tmp is a tmpfs in a hardened sandbox: `docker cp` cannot see into it on Docker 20.10.
    data = read_file(container, "/tmp/gaia_chat.db")
    if data is not None:
        atomic_write_bytes(dest / "gaia_chat.db", data)


# One request to the UI on the container's loopback (urllib: the image has no curl). Proxies
# are ignored on purpose: the UI is in this very network namespace. Prints {"status", "body"};
# exit 4 when nothing answers at all.
_UI_REQUEST = (
    "import json, sys, urllib.error, urllib.request\n"
    "method, url, body, timeout = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])\n"
    "opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))\n"
    "request = urllib.request.Request(url, method=method, data=body.encode() if body else None,\n"
    "    headers={'X-Gaia-UI': '1', 'Content-Type': 'application/json'})\n"
    "try:\n"
    "    reply = opener.open(request, timeout=timeout)\n"
    "    status, data = reply.status, reply.read()\n"
    "except urllib.error.HTTPError as error:\n"
    "    status, data = error.code, error.read()\n"
    "except OSError as error:\n"
    "    sys.stderr.write(str(error))\n"
    "    sys.exit(4)\n"
    "sys.stdout.write(json.dumps({'status': status, 'body': data.decode('utf-8', 'replace')}))\n"
)


def exec_ui_request(ui: Container, method: str, path: str, body: dict[str, Any] | None) -> UiReply:
    """One request to the UI from inside its own container: its port is on loopback only."""
    url = f"http://127.0.0.1:{UI_PORT}{path}"
    payload = json.dumps(body) if body is not None else ""
    try:
        result = ui.exec_run(["python", "-c", _UI_REQUEST, method, url, payload, str(UI_REQUEST_TIMEOUT_S)],
                             demux=True)
    except (APIError, NotFound) as exc:
        raise SandboxError(f"cannot reach the Agent UI in {ui.name}: {state_of(ui) or exc}") from exc
    # demux=True: (stdout, stderr) bytes or None each (docker-py's stubs say otherwise).
    stdout, stderr = cast("tuple[bytes | None, bytes | None]", result.output)
    if result.exit_code != 0:
        state = state_of(ui)
        if state is not None:  # the container died under the request: say that, not "exit 137"
            raise SandboxError(f"the Agent UI container {ui.name} {state} (during {method} {path})")
        why = (stderr or b"").decode(errors="replace").strip()[-300:]
        raise SandboxError(f"the Agent UI in {ui.name} did not answer {method} {path} "
                           f"(exit {result.exit_code}): {why}")
    reply = json.loads(stdout or b"{}")
    return UiReply(status=int(reply["status"]), text=str(reply["body"]))


#: How long an exec's exit code may lag behind the end of its output stream.
EXIT_CODE_WAIT_S = 5.0


def exec_with_input(container: Container, command: list[str], data: bytes,
                    timeout_s: float) -> tuple[int, bytes]:
    """Run ``command`` in ``container`` with ``data`` on its stdin; its exit code and its output
    (stdout and stderr as they came). The SDK's ``exec_run`` cannot feed stdin, so this writes
    to the exec's own socket. No end-of-file is sent (the SDK's socket is a different object per
    transport, with no common way to half-close it), so ``command`` must read exactly
    ``len(data)`` bytes (``head -c``), also when it fails: one that stops reading early leaves
    the engine holding the stream for seconds. Nothing here touches the container's filesystem
    from outside, so it works on its tmpfs mounts and under a read-only root, where
    ``put_archive`` does not. ``timeout_s`` bounds each wait on the socket; SandboxError when
    the engine refuses or the socket stalls."""
    if container.client is None:
        raise SandboxError(f"no Docker client for {container.name}")
    api = container.client.api
    try:
        exec_id = str(api.exec_create(container.id, command, stdin=True)["Id"])
        sock = api.exec_start(exec_id, socket=True)
    except (APIError, NotFound) as exc:
        raise SandboxError(f"cannot run {command[0]} in {container.name}: "
                           f"{state_of(container) or exc}") from exc
    raw: Any = getattr(sock, "_sock", sock)  # the socket under the SDK's SocketIO wrapper
    received = bytearray()
    try:
        raw.settimeout(timeout_s)
        try:
            raw.sendall(data)
            # Read until the engine closes the stream (the command ended). Not
            # docker.utils.socket: its read polls without a timeout, so a stalled exec would
            # hold this thread forever.
            while chunk := raw.recv(65536):
                received += chunk
        except ConnectionError:
            # The command ended before reading all of `data` and the engine reset the stream,
            # output and all (seen: 1 MB and 20 MB to a command failing at once, reset after
            # 7 s and 30 s): the exit code below still says how it ended.
            pass
    except TimeoutError as exc:
        raise SandboxError(f"{command[0]} in {container.name} stalled for {timeout_s:g} s") from exc
    except OSError as exc:
        raise SandboxError(f"{command[0]} in {container.name}: the exec's stream broke "
                           f"({state_of(container) or exc})") from exc
    finally:
        sock.close()
        if raw is not sock:
            raw.close()
    deadline = time.monotonic() + EXIT_CODE_WAIT_S
    while (state := api.exec_inspect(exec_id))["Running"] and time.monotonic() < deadline:
        time.sleep(0.05)
    code = state["ExitCode"]
    if state["Running"] or code is None:
        raise SandboxError(f"{command[0]} in {container.name} gave no exit code")
    return int(code), _unframed(bytes(received))


def _unframed(stream: bytes) -> bytes:
    """The payload of a non-TTY exec's stream: Docker multiplexes stdout and stderr in frames
    of an 8-byte header (stream, three zero bytes, the length big-endian) and that many bytes."""
    payload, at = bytearray(), 0
    while at + 8 <= len(stream):
        size = int.from_bytes(stream[at + 4:at + 8], "big")
        payload += stream[at + 8:at + 8 + size]
        at += 8 + size
    return bytes(payload)
