"""Build ``trialbox/lemonade:dev``: the real Lemonade Server from Debian's archive, offline.

Lemonade Server, Debian's llama.cpp server and ggml are in Debian ``sid`` only today and need
its libc, so this image starts from its own base, ``trialbox/base:sid`` (bootstrapped here from
Debian's mirror by scripts/bootstrap-base-image, as the bookworm base is), not from the bookworm
base the Python images share. The package versions are pinned here and stamped on the image
(labels ``trialbox.lemonade.*``), so doctor and every scorecard can say what served; sid moves,
so images/lemonade/install-packages falls back to Debian's snapshot archive and otherwise
stops with one line naming the pinned and the newest versions and how to accept the newest.

The GPU backends are a build option (``TRIALBOX_LEMONADE_BACKENDS="vulkan"`` or ``"vulkan
hip"``): Vulkan adds ~40 MB, HIP over 1 GB plus Debian's ROCm libraries, so CI's default image
carries the CPU backend only. An image with GPU backends is tagged ``trialbox/lemonade:<backends>``
(``trialbox/lemonade:vulkan``, ``trialbox/lemonade:hip``) beside the CPU one.
"""

from __future__ import annotations

import os
from pathlib import Path

from runner.stack.image_build import BuiltImage, build_dockerfile, run_logged
from runner.stack.image_store import ImageBuildError, image_exists, image_labels, repo_root

LEMONADE = "lemonade"
#: The base this image builds on (scripts/bootstrap-base-image with TRIALBOX_BASE_SUITE=sid).
SID_BASE_IMAGE = "trialbox/base:sid"
#: The pins: what was tried here and works (issue "The real Lemonade Server", 2026-12-02).
LEMONADE_VERSION = "2026.39.1-2"
LLAMACPP_VERSION = "1:0.7.0+dfsg-2"
GGML_VERSION = "0.27.0-1"
#: Debian's snapshot archive date a build falls back to once the pins leave the mirror.
SNAPSHOT = "20261106T000000Z"
BACKENDS_ENV = "TRIALBOX_LEMONADE_BACKENDS"
ACCEPT_NEWEST_ENV = "TRIALBOX_LEMONADE_ACCEPT_NEWEST"
KNOWN_BACKENDS = ("cpu", "vulkan", "hip")
#: The model files the image serves: the very files llm-cpu serves (scripts/fetch-models).
MODEL_FILES = ("SmolLM2-135M-Instruct.Q4_1.gguf", "all-MiniLM-L6-v2.Q8_0.gguf")

#: Labels stamped on the image (what `doctor` and the scorecard's server identity read).
VERSION_LABEL = "trialbox.lemonade.version"
LLAMACPP_LABEL = "trialbox.lemonade.llamacpp"
GGML_LABEL = "trialbox.lemonade.ggml"
BACKENDS_LABEL = "trialbox.lemonade.backends"
SUITE_LABEL = "trialbox.lemonade.suite"


def backends_wanted(env: dict[str, str] | None = None) -> tuple[str, ...]:
    """The ggml backends to build in, from TRIALBOX_LEMONADE_BACKENDS (the CPU's always)."""
    text = (os.environ if env is None else env).get(BACKENDS_ENV, "")
    asked = [word for word in text.replace(",", " ").split() if word]
    unknown = [word for word in asked if word not in KNOWN_BACKENDS]
    if unknown:
        raise ImageBuildError(f"{BACKENDS_ENV}={text!r}: unknown backend(s) {', '.join(unknown)}; "
                              f"choose from {', '.join(KNOWN_BACKENDS)}")
    return ("cpu", *sorted({word for word in asked if word != "cpu"}))


def lemonade_tag(backends: tuple[str, ...] = ("cpu",)) -> str:
    """`trialbox/lemonade:dev` for the CPU image; `trialbox/lemonade:vulkan-hip` with GPU backends."""
    gpu = [name for name in backends if name != "cpu"]
    return f"trialbox/{LEMONADE}:{'-'.join(gpu) if gpu else 'dev'}"


def ensure_sid_base(root: Path) -> str:
    """The sid base, bootstrapped from Debian's mirror when it is not there yet."""
    if image_exists(SID_BASE_IMAGE):
        return SID_BASE_IMAGE
    log = root / ".cache" / "build" / "base-sid" / "build.log"
    run_logged([str(root / "scripts" / "bootstrap-base-image")], log, "bootstrap-base-image (sid)",
               root, env={"TRIALBOX_BASE_SUITE": "sid", "TRIALBOX_BASE_IMAGE": SID_BASE_IMAGE})
    return SID_BASE_IMAGE


def ensure_model_files(root: Path) -> None:
    """The bundled GGUF files in .cache/models (scripts/fetch-models, the llm-cpu build's code)."""
    models = root / ".cache" / "models"
    if all((models / name).is_file() for name in MODEL_FILES):
        return
    log = root / ".cache" / "build" / LEMONADE / "fetch-models.log"
    run_logged([str(root / "scripts" / "fetch-models")], log, "fetch-models", root)


def build_lemonade_image(root: Path | None = None, env: dict[str, str] | None = None) -> BuiltImage:
    """Build the Lemonade image for the backends asked for (CPU only by default)."""
    root = root or repo_root()
    env = dict(os.environ if env is None else env)
    backends = backends_wanted(env)
    base = ensure_sid_base(root)
    ensure_model_files(root)
    accept_newest = env.get(ACCEPT_NEWEST_ENV, "").strip() == "1"
    build_args = {
        "LEMONADE_VERSION": LEMONADE_VERSION, "LLAMACPP_VERSION": LLAMACPP_VERSION,
        "GGML_VERSION": GGML_VERSION, "GGML_BACKENDS": " ".join(backends),
        "SNAPSHOT": SNAPSHOT, "ACCEPT_NEWEST": "1" if accept_newest else "0",
    }
    labels = {
        VERSION_LABEL: "newest" if accept_newest else LEMONADE_VERSION,
        LLAMACPP_LABEL: "newest" if accept_newest else LLAMACPP_VERSION,
        GGML_LABEL: "newest" if accept_newest else GGML_VERSION,
        BACKENDS_LABEL: ",".join(backends),
        SUITE_LABEL: "sid",
    }
    return build_dockerfile(LEMONADE, root, base, tag=lemonade_tag(backends),
                            build_args=build_args, labels=labels)


def image_versions_of(labels: dict[str, str]) -> dict[str, str]:
    """The versions stamped on a trialbox/lemonade image, from its labels; {} for another image
    (the registry's Lemonade carries none of them)."""
    if VERSION_LABEL not in labels:
        return {}
    return {"lemonade-server": labels[VERSION_LABEL],
            "llama.cpp-tools": labels.get(LLAMACPP_LABEL, "unknown"),
            "libggml0": labels.get(GGML_LABEL, "unknown"),
            "backends": labels.get(BACKENDS_LABEL, "unknown"),
            "suite": labels.get(SUITE_LABEL, "unknown")}


def image_versions(tag: str) -> dict[str, str] | None:
    """The versions stamped on the image `tag`; None when there is no such image."""
    labels = image_labels(tag)
    return None if labels is None else image_versions_of(labels)


__all__ = [
    "LEMONADE",
    "LEMONADE_VERSION",
    "SID_BASE_IMAGE",
    "backends_wanted",
    "build_lemonade_image",
    "image_versions",
    "image_versions_of",
    "lemonade_tag",
]
