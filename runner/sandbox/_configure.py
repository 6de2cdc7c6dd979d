"""Settings a sandbox applies to its fresh Agent UI once it answers, the way a user would.

The chat model is one: GAIA 0.25.1 picks a turn's model as the user's ``custom_model`` setting
(Settings → model override), else the agent's preferred model, else the session's default
(``gaia.ui._chat_helpers.resolve_session_model``). ``--agent-model`` therefore sets that same
override through the UI's own route, ``PUT /api/settings`` — it wins over everything else, and
it lives in the sandbox's chat database, so it ends with the sandbox.
"""

from __future__ import annotations

import httpx

from runner.sandbox._protocol import SandboxError


async def set_agent_model(ui_url: str, model: str) -> None:
    """Make ``model`` the model every turn of this Agent UI asks the LLM server for."""
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.put(
            f"{ui_url}/api/settings",
            json={"custom_model": model},
            headers={"X-Gaia-UI": "1"},  # the UI refuses mutations without it
        )
    if reply.status_code != 200 or reply.json().get("custom_model") != model:
        raise SandboxError(
            f"the Agent UI at {ui_url} did not take --agent-model {model}: "
            f"HTTP {reply.status_code} {reply.text[:300]}"
        )
