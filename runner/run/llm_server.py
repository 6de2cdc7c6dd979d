"""What the run's LLM server says about itself: its identity, the device it serves on (and
whether that is the one asked for), what its models take besides text, whether it answers, and
how fast it decodes one fixed request before the run (its reference)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import httpx

from runner.report import ReferenceDecode
from runner.run.errors import InfraError
from runner.run.settings import RunSettings
from runner.stack.hardware import loaded_chat_model

# The GAIA session device for each stack device: GAIA calls a ROCm GPU "gpu".
SESSION_DEVICE = {"cpu": "cpu", "rocm": "gpu", "npu": "npu", "vulkan": "gpu"}


def llm_identity(url: str) -> dict[str, Any]:
    """What the LLM server says it is (recorded in the scorecard), or why it could not say."""
    try:
        reply = httpx.get(f"{url}/api/v1/health", timeout=5)
        reply.raise_for_status()
        return dict(reply.json())
    except (httpx.HTTPError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


#: The stack device a GAIA session device stands for (SESSION_DEVICE read backwards; GAIA's
#: "gpu" is ROCm unless the run's `stack_device` says Vulkan).
STACK_DEVICE = {"cpu": "cpu", "gpu": "rocm", "npu": "npu"}
#: The compose variables that name the groups the Lemonade container is added to.
_DEVICE_GID_VARIABLES = {"rocm": ("TRIALBOX_VIDEO_GID", "TRIALBOX_RENDER_GID"),
                         "vulkan": ("TRIALBOX_VIDEO_GID", "TRIALBOX_RENDER_GID"),
                         "npu": ("TRIALBOX_ACCEL_GID",)}


def llm_system_info(url: str) -> dict[str, Any]:
    """The LLM server's `/api/v1/system-info` reply, or {} when it gives none."""
    try:
        reply = httpx.get(f"{url}/api/v1/system-info", timeout=10)
        reply.raise_for_status()
        body = reply.json()
    except (httpx.HTTPError, ValueError):
        return {}
    return dict(body) if isinstance(body, dict) else {}


def served_on(settings: RunSettings) -> Any:
    """What the LLM server says it serves on (runner.stack.hardware.ServedOn)."""
    from runner.stack.hardware import served_on_from

    requested = settings.stack_device or STACK_DEVICE.get(settings.device, settings.device)
    return served_on_from(requested, llm_identity(settings.llm_url), llm_system_info(settings.llm_url))


def _real_server(llm_container: str | None) -> dict[str, Any] | None:
    """The real LLM server's container (`docker inspect`) behind the front door
    `llm_container`: the `lemonade` service of the same compose project; None when there is none
    (llm-cpu, a server trialbox did not start) or Docker cannot say."""
    if not llm_container:
        return None
    import docker
    from docker.errors import DockerException

    try:
        client = docker.from_env()
        try:
            project = client.containers.get(llm_container).labels.get("com.docker.compose.project")
            found = client.containers.list(filters={"label": [
                f"com.docker.compose.project={project}", "trialbox.role=lemonade"]}) if project else []
            if not found:
                return None
            attrs = dict(found[0].attrs)
            attrs["ImageLabels"] = dict(client.images.get(attrs["Image"]).labels or {})
            return attrs
        finally:
            client.close()
    except DockerException:
        return None


def server_groups(llm_container: str | None) -> list[str]:
    """The groups the real LLM server's container was added to (compose `group_add`); []
    when there is no real server behind the front door."""
    server = _real_server(llm_container)
    added = server.get("HostConfig", {}).get("GroupAdd") if server else None
    return [str(group) for group in added or []]


def server_build(llm_container: str | None) -> dict[str, str]:
    """The real server's build, from its image's labels (runner/stack/lemonade_image.py stamps
    the pinned Debian versions and ggml backends): what the scorecard records beside what the
    server says of itself. {} for the registry image (no such labels) or no real server."""
    from runner.stack.lemonade_image import image_versions_of

    server = _real_server(llm_container)
    if server is None:
        return {}
    build = image_versions_of(server["ImageLabels"])
    return {**build, "image": str(server.get("Config", {}).get("Image", ""))} if build else {}


def check_served_device(settings: RunSettings, say: Callable[[str], None]) -> None:
    """Device truth, before any sandbox: asked for rocm/npu, the server must say it serves on
    it and its device nodes must be open to the server's groups. Otherwise InfraError (exit 3)
    with one line naming the cause and the fix, unless --allow-device-fallback (then a warning,
    and the scorecard's headline says so)."""
    from runner.stack.hardware import ACCELERATORS, unusable_nodes

    served = served_on(settings)
    if served.requested not in ACCELERATORS:
        return
    problems = []
    if served.fell_back:
        problems.append(f"the LLM server reports serving on {served.served_on} "
                        f"({'; '.join(served.evidence) or 'no backend named'})")
    if os.environ.get("TRIALBOX_IN_CONTAINER") != "1":  # the runner container has no /dev
        groups = [os.environ[name] for name in _DEVICE_GID_VARIABLES[served.requested]
                  if os.environ.get(name)] or server_groups(settings.llm_container)
        if bad := (unusable_nodes(served.requested, groups) if groups else []):
            problems.append(f"the server's groups ({', '.join(groups)}) cannot open {', '.join(bad)}")
    if not problems:
        return
    variables = " and ".join(_DEVICE_GID_VARIABLES[served.requested])
    line = (f"--device {served.requested}: {'; '.join(problems)} — set {variables} to the "
            "numeric groups owning the device nodes (`stat -c %g`) and restart the stack with "
            f"`trialbox up --device {served.requested}`, or pass --allow-device-fallback to "
            "run anyway")
    if not settings.allow_device_fallback:
        raise InfraError(line)
    say(f"warning: {line.split(' — ')[0]}; running anyway (--allow-device-fallback)")


def served_chat_model(identity: dict[str, Any]) -> str | None:
    """The chat model the server has loaded, as its health reply names it."""
    entry = loaded_chat_model(identity)
    return str(entry.get("model_name")) if entry else identity.get("model_loaded")


async def llm_health_probe(url: str) -> str | None:
    """None when the LLM server answers its health route, else why not (one line)."""
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            reply = await client.get(f"{url}/api/v1/health")
        if reply.status_code != 200:
            return f"{url}/api/v1/health answered HTTP {reply.status_code}"
    except httpx.HTTPError as exc:
        return f"{url}/api/v1/health: {type(exc).__name__}"
    return None


def served_capabilities(url: str) -> frozenset[str] | None:
    """What the served chat models take besides text, from Lemonade's model labels
    ("vision", "audio"), and "embeddings" when it serves an embeddings model; None when the
    server cannot say (only what no sandbox has is skipped then)."""
    try:
        reply = httpx.get(f"{url}/api/v1/models", timeout=5)
        reply.raise_for_status()
        models = reply.json().get("data", [])
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    labels = {str(label) for model in models if isinstance(model, dict)
              for label in model.get("labels", []) or []}
    return frozenset(labels & {"vision", "audio", "embeddings"})


#: The reference request: our own fixed prompt, greedy, its end of text ignored so that every
#: run decodes the same number of tokens, and never from the prompt cache. 64 tokens: ~1.6 s on
#: llm-cpu here, so it costs every run little; single rounds read 38.6–42.8 tokens/s.
REFERENCE_PROMPT = "List the planets of the solar system, one per line, each with one fact."
REFERENCE_TOKENS = 64


def reference_decode(url: str, model: str | None) -> ReferenceDecode | None:
    """The server's decode speed on the reference request, by llama.cpp's own timing; None when
    no chat model is loaded or the server gives no timings (it is a record, never a failure)."""
    if not model:
        return None
    body = {"model": model, "messages": [{"role": "user", "content": REFERENCE_PROMPT}],
            "max_tokens": REFERENCE_TOKENS, "temperature": 0, "top_k": 1, "seed": 1,
            "ignore_eos": True, "cache_prompt": False, "stream": False}
    try:
        reply = httpx.post(f"{url}/api/v1/chat/completions", json=body, timeout=60)
        reply.raise_for_status()
        timings = reply.json().get("timings") or {}
        return ReferenceDecode(model=model, tokens=timings["predicted_n"],
                               tokens_per_s=timings["predicted_per_second"],
                               prompt_tokens_per_s=timings.get("prompt_per_second"))
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
        return None
