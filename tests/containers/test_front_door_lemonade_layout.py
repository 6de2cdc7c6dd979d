"""The admin gate from inside a sandbox, under the ROCm overlay's network layout.

Three containers, as compose.rocm.yaml and a sandbox lay them out: a Lemonade stand-in
(`lemonade`, tests/integration/front_door_standin.py) on a stack network only; the front door
(`python -m trialbox_llm.front_door`, llm-cpu image) on the stack network and, as `llm`, on an
internal sandbox network; a sandbox container on the sandbox network only. From the sandbox:
load/unload/delete/params are refused and never reach Lemonade, inference works, and Lemonade
itself cannot be reached at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from labelled_containers import LLM_CPU_IMAGE, new_tag, sweep_label

TOKEN = "r" * 40
STANDIN = Path(__file__).resolve().parents[1] / "integration" / "front_door_standin.py"

# Run inside the sandbox container: every request and what came back, as one JSON line.
PROBE = r'''
import json, os, httpx
out = {}
for route in ("load", "unload", "delete", "params", "pull"):
    r = httpx.post(f"http://llm:13305/api/v1/{route}", json={"model_name": "Other-Model"}, timeout=10)
    out[route] = r.status_code
chat = httpx.post("http://llm:13305/api/v1/chat/completions", timeout=30, json={
    "model": "Qwen3-0.6B-GGUF", "messages": [{"role": "user", "content": "tokens=4"}]})
out["chat"] = [chat.status_code, chat.json().get("usage", {}).get("completion_tokens")]
try:
    httpx.get(f"http://{os.environ['LEMONADE_IP']}:13305/api/v1/health", timeout=3)
    out["lemonade_direct"] = "reached"
except httpx.HTTPError as exc:
    out["lemonade_direct"] = type(exc).__name__
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def layout() -> Iterator[tuple[docker.DockerClient, str]]:
    client = docker.from_env()
    tag = new_tag("front-door-rocm")
    labels = {"trialbox.run": tag}
    try:
        stack = client.networks.create(f"tbx-{tag}-stack", labels=labels)
        sandbox_net = client.networks.create(f"tbx-{tag}-sbx", internal=True, labels=labels)
        client.containers.run(
            LLM_CPU_IMAGE, name=f"tbx-{tag}-lemonade", entrypoint=["python"],
            command=["/standin.py", "13305", "0.0.0.0"], detach=True, labels=labels,
            network=stack.name, volumes={str(STANDIN): {"bind": "/standin.py", "mode": "ro"}},
        )
        stack.reload()
        door = client.containers.run(
            LLM_CPU_IMAGE, name=f"tbx-{tag}-llm", detach=True, labels=labels, network=stack.name,
            entrypoint=["python", "-m", "trialbox_llm.front_door"],
            command=["--upstream", f"http://tbx-{tag}-lemonade:13305", "--host", "0.0.0.0",
                     "--port", "13305"],
            environment={"TRIALBOX_LLM_ADMIN_TOKEN": TOKEN},
        )
        sandbox_net.connect(door, aliases=["llm"])
        yield client, tag
    finally:
        sweep_label(tag)
        client.close()


def test_a_sandbox_cannot_change_the_model_but_can_use_it(
    layout: tuple[docker.DockerClient, str]
) -> None:
    client, tag = layout
    # The front door and the stand-in start in about a second; the probe retries until then.
    script = ("import time, httpx\n"
              "for _ in range(100):\n"
              "    try:\n"
              "        httpx.get('http://llm:13305/api/v1/health', timeout=2).raise_for_status(); break\n"
              "    except Exception: time.sleep(0.2)\n" + PROBE)
    lemonade = client.containers.get(f"tbx-{tag}-lemonade")
    address = lemonade.attrs["NetworkSettings"]["Networks"][f"tbx-{tag}-stack"]["IPAddress"]
    output = client.containers.run(
        LLM_CPU_IMAGE, entrypoint=["python", "-c", script], name=f"tbx-{tag}-sandbox",
        environment={"LEMONADE_IP": address},
        network=f"tbx-{tag}-sbx", labels={"trialbox.run": tag}, remove=True,
        stdout=True, stderr=True,
    )
    result = json.loads(output.decode().strip().splitlines()[-1])
    assert result["load"] == 403 and result["delete"] == 403
    assert result["params"] == 403 and result["pull"] == 403
    assert result["unload"] == 200  # answered "kept resident" by the door, never passed on
    assert result["chat"] == [200, 4]
    assert result["lemonade_direct"] != "reached"
    changes = lemonade.exec_run(["python", "-c", "import httpx; print(httpx.get("
                                 "'http://127.0.0.1:13305/standin/changes').text)"])
    assert json.loads(changes.output.decode()) == []  # no state change reached Lemonade
