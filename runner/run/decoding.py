"""--repeatable-decoding: each Docker sandbox's chat requests decoded greedily with one seed,
held by a lease at the LLM's front door while the sandbox lives."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from runner.report import SAMPLED_DECODING
from runner.run.errors import InfraError, UsageError
from runner.run.settings import Backend, RunSettings
from runner.sandbox import SandboxError
from trialbox_llm.decoding import DECODING_PATH, DEFAULT_SEED, DEFAULT_TTL_S, DecodingRequest


def decoding_label(settings: RunSettings) -> str:
    """How the run's sandboxes decoded, as the scorecard records it (compare's Setup shows it)."""
    if settings.repeatable_decoding:
        return f"repeatable (greedy, seed {DEFAULT_SEED}, forced at the LLM's front door)"
    return SAMPLED_DECODING


class RepeatableDecoding:
    """The docker backend, with each sandbox's chat requests decoded greedily with one seed.

    Once a sandbox is ready its address (how the front door names it, `trialbox_llm.meter`)
    gets a policy at the front door (`trialbox_llm.decoding`, admin token), renewed while it
    lives and cleared when it is stopped; a runner that dies leaves a lease that lapses by
    itself. Everything else is the wrapped backend's."""

    def __init__(self, inner: Any, token: str) -> None:
        self.inner, self.token = inner, token
        self._renewals: dict[int, tuple[Any, asyncio.Task[None]]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def _set(self, box: Any, mode: str) -> None:
        lease = DecodingRequest(client=box.llm_client, mode=mode)
        async with httpx.AsyncClient(timeout=10) as http:
            reply = await http.post(f"{box.llm_url.rstrip('/')}{DECODING_PATH}",
                                    json=lease.model_dump(),
                                    headers={"Authorization": f"Bearer {self.token}"})
        if reply.status_code != 200:
            raise SandboxError(f"the LLM server refused --repeatable-decoding for sandbox "
                               f"{box.scenario_id} (HTTP {reply.status_code}: "
                               f"{reply.text[:200]}); rebuild it with `trialbox images` and "
                               "restart it with `trialbox up`")

    async def _renew(self, box: Any) -> None:
        while True:
            await asyncio.sleep(DEFAULT_TTL_S / 3)
            try:
                await self._set(box, "repeatable")
            except (httpx.HTTPError, SandboxError):
                continue  # the next renewal tries again; the lease outlasts two misses

    async def ready(self, begun: Any) -> Any:
        box = await self.inner.ready(begun)
        if not box.llm_client:
            raise SandboxError("--repeatable-decoding: the sandbox has no address of its own at "
                               "the LLM's front door")
        try:
            await self._set(box, "repeatable")
        except httpx.HTTPError as exc:
            raise SandboxError(f"--repeatable-decoding: the LLM server did not answer: {exc!r}") from exc
        self._renewals[id(begun)] = (box, asyncio.create_task(self._renew(box)))
        return box

    async def stop(self, begun: Any) -> None:
        held = self._renewals.pop(id(begun), None)
        if held is not None:
            box, renewal = held
            renewal.cancel()
            try:
                await self._set(box, "sampled")
            except (httpx.HTTPError, SandboxError):
                pass  # the lease lapses by itself
        await self.inner.stop(begun)


def with_decoding(settings: RunSettings, backend: Any) -> Any:
    """`backend`, with repeatable decoding when the run asks for it (docker backend only: a
    local sandbox shares 127.0.0.1 with the judge, the simulator and other runs, so its
    requests cannot be told apart at the front door)."""
    if not settings.repeatable_decoding:
        return backend
    if settings.target_url or settings.backend is not Backend.DOCKER:
        raise UsageError("--repeatable-decoding needs the docker backend (each sandbox its own "
                         "address at the LLM's front door); drop --backend local / --target-url")
    from runner.sandbox import llm_admin_token

    token = llm_admin_token(settings.llm_container)
    if not token:
        raise InfraError("--repeatable-decoding needs the LLM server's admin token and none was "
                         f"found ({settings.llm_container}); start the stack with `trialbox up`")
    return RepeatableDecoding(backend, token)

