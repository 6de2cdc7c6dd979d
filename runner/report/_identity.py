"""Which model really answered: the requested name and the model behind it, said plainly.

GAIA asks the LLM server for its default name (`Gemma-4-E4B-it-GGUF`); trialbox's llm-cpu
serves that name as an alias of a small bundled model and says so in `/api/v1/health`
(`all_models_loaded[].checkpoint`, `served_model`, `server`). A report that printed only the
requested name would claim a model that never ran, so every headline shows both.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from runner.report._models import RunConfig
from runner.stack.hardware import loaded_chat_model


def _model_text(entry: dict[str, Any]) -> str | None:
    """The model's own words: `SmolLM2-135M-Instruct Q4_1` from a GGUF file checkpoint; for a
    Hugging Face checkpoint (real Lemonade: `repo/name-GGUF:Q4_K_M`) the name and checkpoint."""
    checkpoint = str(entry.get("checkpoint") or "").strip()
    name = str(entry.get("served_model") or entry.get("model_name") or "").strip()
    if checkpoint.lower().endswith(".gguf"):
        stem = PurePosixPath(checkpoint).name[: -len(".gguf")]
        model, dot, quant = stem.rpartition(".")
        return f"{model} {quant}" if dot and model else stem
    if checkpoint and checkpoint != name:
        return f"{name} ({checkpoint})" if name else checkpoint
    return name or None


def _server_text(health: dict[str, Any]) -> str:
    server = health.get("server")
    if isinstance(server, dict) and server.get("name"):
        name = str(server["name"])
        # "trialbox-llm-cpu" reads as the product and its image: "trialbox llm-cpu".
        return (
            "trialbox " + name.removeprefix("trialbox-") if name.startswith("trialbox-") else name
        )
    version = health.get("version")
    return f"Lemonade Server {version}" if version else "Lemonade Server"


def served_model_of(llm_health: dict[str, Any]) -> str | None:
    """What really answers chat requests, from a recorded `/api/v1/health` reply.

    trialbox llm-cpu → "SmolLM2-135M-Instruct Q4_1 by trialbox llm-cpu"; real Lemonade →
    "Gemma-4-E4B-it-GGUF (unsloth/…:Q4_K_M) by Lemonade Server 9.1.4". None when the reply
    is missing, an error, or names no chat model.
    """
    if not isinstance(llm_health, dict) or not llm_health:
        return None
    entry = loaded_chat_model(llm_health)
    if entry is not None:
        model = _model_text(entry)
    else:
        loaded = llm_health.get("model_loaded")
        model = str(loaded) if loaded else None
    if model is None:
        return None
    return f"{model} by {_server_text(llm_health)}"


def served_model(config: RunConfig) -> str | None:
    """The config's own record, else what its recorded health reply says (older scorecards)."""
    return config.served_model or served_model_of(config.llm_server)


def model_line(config: RunConfig) -> str:
    """The name asked for, what answered under it, and the device, e.g.
    `Gemma-4-E4B-it-GGUF → served as SmolLM2-135M-Instruct Q4_1 by trialbox llm-cpu · device cpu`."""
    requested = config.agent_model or "not recorded"
    served = served_model(config)
    model = (
        f"{requested} → served as {served}"
        if served
        else f"{requested} (the LLM server did not report which model serves it)"
    )
    return f"{model} · {device_text(config)}"


#: GAIA's session device names for the stack devices they stand for.
_STACK_DEVICE = {"gpu": "rocm"}


def requested_device(config: RunConfig) -> str | None:
    """The stack device the run asked for (`config.device` holds GAIA's session name: `gpu`
    for rocm)."""
    return _STACK_DEVICE.get(config.device, config.device) if config.device else None


def served_elsewhere(config: RunConfig) -> bool:
    """The server said it served on another device than the run asked for. A server that
    named none (`unknown`, older scorecards: None) is no proof of a fallback."""
    served, asked = config.served_on, requested_device(config)
    return bool(served and asked and served != "unknown" and served != asked)


def device_text(config: RunConfig) -> str:
    """`device cpu`, or — when the server said it served on another device than was asked
    for — both, loudly: `device rocm requested, SERVED ON cpu (--allow-device-fallback)`."""
    asked = config.device or "unknown"
    served = config.served_on
    stack = _STACK_DEVICE.get(asked, asked)
    if served is None or served in ("unknown", stack) or stack not in ("rocm", "npu"):
        return f"device {asked}"
    allowed = " (--allow-device-fallback)" if config.device_fallback else ""
    return f"device {stack} requested, SERVED ON {served}{allowed}"
