"""The LLM keeps its CPU: every sandbox alive at the default concurrency spinning every core
leaves the LLM server's tokens/s near idle (issue 20, item 3). And the reference decode a run
records beside its wall clock says when the server has less.

Asserted loosely (≥ 70 % of idle, where the issue's target is 90 %): the figure itself is
scripts/bench-cpu-guard's, measured side by side over several rounds; this test only has to
catch the guard being gone (before it, the same load cut the rate to about half).
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any

import docker
import httpx
import pytest

from runner.run.llm_server import (
    REFERENCE_TOKENS,
    llm_identity,
    reference_decode,
    served_chat_model,
)
from runner.sandbox._hardening import (
    LLM_CPU_SHARES,
    ROLES,
    SANDBOXES_AT_DEFAULT_CONCURRENCY,
    container_options,
)
from runner.stack.cgroup import cpu_seconds

if TYPE_CHECKING:
    from labelled_containers import LlmCpu

pytestmark = [pytest.mark.containers, pytest.mark.timeout(600)]

UI_IMAGE = "trialbox/agent-ui:dev"
SPIN = ("import multiprocessing as m, os\n"
        "def spin():\n    while True: pass\n"
        "[m.Process(target=spin).start() for _ in range(os.cpu_count() or 1)]\n"
        "spin()\n")


def _tokens_per_s(url: str, model: str) -> float:
    made, started = 0, time.perf_counter()
    with httpx.Client(timeout=120) as http:
        for n in range(3):
            reply = http.post(f"{url}/api/v1/chat/completions", json={
                "model": model, "max_tokens": 32, "temperature": 0,
                "messages": [{"role": "user", "content": f"Count from {n} upwards, in words."}]})
            reply.raise_for_status()
            made += reply.json()["usage"]["completion_tokens"]
    return made / (time.perf_counter() - started)


def _busy_sandboxes(client: docker.DockerClient, tag: str) -> list[Any]:
    # As a run has them at the default concurrency: the sandbox in use, and the warm pool's
    # spare starting beside it (least weight, its higher start cap).
    return [client.containers.run(UI_IMAGE, entrypoint=["python", "-c", SPIN], detach=True,
                                  network="none", labels={"trialbox.run": tag, "trialbox.role": role},
                                  **container_options(role, spare=index > 0))
            for index in range(SANDBOXES_AT_DEFAULT_CONCURRENCY) for role in ROLES]


def test_busy_sandboxes_leave_the_llm_its_tokens_per_second(llm_cpu: LlmCpu) -> None:
    client = docker.from_env()
    llm_cpu.container.update(cpu_shares=LLM_CPU_SHARES)  # as compose/compose.yaml runs it
    models = httpx.get(f"{llm_cpu.url}/api/v1/models", timeout=30).json()["data"]
    model = next(m["id"] for m in models if "minilm" not in m["id"].lower())
    _tokens_per_s(llm_cpu.url, model)  # warm-up
    idle, busy = [], []
    for _ in range(2):  # A B A B: a noisy machine weighs on both alike
        idle.append(_tokens_per_s(llm_cpu.url, model))
        spinners = _busy_sandboxes(client, llm_cpu.tag)
        try:
            used = [cpu_seconds(str(c.id)) for c in spinners]
            time.sleep(2)
            assert all(c.reload() or c.status == "running" for c in spinners)
            # The benchmarks' CPU counter (runner.stack.cgroup) sees each spinner's work while
            # the LLM is idle (every spinner gets CPU then; a spare's weight yields it later).
            grown = [(cpu_seconds(str(c.id)) or 0.0) - (u or 0.0) for c, u in zip(spinners, used, strict=True)]
            assert None not in used and all(g > 0.05 for g in grown), (used, grown)
            busy.append(_tokens_per_s(llm_cpu.url, model))
        finally:
            for container in spinners:
                container.remove(force=True)
    assert cpu_seconds("0" * 64) is None  # no such container: no figure, not zero
    ratio = statistics.median(busy) / statistics.median(idle)
    assert ratio >= 0.7, f"busy {busy} vs idle {idle} tokens/s: {ratio:.2f} of idle"


def test_the_reference_decode_holds_still_and_finds_a_server_held_to_three_quarters_of_a_cpu(
        llm_cpu: LlmCpu) -> None:
    """The figure a run records beside its wall clock (run.llm_server.reference_decode), at the
    one round a run spends on it. Null: the same server twice reads the same within ±20 %
    (measured here: 38.6–42.8 tokens/s over seven rounds). Planted: held to three quarters of a
    CPU — about the drift seen between two evenings here, 72 against 111 tokens/s on
    llama-bench — it read 25.0–27.5, about 0.64 of free; the test asks for under 0.8, outside
    the null's band, so a reference blind to the change fails."""
    identity = llm_identity(llm_cpu.url)
    model = served_chat_model(identity)
    first, second = (reference_decode(llm_cpu.url, model) for _ in range(2))
    assert first is not None and second is not None
    assert first.model == model and first.tokens == REFERENCE_TOKENS
    assert 0.8 <= second.tokens_per_s / first.tokens_per_s <= 1.25, (first, second)
    llm_cpu.container.update(cpu_period=100_000, cpu_quota=75_000)
    try:
        held = reference_decode(llm_cpu.url, model)
    finally:
        llm_cpu.container.update(cpu_quota=-1)
    assert held is not None
    assert held.tokens_per_s < 0.8 * min(first.tokens_per_s, second.tokens_per_s), (first, second, held)
    # No chat model, no reference (a record, never a failure of the run).
    assert reference_decode(llm_cpu.url, None) is None
