"""Bring the stack up: a Docker engine that answers, the images built (their progress shown),
the LLM server started and healthy. `trialbox up`, `images`, `bench` and `node join` call it."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from rich.console import Console

from runner.run.errors import InfraError, UsageError
from runner.run.progress import Progress, phase
from runner.stack.compose import ComposeError, overlay_name, server_for, up_llm
from runner.stack.engine import check_compose, check_engine
from runner.stack.hardware import DeviceChoice
from runner.stack.images import (
    IMAGES,
    BuiltImage,
    ImageBuildError,
    build_image,
    build_jobs,
    build_progress,
    ensure_base_image,
    repo_root,
)

# In a log (CI, `make bench | tee`), a long phase prints its status after this long without a
# line, well inside the 15 s a reader waits before deciding something hung.
BUILD_HEARTBEAT_S = 10.0


def ensure_engine(say: Callable[[str], None]) -> None:
    """A Docker engine and compose v2 must answer; on a Debian root host, install/start them."""
    problems = check_engine() + check_compose()
    if not problems:
        return
    say("no usable Docker engine/compose: " + "; ".join(str(p) for p in problems))
    script = repo_root() / "scripts" / "ensure-docker"
    done = subprocess.run([str(script)], check=False)
    if done.returncode != 0 or check_engine() + check_compose():
        raise InfraError("; ".join(str(p) for p in check_engine() + check_compose()))


def build_images(console: Console, names: tuple[str, ...] = IMAGES) -> dict[str, str]:
    """Build the images whose inputs changed; say which were up to date and which were rebuilt
    (with seconds), and what stale untagged images went. Returns name → image id.

    As many at once as the machine allows (`build_jobs`: one after another on 2 cores)."""
    try:
        jobs = build_jobs(len(names))
        if jobs > 1:
            ensure_base_image()  # once, before the builds that start from it
    except ImageBuildError as exc:
        raise InfraError(str(exc)) from exc
    images = _build_at_once(console, names, jobs) if jobs > 1 else _build_in_turn(console, names)
    built = {name: image.image_id for name, image in images.items()}
    removed = sum(len(image.removed) for image in images.values())
    freed = sum(image.removed_bytes for image in images.values())
    if removed:
        console.print(f"removed {removed} stale untagged image(s) ({freed / 1e6:.0f} MB)")
    return built


def _build_one(name: str) -> BuiltImage:
    try:
        return build_image(name)
    except ImageBuildError as exc:
        raise InfraError(f"image {name} did not build — {exc}") from exc


def _build_in_turn(console: Console, names: tuple[str, ...]) -> dict[str, BuiltImage]:
    images = {}
    for name in names:
        # A line as each image's check starts and for each build step, and in a log the status
        # every BUILD_HEARTBEAT_S: a first build takes minutes and must not look hung.
        with phase(f"trialbox/{name}", stream=console.file, log_every_s=BUILD_HEARTBEAT_S) as step, \
                build_progress(step.start):
            images[name] = _build_one(name)
            step.advance(describe_build(images[name]))
    return images


def _build_at_once(console: Console, names: tuple[str, ...], jobs: int) -> dict[str, BuiltImage]:
    """`jobs` builds at a time under one progress: each build's steps as lines naming the
    image, its end with the counter, and the status line in a log's silences."""
    with Progress("images", total=len(names), stream=console.file,
                  log_every_s=BUILD_HEARTBEAT_S) as progress:
        progress.start(f"building {', '.join(names)} ({jobs} at a time)")

        def build(name: str) -> BuiltImage:
            # A thread starts with an empty context: the listener is set in the thread itself.
            with build_progress(lambda text: progress.say(f"trialbox/{name}: {text}")):
                image = _build_one(name)
            progress.advance(describe_build(image))
            return image

        with ThreadPoolExecutor(jobs, thread_name_prefix="image-build") as pool:
            return dict(zip(names, pool.map(build, names), strict=True))


def describe_build(image: BuiltImage) -> str:
    """One line per image: up to date (nothing built) or rebuilt in N s."""
    if not image.rebuilt:
        return f"{image.tag:<28} up to date ({image.seconds:.1f} s to check)"
    return f"{image.tag:<28} rebuilt in {image.seconds:.1f} s ({image.size_bytes / 1e6:.0f} MB)"


def start_llm(console: Console, device: DeviceChoice, server: str | None = None) -> tuple[str, str]:
    """Start the stack's LLM service for the device, served by `server` (llm-cpu | lemonade;
    default: the device's, runner.stack.compose.server_for); returns (container name, host URL)."""
    chosen = server_for(device.device, server)
    try:
        overlay_name(device.device, chosen)  # a server this device cannot have: the user's to fix
    except ComposeError as exc:
        raise UsageError(str(exc)) from exc
    with phase(f"starting the LLM server ({chosen} on {device.device}) and waiting until healthy",
               stream=console.file, log_every_s=BUILD_HEARTBEAT_S) as step:
        try:
            stack = up_llm(device.device, server=chosen)
        except ComposeError as exc:
            raise InfraError(str(exc)) from exc
        step.advance(f"LLM server {stack.container} ({stack.server}) healthy at {stack.url}")
    return stack.container, stack.url

