"""`trialbox bench`: the whole appliance in one command.

ensure engine → build images → start the LLM server → run the default suite in Docker
sandboxes → print the summary. Each step either succeeds or stops with one message naming the
cause and the fix; nothing it started is left behind on failure except the shared LLM server,
which `trialbox down` stops.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
from rich.console import Console

from runner.run.errors import InfraError
from runner.run.progress import Progress, phase
from runner.stack.compose import (
    LLM_PORT,
    ComposeError,
    compose_command,
    project_name,
    stack_environment,
    up_llm,
)
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

STACK_LABELS = {"com.docker.compose.project": "trialbox", "com.docker.compose.service": "llm"}


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


def build_corpus(corpus_root: Path, say: Callable[[str], None]) -> None:
    """Generate the corpus's PDF/XLSX/large documents and fetch the real-world texts.

    A real-world text that cannot be fetched is not an error: its scenarios are skipped."""
    from runner.corpus import build

    with phase("building the corpus", log_every_s=BUILD_HEARTBEAT_S) as step:
        report = build(corpus_root)
        step.advance("corpus built" if report.ok else "corpus: some documents did not build")
    if not report.ok:
        problems = "\n".join(str(line) for line in report)
        raise InfraError(f"the corpus did not build — fix the documents listed:\n{problems}")
    say(f"corpus ready in {corpus_root}")


def start_llm(console: Console, device: DeviceChoice) -> tuple[str, str]:
    """Start the stack's LLM service for the device; returns (container name, host URL)."""
    with phase(f"starting the LLM server ({device.device}) and waiting until healthy",
               stream=console.file, log_every_s=BUILD_HEARTBEAT_S) as step:
        try:
            stack = up_llm(device.device)
        except ComposeError as exc:
            raise InfraError(str(exc)) from exc
        step.advance(f"LLM server {stack.container} healthy at {stack.url}")
    return stack.container, stack.url


#: The runner image's user (images/runner/Dockerfile): who runs the engine for a root caller.
RUNNER_UID = 10001


def run_in_runner_container(device: str, llm_container: str, run_args: list[str], results: Path,
                            stack_run_id: str | None = None, port: int = LLM_PORT) -> int:
    """Run `trialbox run` inside the pinned runner image (compose service `runner`).

    Isolated as the engine on the host is (README, "Security model"): the container lives in
    the host's network namespace, so it reaches sandboxes by address and the LLM on its
    loopback port exactly as the host engine does and is never an endpoint on a sandbox
    network; the per-sandbox firewall rules are the host mode's, installed by a short-lived
    helper (runner/sandbox/_firewall.py), because the runner itself has no capabilities.

    Never root: a non-root caller's own uid (the results are theirs, and they hold the socket
    already), for a root caller uid 10001 (`trialbox`); socket access comes from the socket's
    group (compose `group_add`). uid 10001 cannot write a root-owned results folder, so it
    writes a fresh folder of its own beside the results, whose run folders are handed to the
    caller (chown) and moved into `results` after the run. Returns the run's exit code; its
    output goes straight to the terminal.
    """
    results.mkdir(parents=True, exist_ok=True)
    caller = os.getuid()
    # Root's group would be root's too: a root caller's runner is trialbox:trialbox.
    uid, gid = (RUNNER_UID, RUNNER_UID) if caller == 0 else (caller, os.getgid())
    image = os.environ.get("TRIALBOX_RUNNER_IMAGE") or "trialbox/runner:dev"
    outbox = results if uid == caller else _outbox(results, uid, gid)
    env = stack_environment(stack_run_id, port) | {"TRIALBOX_RESULTS_DIR": str(outbox.resolve()),
                                                   "TRIALBOX_RUNNER_IMAGE": image}
    command = compose_command(
        device, project_name(stack_run_id), "--profile", "run", "run", "--rm", "-u", f"{uid}:{gid}",
        *([] if uid == RUNNER_UID else ["-e", "HOME=/tmp"]),  # a caller's uid has no home in the image
        "runner", "run", "--backend", "docker",
        "--device", device, "--llm-container", llm_container, "--results", "/results", *run_args,
    )
    try:
        return subprocess.run(command, env=env, check=False).returncode
    finally:
        if outbox != results:
            _hand_over(outbox, results, caller, os.getgid())


def _outbox(results: Path, uid: int, gid: int) -> Path:
    """A fresh folder beside the results that `uid` may write (the caller is root)."""
    import secrets

    outbox = results / f".runner-{secrets.token_hex(4)}"
    outbox.mkdir(mode=0o700)
    os.chown(outbox, uid, gid)
    return outbox


def _hand_over(outbox: Path, results: Path, uid: int, gid: int) -> None:
    """The runner's run folders, owned by the caller again, moved into `results`."""
    import shutil

    for entry in outbox.iterdir():
        for path in [entry, *entry.rglob("*")]:
            os.chown(path, uid, gid, follow_symlinks=False)
        target = results / entry.name
        if target.exists():  # never over an existing folder: keep it where it is, say where
            raise InfraError(f"{target} exists; the runner's results stay in {entry}")
        entry.rename(target)
    shutil.rmtree(outbox)


def find_llm_container() -> str | None:
    """The running LLM server container of the default stack, if any."""
    try:
        client = docker.from_env()
        filters: dict[str, str | list[str] | bool] = {
            "label": [f"{k}={v}" for k, v in STACK_LABELS.items()], "status": "running",
        }
        found = client.containers.list(filters=filters)
    except docker.errors.DockerException:
        return None
    return found[0].name if found else None


def default_suite_paths(root: Path) -> list[Path]:
    return [root / "eval" / "scenarios"]


def selftest_line(paths: list[Path], corpus_root: Path) -> str:
    """The suite's self-test in one line, printed under the bench summary, so a page of FAILs
    from a 135M model reads against an instrument shown to tell right from wrong."""
    from runner.scenarios import load_suite
    from runner.selftest import selftest_suite, summary_line

    suite = load_suite(paths, corpus_root)
    return "self-test: " + summary_line(selftest_suite(suite.scenarios, suite.manifest))
