"""Requests to a sandbox's Agent UI itself — the two switches GAIA's MCP tools do not offer
(a session's device, the model override) — without the UI's port being reachable.

Why: the Agent UI has no authentication of its own. In a Docker sandbox it therefore listens
on its container's loopback only (the MCP bridge shares that network namespace and reaches it
there), so no host process can drive it; trialbox reaches it with ``docker exec`` instead (see
``runner.sandbox.docker``). Local and attached sandboxes have a loopback or user-given URL and
use plain HTTP (``http_ui_request``). Every request carries ``X-Gaia-UI: 1``: the UI refuses
mutations without it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

#: The header GAIA's UI demands on every mutating request.
UI_HEADERS = {"X-Gaia-UI": "1"}


@dataclass(frozen=True)
class UiReply:
    """What the Agent UI answered: the HTTP status and the body as text."""

    status: int
    text: str

    def json(self) -> Any:
        """The body as JSON; {} when it is not JSON (callers check ``status`` first)."""
        try:
            return json.loads(self.text)
        except ValueError:
            return {}


async def http_ui_request(
    ui_url: str, method: str, path: str, body: dict[str, Any] | None = None, timeout_s: float = 30
) -> UiReply:
    """One request to an Agent UI the caller can reach over HTTP (loopback or attached)."""
    async with httpx.AsyncClient(timeout=timeout_s) as http:
        reply = await http.request(method, f"{ui_url.rstrip('/')}{path}", json=body, headers=UI_HEADERS)
    return UiReply(status=reply.status_code, text=reply.text)
