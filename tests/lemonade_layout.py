"""The real Lemonade Server as the test suite shares it: one `trialbox/lemonade:dev` container
on a stack network the suite made, with trialbox's front door before it — compose.lemonade.yaml's
layout, started the one way scripts start it (runner/stack/lemonade_container.py).

One per test session (`real_lemonade` in tests/conftest.py): lemond starts in seconds, but its
models take memory, and every module that needs Lemonade's real answers asks the same server.
A module that changes the server's state puts it back before it ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import docker
import httpx
from docker.models.containers import Container
from labelled_containers import new_tag, sweep_label

from runner.stack.labels import RUN_LABEL
from runner.stack.lemonade_container import start_front_door, start_lemonade

#: The front door's admin token in the suite's layout (at least 32 characters).
ADMIN_TOKEN = "lemonade-layout-admin-token-0123456789abcdef"


@dataclass(frozen=True)
class LemonadeLayout:
    """Lemonade on the stack network only, the front door on it too (sandboxes join the door)."""

    tag: str
    stack_network: str
    lemonade: Container
    #: lemond itself, at its address on the stack network.
    lemonade_url: str
    door: Container
    #: The front door, at its address on the stack network (the host routes to it).
    door_url: str
    admin_token: str

    def health(self) -> dict[str, object]:
        """Lemonade's own health reply (asked directly, not through the door)."""
        return dict(httpx.get(f"{self.lemonade_url}/api/v1/health", timeout=10).json())


def loaded_models(health: dict[str, object]) -> dict[str, tuple[object, object]]:
    """model name → (its llama-server pid, its window): a restart or reload changes one."""
    entries = health.get("all_models_loaded") or []
    return {str(e["model_name"]): (e.get("pid"), (e.get("recipe_options") or {}).get("ctx_size"))
            for e in entries if isinstance(e, dict)}  # type: ignore[union-attr]


@contextmanager
def lemonade_layout(purpose: str) -> Iterator[LemonadeLayout]:
    client = docker.from_env()
    tag = new_tag(purpose)
    labels = {RUN_LABEL: tag}
    try:
        stack = client.networks.create(f"tbx-{tag}-stack", labels=labels)
        server = start_lemonade(f"tbx-{tag}-lemonade", labels, stack.name, client=client)
        door, door_url = start_front_door(f"tbx-{tag}-llm", labels, stack.name, f"{server.url}",
                                          admin_token=ADMIN_TOKEN, client=client)
        yield LemonadeLayout(tag, str(stack.name), server.container, server.url, door, door_url,
                             ADMIN_TOKEN)
    finally:
        sweep_label(tag)
        client.close()
