"""The controller side of the appliance: hardware, Docker engine, images, compose stack.

Everything here talks to the machine (``/dev``, ``/proc``, the Docker engine); nothing here
knows about scenarios or scores. The CLI calls these functions and prints what they return.
"""

from runner.stack.compose import (
    ComposeError,
    LlmStack,
    compose_files,
    down,
    port_in_use,
    up_llm,
    wait_healthy,
)
from runner.stack.doctor import Check, format_checks, run_checks
from runner.stack.engine import EngineProblem, check_compose, check_engine
from runner.stack.hardware import (
    DEVICES,
    DeviceChoice,
    DeviceError,
    HardwareFingerprint,
    detect_device,
    hardware_fingerprint,
)
from runner.stack.images import (
    BASE_IMAGE,
    IMAGES,
    ImageBuildError,
    build_image,
    ensure_base_image,
    image_tag,
    prepare_context,
)
from runner.stack.llm_container import (
    LlmContainer,
    LlmContainerError,
    find_llm_container,
    start_llm_container,
    stop_llm_container,
)

__all__ = [
    "BASE_IMAGE",
    "DEVICES",
    "IMAGES",
    "Check",
    "ComposeError",
    "DeviceChoice",
    "DeviceError",
    "EngineProblem",
    "HardwareFingerprint",
    "ImageBuildError",
    "LlmContainer",
    "LlmContainerError",
    "LlmStack",
    "build_image",
    "check_compose",
    "check_engine",
    "compose_files",
    "detect_device",
    "down",
    "ensure_base_image",
    "find_llm_container",
    "format_checks",
    "hardware_fingerprint",
    "image_tag",
    "port_in_use",
    "prepare_context",
    "run_checks",
    "start_llm_container",
    "stop_llm_container",
    "up_llm",
    "wait_healthy",
]
