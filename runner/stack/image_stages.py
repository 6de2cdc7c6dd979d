"""Builder stages and stale images: tag each build's stages, remove what a build left untagged.

The legacy builder leaves each multi-stage build's builder stage as an untagged image (the
705/814 MB ``<none>`` images), and a rebuilt image leaves its predecessor untagged. The builder
stage is the layer cache of the next build, so it is tagged (``trialbox/<name>:stage-<stage>``)
rather than deleted; after a build, the untagged images it left (labelled
``trialbox.image=<name>``, or the stage its tag moved away from) are removed; those in use by a
container stay.
"""

from __future__ import annotations

import re

import docker
from docker.errors import DockerException, ImageNotFound

from runner.stack.image_store import ImageBuildError

_STEP_FROM = re.compile(r"^Step \d+/\d+ : FROM \S+(?:\s+AS\s+(?P<stage>\S+))?\s*$", re.IGNORECASE)
_LAYER = re.compile(r"^ ---> (?P<id>[0-9a-f]{12,64})\s*$")


def stage_tips(build_log: str) -> dict[str, str]:
    """Named builder stage → the image id it ended at, read from the legacy builder's log.

    A stage ends where the next ``FROM`` step starts; the last `` ---> <id>`` before it is the
    stage's image (the one the legacy builder would otherwise leave untagged)."""
    tips: dict[str, str] = {}
    stage: str | None = None
    last: str | None = None
    for line in build_log.splitlines():
        step = _STEP_FROM.match(line)
        if step:
            if stage and last:
                tips[stage] = last
            stage, last = step.group("stage"), None
            continue
        layer = _LAYER.match(line)
        if layer:
            last = layer.group("id")
    return tips


def stage_tag(tag: str, stage: str) -> str:
    return f"{tag.rsplit(':', 1)[0]}:stage-{stage}"


def tag_stages(tag: str, tips: dict[str, str]) -> list[str]:
    """Tag each builder stage (the next build's cache), so it is not left as ``<none>``;
    returns the ids those tags pointed at before, when they moved (now stale)."""
    replaced: list[str] = []
    if not tips:
        return replaced
    client = docker.from_env()
    try:
        for stage, image_id in tips.items():
            repository, version = stage_tag(tag, stage).rsplit(":", 1)
            try:
                previous: str | None = str(client.images.get(f"{repository}:{version}").id)
            except ImageNotFound:
                previous = None
            image = client.images.get(image_id)
            image.tag(repository, version)
            if previous and previous != image.id:
                replaced.append(previous)
    except DockerException as error:
        raise ImageBuildError(f"could not tag the builder stages of {tag}: {error}") from error
    finally:
        client.close()
    return replaced


def remove_stale_images(name: str, replaced: list[str] | None = None) -> tuple[tuple[str, ...], int]:
    """Remove what a build of ``name`` left untagged: images labelled ``trialbox.image=<name>``
    (a previous build of it) and the builder stages its stage tags moved away from (a stage
    built on the base image carries the base's labels, so it is found by its old tag instead;
    another image's stages, even if untagged, are left alone). Returns (ids removed, bytes).
    An image a container still uses is kept: the engine refuses, and a later build retries."""
    removed: list[str] = []
    freed = 0
    client = docker.from_env()
    try:
        # The low-level list: one call, no per-image inspect that a concurrent removal breaks.
        stale = set(replaced or ())
        for image in client.api.images(filters={"dangling": True, "label": "trialbox.image"}):
            labels = image.get("Labels") or {}
            if labels.get("trialbox.image") != name and image["Id"] not in stale:
                continue
            try:
                client.images.remove(image["Id"], force=False, noprune=False)
            except DockerException:
                continue  # in use by a container, or already gone
            removed.append(str(image["Id"]))
            freed += int(image.get("Size") or 0)
    finally:
        client.close()
    return tuple(removed), freed
