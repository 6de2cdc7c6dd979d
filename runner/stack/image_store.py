"""What the Docker engine holds of trialbox's images: their tags, labels and ids, asked one way.

Every image module reads the engine through these few calls and raises ``ImageBuildError``,
so a missing image and an engine that does not answer read the same wherever they are met.
"""

from __future__ import annotations

import os
from pathlib import Path

import docker
from docker.errors import DockerException, ImageNotFound
from docker.models.images import Image

# The images trialbox builds, in build order (each is independent; the order is for humans).
IMAGES: tuple[str, ...] = ("llm-cpu", "agent-ui", "runner", "fixer", "lemonade")
# The local, registry-free base (scripts/bootstrap-base-image). TRIALBOX_BASE_IMAGE overrides
# it, e.g. with python:3.11-slim where a registry answers.
BASE_IMAGE = "trialbox/base:bookworm"


class ImageBuildError(RuntimeError):
    """One image could not be built; the message carries the command and the last log lines."""


def repo_root() -> Path:
    """The checkout this package runs from (the build context for every image)."""
    return Path(__file__).resolve().parents[2]


def image_tag(name: str) -> str:
    return f"trialbox/{name}:dev"


def base_image() -> str:
    return os.environ.get("TRIALBOX_BASE_IMAGE", BASE_IMAGE)


def _find_image(tag: str) -> Image | None:
    """The image with that tag, None when there is none."""
    try:
        client = docker.from_env()
        try:
            return client.images.get(tag)
        finally:
            client.close()
    except ImageNotFound:
        return None
    except DockerException as error:
        raise ImageBuildError(f"cannot ask the Docker engine about {tag}: {error}") from error


def image_exists(tag: str) -> bool:
    return _find_image(tag) is not None


def image_labels(tag: str) -> dict[str, str] | None:
    """An image's labels; None when no image has that tag."""
    image = _find_image(tag)
    return None if image is None else dict(image.labels or {})


def image_id(tag: str) -> str:
    """An image's id; ``absent`` when no image has that tag (a digest input like any other)."""
    image = _find_image(tag)
    return "absent" if image is None else str(image.id)
