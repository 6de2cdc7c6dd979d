"""Collecting a sandbox's artifacts step by step: a step that fails is written down, not raised.

Why: the conversation is the result; the chat DB and logs only explain it. A container that
died mid-scenario (OOM, killed) must cost the artifacts it took with it and nothing more, and
the results must say which ones are missing and why (``collect-errors.txt``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from runner.system.writes import atomic_write
from trialbox_llm.admin import ADMIN_TOKEN_ENV

#: The file in an artifacts folder that lists what could not be collected.
ERRORS_FILE = "collect-errors.txt"


class Collector:
    """Runs collection steps into ``dest``; each failure becomes one line in ``problems``."""

    def __init__(self, dest: Path) -> None:
        self.dest = dest
        self.problems: list[str] = []
        dest.mkdir(parents=True, exist_ok=True)

    async def step(self, artifact: str, action: Callable[[], Awaitable[object]]) -> None:
        try:
            await action()
        except Exception as exc:  # noqa: BLE001 — any failure of one artifact is written down
            first = str(exc).strip().splitlines()
            self.problems.append(f"{artifact}: {type(exc).__name__}: {first[0] if first else ''}".rstrip(": "))

    def note(self, artifact: str, why: str) -> None:
        """An artifact known not to be collectable (no exception involved)."""
        self.problems.append(f"{artifact}: {why}")

    def finish(self) -> list[str]:
        """Write the problems (if any) beside the artifacts and return them."""
        if self.problems:
            atomic_write(self.dest / ERRORS_FILE, "\n".join(self.problems) + "\n")
        return list(self.problems)


#: The LLM front door's per-request records (images/llm-cpu/trialbox_llm/meter.py).
METER_PATH = "/trialbox/meter"


async def fetch_meter(
    llm_url: str, client: str | None, since: float, token: str | None = None
) -> list[dict[str, Any]] | None:
    """The front door's records of `client`'s requests since `since` (Unix time); None when
    the LLM server has no front door to ask (a bare Lemonade, an old llm-cpu) or it cannot be
    reached: the caller then says its figures are not the front door's.

    `client` None asks for the caller's own address (a Local sandbox: the Agent UI and the
    runner share 127.0.0.1); another client's records need the admin `token`."""
    params: dict[str, str] = {"since": repr(since)}
    if client:
        params["client"] = client
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            reply = await http.get(f"{llm_url.rstrip('/')}{METER_PATH}", params=params,
                                   headers=headers)
    except httpx.HTTPError:
        return None
    if reply.status_code != 200:
        return None
    try:
        records = reply.json().get("records")
    except ValueError:
        return None
    return [r for r in records if isinstance(r, dict)] if isinstance(records, list) else None


async def own_meter_records(box: Any, since: float) -> list[dict[str, Any]] | None:
    """The front door's records of sandbox `box`'s requests since `since`; None when there is
    none to ask, or when the sandbox shares its address there with others running now (its
    records would hold their calls)."""
    if getattr(box, "front_door_shared", False):
        return None
    return await fetch_meter(box.llm_url, getattr(box, "llm_client", None), since,
                             getattr(box, "llm_token", None))


async def save_llm_stats(
    dest: Path, llm_url: str, client: str | None, since: float, token: str | None = None,
    shared: bool = False,
) -> None:
    """`llm-stats.json`: this sandbox's own requests as the front door metered them. Without a
    front door to ask, the server's global `/stats` is written instead, labelled as such (it
    is the last completion of *any* client). `shared`: other sandboxes reached the front door
    from the same address meanwhile, and the file says their requests are among these."""
    records = await fetch_meter(llm_url, client, since, token)
    if records is not None:
        body: dict[str, Any] = {"source": "front_door", "client": client, "since": since,
                                "requests": len(records), "records": records}
        if shared:
            body["note"] = ("other sandboxes ran at the same time from the same address: these "
                            "records include their requests")
    else:
        async with httpx.AsyncClient(timeout=5) as http:
            stats = await http.get(f"{llm_url.rstrip('/')}/api/v1/stats")
        stats.raise_for_status()
        body = {"source": "server_global_stats",
                "note": "the LLM server's last completion of any client, not this sandbox's",
                "stats": stats.json()}
    atomic_write(dest / "llm-stats.json", json.dumps(body, indent=1))


def llm_admin_token(container: str | None = None) -> str | None:
    """The LLM server's admin token, for reading a sandbox's meter records: from the
    environment (the runner container gets it from compose), else from the LLM container."""
    token = os.environ.get(ADMIN_TOKEN_ENV, "").strip()
    if token or not container:
        return token or None
    from runner.stack.compose import admin_token_of  # late: the Docker client is heavy

    try:
        return admin_token_of(container)
    except Exception:  # noqa: BLE001 — no token only costs the front-door figures
        return None
