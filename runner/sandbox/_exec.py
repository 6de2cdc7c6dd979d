"""What trialbox runs inside a sandbox's container with ``docker exec``: UI requests, DB snapshots."""

from __future__ import annotations

import json
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
