"""Settings a sandbox applies to its fresh Agent UI once it answers, the way a user would.

The chat model is one: GAIA 0.25.1 picks a turn's model as the user's ``custom_model`` setting
(Settings → model override), else the agent's preferred model, else the session's default
(``gaia.ui._chat_helpers.resolve_session_model``). ``--agent-model`` therefore sets that same
override through the UI's own route, ``PUT /api/settings`` — it wins over everything else, and
it lives in the sandbox's chat database, so it ends with the sandbox.
"""

from __future__ import annotations

from typing import Any

from runner.sandbox._protocol import SandboxError
from runner.sandbox._ui import http_ui_request


async def set_agent_model(box: Any, model: str) -> None:
    """Make ``model`` the model every turn of ``box``'s Agent UI asks the LLM server for.

    ``box`` is a sandbox, reached through ``box.ui_request`` (``docker exec`` for a Docker
    sandbox, whose UI port is not reachable from the host), or a UI URL reachable over HTTP."""
    body = {"custom_model": model}
    if isinstance(box, str):
        where, reply = f"at {box}", await http_ui_request(box, "PUT", "/api/settings", body)
    else:
        where, reply = f"of sandbox {box.scenario_id}", await box.ui_request("PUT", "/api/settings", body)
    data = reply.json()
    if reply.status != 200 or not isinstance(data, dict) or data.get("custom_model") != model:
        raise SandboxError(
            f"the Agent UI {where} did not take --agent-model {model}: "
            f"HTTP {reply.status} {reply.text[:300]}"
        )
