"""Build trialbox's images: base (bootstrapped if missing) → build context → ``docker build``.

The CLI is used for ``docker build`` rather than the SDK: the engine here has only the legacy
builder, and the CLI gives the same log a user would see when building by hand, which we keep
in ``.cache/build/<name>/build.log`` and quote from when a build fails.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import docker
from docker.errors import DockerException, ImageNotFound

# The images trialbox builds, in build order (each is independent; the order is for humans).
IMAGES: tuple[str, ...] = ("llm-cpu", "agent-ui", "runner")
# The local, registry-free base (scripts/bootstrap-base-image). TRIALBOX_BASE_IMAGE overrides
# it, e.g. with python:3.11-slim where a registry answers.
BASE_IMAGE = "trialbox/base:bookworm"
LOG_TAIL_LINES = 30


class ImageBuildError(RuntimeError):
    """One image could not be built; the message carries the command and the last log lines."""


@dataclass(frozen=True)
class BuiltImage:
    name: str
    tag: str
    image_id: str
    seconds: float
    size_bytes: int


def repo_root() -> Path:
    """The checkout this package runs from (the build context for every image)."""
    return Path(__file__).resolve().parents[2]


def image_tag(name: str) -> str:
    return f"trialbox/{name}:dev"


def base_image() -> str:
    return os.environ.get("TRIALBOX_BASE_IMAGE", BASE_IMAGE)


def image_exists(tag: str) -> bool:
    try:
        client = docker.from_env()
        try:
            client.images.get(tag)
            return True
        finally:
            client.close()
    except ImageNotFound:
        return False
    except DockerException as error:
        raise ImageBuildError(f"cannot ask the Docker engine about {tag}: {error}") from error


def _run_logged(cmd: list[str], log: Path, what: str, cwd: Path) -> None:
    """Run ``cmd`` with its output appended to ``log``; on failure raise with the log's tail."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as sink:
        sink.write(f"\n$ {' '.join(cmd)}\n")
        sink.flush()
        done = subprocess.run(cmd, cwd=cwd, stdout=sink, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        with log.open(errors="replace") as source:
            tail = "".join(deque(source, maxlen=LOG_TAIL_LINES))
        raise ImageBuildError(
            f"{what} failed (exit {done.returncode}): {' '.join(cmd)}\n"
            f"--- last {LOG_TAIL_LINES} lines of {log} ---\n{tail.rstrip()}"
        )


def ensure_base_image(root: Path | None = None) -> str:
    """Make sure the base image exists; bootstrap the local one when that is the base in use."""
    root = root or repo_root()
    base = base_image()
    if image_exists(base):
        return base
    if base != BASE_IMAGE:
        raise ImageBuildError(
            f"base image {base} (TRIALBOX_BASE_IMAGE) is not present; pull it, or unset "
            f"TRIALBOX_BASE_IMAGE to bootstrap {BASE_IMAGE} from Debian packages"
        )
    log = root / ".cache" / "build" / "base" / "build.log"
    _run_logged([str(root / "scripts" / "bootstrap-base-image")], log, "bootstrap-base-image", root)
    return base


def prepare_context(name: str, root: Path | None = None) -> None:
    """Fill ``.cache/build/<name>/`` (wheels, certs) with scripts/prepare-build-context."""
    root = root or repo_root()
    log = root / ".cache" / "build" / name / "build.log"
    _run_logged(
        [str(root / "scripts" / "prepare-build-context"), name], log, "prepare-build-context", root
    )


def build_image(name: str, root: Path | None = None, base: str | None = None) -> BuiltImage:
    """Build ``trialbox/<name>:dev`` from ``images/<name>/Dockerfile`` and return what was built."""
    root = root or repo_root()
    dockerfile = root / "images" / name / "Dockerfile"
    if not dockerfile.is_file():
        raise ImageBuildError(f"{dockerfile} does not exist; known images: {', '.join(IMAGES)}")
    started = time.perf_counter()
    log = root / ".cache" / "build" / name / "build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")  # one log per build, so the quoted tail is this build's
    base = base or ensure_base_image(root)
    prepare_context(name, root)
    tag = image_tag(name)
    cmd = [
        "docker", "build",
        "--force-rm",  # a failed step must not leave its container behind
        "-f", str(dockerfile.relative_to(root)),
        "--build-arg", f"BASE_IMAGE={base}",
        "-t", tag,
        "--label", f"trialbox.image={name}",
        "--label", f"trialbox.base={base}",
        ".",
    ]  # fmt: skip
    _run_logged(cmd, log, f"docker build of {tag}", root)
    image = docker.from_env().images.get(tag)
    return BuiltImage(
        name=name,
        tag=tag,
        image_id=str(image.id),
        seconds=time.perf_counter() - started,
        size_bytes=int(image.attrs.get("Size", 0)),
    )
