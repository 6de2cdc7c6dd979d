"""The admin gate from inside a sandbox, under the Lemonade overlays' network layout, against
the real Lemonade Server.

As compose.lemonade.yaml / compose.rocm.yaml and a sandbox lay them out: Lemonade
(`trialbox/lemonade:dev`, the suite's shared one) on a stack network only; the front door on the
stack network and, as `llm`, on an internal sandbox network; a sandbox container on the sandbox
network only. From the sandbox: load/unload/delete/params/pull are refused and never reach
Lemonade (its models keep their processes and windows), inference works, and Lemonade itself
cannot be reached at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import docker
import pytest
from labelled_containers import LLM_CPU_IMAGE, new_tag, sweep_label
from lemonade_layout import LemonadeLayout, loaded_models

# Run inside the sandbox container: every request and what came back, as one JSON line.
PROBE = r'''
import json, os, httpx
out = {}
for route in ("load", "unload", "delete", "params", "pull"):
    r = httpx.post(f"http://llm:13305/api/v1/{route}", json={"model_name": "Gemma-4-E4B-it-GGUF",
                   "ctx_size": 131072}, timeout=10)
    out[route] = r.status_code
chat = httpx.post("http://llm:13305/api/v1/chat/completions", timeout=60, json={
    "model": "Gemma-4-E4B-it-GGUF", "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]})
out["chat"] = [chat.status_code, chat.json().get("usage", {}).get("completion_tokens")]
try:
    httpx.get(f"http://{os.environ['LEMONADE_IP']}:13305/api/v1/health", timeout=3)
    out["lemonade_direct"] = "reached"
except httpx.HTTPError as exc:
    out["lemonade_direct"] = type(exc).__name__
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def sandbox_network(real_lemonade: LemonadeLayout) -> Iterator[tuple[docker.DockerClient, str]]:
    client = docker.from_env()
    tag = new_tag("front-door-lemonade")
    try:
        network = client.networks.create(f"tbx-{tag}-sbx", internal=True, labels={"trialbox.run": tag})
        network.connect(real_lemonade.door, aliases=["llm"])
        yield client, tag
    finally:
        try:
            client.networks.get(f"tbx-{tag}-sbx").disconnect(real_lemonade.door, force=True)
        except docker.errors.DockerException:
            pass
        sweep_label(tag)
        client.close()


def test_a_sandbox_cannot_change_the_model_but_can_use_it(
    real_lemonade: LemonadeLayout, sandbox_network: tuple[docker.DockerClient, str]
) -> None:
    client, tag = sandbox_network
    before = loaded_models(real_lemonade.health())
    output = client.containers.run(
        LLM_CPU_IMAGE, entrypoint=["python", "-c", PROBE], name=f"tbx-{tag}-sandbox",
        environment={"LEMONADE_IP": real_lemonade.lemonade_url.split("//")[1].split(":")[0]},
        network=f"tbx-{tag}-sbx", labels={"trialbox.run": tag}, remove=True,
        stdout=True, stderr=True,
    )
    result = json.loads(output.decode().strip().splitlines()[-1])
    assert result["load"] == 403 and result["delete"] == 403
    assert result["params"] == 403 and result["pull"] == 403
    assert result["unload"] == 200  # answered "kept resident" by the door, never passed on
    assert result["chat"][0] == 200 and 1 <= result["chat"][1] <= 4
    assert result["lemonade_direct"] != "reached"
    assert loaded_models(real_lemonade.health()) == before  # no state change reached Lemonade
