"""Build one trialbox image: base (bootstrapped if missing) → build context → ``docker build``.

``docker build`` goes through the engine's API with a context of exactly the files the
Dockerfile copies (runner/stack/image_inputs.py); the engine's step output is kept in
``.cache/build/<name>/build.log``, as the CLI would print it, and quoted when a build fails. A
change under ``runner/`` builds no wheel and runs no container step: the runner image takes it
in COPY layers only.

Fast when nothing changed: an image whose ``trialbox.inputs`` stamp matches the digest of what
it is built from is up to date and is not built at all — no context upload, no ``docker
build``. After a build its builder stages are tagged and what it left untagged is removed
(runner/stack/image_stages.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import docker
from docker.errors import DockerException

from runner.stack.image_inputs import (
    INPUTS_LABEL,
    context_paths,
    inputs_digest,
    write_context,
    write_generated,
)
from runner.stack.image_stages import remove_stale_images, stage_tips, tag_stages
from runner.stack.image_store import (
    BASE_IMAGE,
    IMAGES,
    ImageBuildError,
    base_image,
    image_exists,
    image_id,
    image_labels,
    image_tag,
    repo_root,
)

LOG_TAIL_LINES = 30

#: What one image build needs to itself before another runs beside it. A build is mostly
#: single-threaded pip and layer commits, so builds overlap: on this 2-core machine agent-ui and
#: runner from scratch took 0.72 of the time at once (median of 2 alternated rounds, 0.55-0.89;
#: `scripts/bench-images --parallel --lock`), so one core per build.
CORES_PER_BUILD = 1
MEMORY_PER_BUILD = 2 * 2**30
BUILD_JOBS_ENV = "TRIALBOX_BUILD_JOBS"


def build_jobs(count: int, cpus: int | None = None, memory_bytes: int | None = None) -> int:
    """How many of `count` images build at once: one per CORES_PER_BUILD usable cores and
    MEMORY_PER_BUILD of memory, at least one; TRIALBOX_BUILD_JOBS=N says it outright."""
    override = os.environ.get(BUILD_JOBS_ENV, "").strip()
    if override:
        if not override.isdigit() or int(override) < 1:
            raise ImageBuildError(f"{BUILD_JOBS_ENV}={override!r}: give a whole number of builds "
                                  "at once, 1 or more (or unset it to choose by the machine)")
        return min(count, int(override)) if count else 0
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if memory_bytes is None:
        memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1, min(count, cpus // CORES_PER_BUILD, memory_bytes // MEMORY_PER_BUILD)) if count else 0


# Who hears how a build is going (runner/bench/make_bench.py shows it): each phase before the engine's
# build and each of its `Step n/m` lines. A context variable rather than a parameter, so every
# path to `build_dockerfile` (agent-ui, fixer) reports without threading a callback through each.
_build_listener: ContextVar[Callable[[str], None] | None] = ContextVar(
    "build_listener", default=None
)
STEP_LINE = re.compile(r"^Step \d+/\d+ : ")
STEP_TEXT_CHARS = 120  # a step line quoting a long RUN is cut; the build log has it whole


@contextmanager
def build_progress(listener: Callable[[str], None]) -> Iterator[None]:
    """Within the block, builds tell `listener` what they are doing, one short line at a time."""
    token = _build_listener.set(listener)
    try:
        yield
    finally:
        _build_listener.reset(token)


def _tell(text: str) -> None:
    listener = _build_listener.get()
    if listener is not None:
        one_line = " ".join(text.split())
        cut = len(one_line) > STEP_TEXT_CHARS
        listener(one_line[: STEP_TEXT_CHARS - 1] + "…" if cut else one_line)


@dataclass(frozen=True)
class BuiltImage:
    """What one build of an image made (or found up to date)."""

    name: str
    tag: str
    image_id: str
    seconds: float
    size_bytes: int
    labels: dict[str, str] = field(default_factory=dict)  # what we stamped on it (and why)
    rebuilt: bool = True  # False: its inputs were unchanged, so nothing was built
    removed: tuple[str, ...] = ()  # ids of the stale untagged images this build removed
    removed_bytes: int = 0


def run_logged(
    cmd: list[str], log: Path, what: str, cwd: Path, env: dict[str, str] | None = None
) -> None:
    """Run ``cmd`` with its output appended to ``log``; on failure raise with the log's tail.

    ``env`` adds variables to this process's environment for the command."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as sink:
        sink.write(f"\n$ {' '.join(cmd)}\n")
        sink.flush()
        done = subprocess.run(cmd, cwd=cwd, stdout=sink, stderr=subprocess.STDOUT, check=False,
                              env={**os.environ, **env} if env else None)
    if done.returncode != 0:
        with log.open(errors="replace") as source:
            tail = "".join(deque(source, maxlen=LOG_TAIL_LINES))
        raise ImageBuildError(
            f"{what} failed (exit {done.returncode}): {' '.join(cmd)}\n"
            f"--- last {LOG_TAIL_LINES} lines of {log} ---\n{tail.rstrip()}"
        )


#: Seconds the engine may take over one build request (a cold llm-cpu build takes minutes).
BUILD_TIMEOUT_S = 3600


def engine_build(context: IO[bytes], dockerfile: str, tag: str, build_args: dict[str, str],
                  labels: dict[str, str], log: Path, *, nocache: bool = False) -> None:
    """``docker build`` through the engine's API, with the context we assembled.

    Through the API rather than the CLI because the context is a tar of just what the
    Dockerfile copies, and the CLI mistakes such a tar on stdin for a Dockerfile. The log gets
    the same step lines the CLI prints (``Step n/m``, `` ---> id``)."""
    # nocache: every step runs again (scripts/bench-images times a first build that way).
    command = (f"docker build --force-rm{' --no-cache' * nocache} -f {dockerfile} -t {tag} "
               + " ".join(f"--build-arg {k}={v}" for k, v in build_args.items())
               + " " + " ".join(f"--label {k}={v}" for k, v in labels.items()) + " <context>")
    error = ""
    with log.open("a") as sink:
        sink.write(f"\n$ {command}\n")
        client = docker.from_env(timeout=BUILD_TIMEOUT_S)
        try:
            # forcerm: a failed step must not leave its container behind.
            for chunk in client.api.build(fileobj=context, custom_context=True,
                                          dockerfile=dockerfile, tag=tag, buildargs=build_args,
                                          labels=labels, rm=True, forcerm=True, decode=True,
                                          nocache=nocache):
                if "stream" in chunk:
                    sink.write(chunk["stream"])
                    if STEP_LINE.match(chunk["stream"]):
                        _tell(chunk["stream"])
                if "error" in chunk:
                    error = str(chunk["error"])
                    sink.write(f"ERROR: {error}\n")
        except DockerException as exc:
            error = f"the engine refused the build: {exc}"
            sink.write(f"ERROR: {error}\n")
        finally:
            client.close()
    if error:
        with log.open(errors="replace") as source:
            tail = "".join(deque(source, maxlen=LOG_TAIL_LINES))
        raise ImageBuildError(f"docker build of {tag} failed: {error}\n"
                              f"--- last {LOG_TAIL_LINES} lines of {log} ---\n{tail.rstrip()}")


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
    _tell(f"bootstrapping {BASE_IMAGE} from Debian packages (log: {log})")
    run_logged([str(root / "scripts" / "bootstrap-base-image")], log, "bootstrap-base-image", root)
    return base


def prepare_context(
    name: str, root: Path | None = None, env: dict[str, str] | None = None, log: Path | None = None
) -> None:
    """Fill ``.cache/build/<name>/`` (wheels, certs) with scripts/prepare-build-context.

    ``env`` passes the script's TRIALBOX_BUILD_OUT / TRIALBOX_REQUIREMENTS settings."""
    root = root or repo_root()
    log = log or root / ".cache" / "build" / name / "build.log"
    run_logged(
        [str(root / "scripts" / "prepare-build-context"), name], log, "prepare-build-context",
        root, env=env,
    )  # fmt: skip


def build_dockerfile(
    name: str,
    root: Path | None = None,
    base: str | None = None,
    *,
    tag: str | None = None,
    build_args: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    context_env: dict[str, str] | None = None,
    log_dir: Path | None = None,
) -> BuiltImage:
    """Build ``images/<name>/Dockerfile`` as ``tag`` (default ``trialbox/<name>:dev``), unless
    an image of that tag already carries the digest of these very inputs."""
    root = root or repo_root()
    dockerfile = root / "images" / name / "Dockerfile"
    if not dockerfile.is_file():
        raise ImageBuildError(f"{dockerfile} does not exist; known images: {', '.join(IMAGES)}")
    started = time.perf_counter()
    log = (log_dir or root / ".cache" / "build" / name) / "build.log"
    base = base or ensure_base_image(root)
    tag = tag or image_tag(name)
    labels = {"trialbox.image": name, "trialbox.base": base, **(labels or {})}
    digest = inputs_digest(name, root, image_id(base), build_args or {}, labels)
    current = image_labels(tag)
    if current is not None and current.get(INPUTS_LABEL) == digest:
        return _built(name, tag, started, labels, rebuilt=False)
    labels[INPUTS_LABEL] = digest
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")  # one log per build, so the quoted tail is this build's
    _tell(f"building (inputs changed): preparing the build context (log: {log})")
    prepare_context(name, root, env=context_env, log=log)
    write_generated(root, dockerfile.read_text())
    args = {"BASE_IMAGE": base, **(build_args or {})}
    paths = context_paths(dockerfile.read_text(), name, build_args or {})
    (root / ".cache").mkdir(exist_ok=True)
    with tempfile.TemporaryFile(dir=root / ".cache") as context:
        write_context(root, paths, context)
        context.seek(0)
        _tell("sending the build context to the engine")
        engine_build(context, str(dockerfile.relative_to(root)), tag, args, labels, log)
    replaced = tag_stages(tag, stage_tips(log.read_text(errors="replace")))
    removed, freed = remove_stale_images(name, replaced)
    return _built(name, tag, started, labels, rebuilt=True, removed=removed, freed=freed)


def _built(name: str, tag: str, started: float, labels: dict[str, str], *, rebuilt: bool,
           removed: tuple[str, ...] = (), freed: int = 0) -> BuiltImage:
    client = docker.from_env()
    try:
        image = client.images.get(tag)
    finally:
        client.close()
    return BuiltImage(name=name, tag=tag, image_id=str(image.id),
                      seconds=time.perf_counter() - started,
                      size_bytes=int(image.attrs.get("Size", 0)),
                      labels={**labels, **(image.labels or {})} if not rebuilt else labels,
                      rebuilt=rebuilt, removed=removed, removed_bytes=freed)
