"""Build trialbox's images: base (bootstrapped if missing) → build context → ``docker build``.

``docker build`` goes through the engine's API with a context of exactly the files the
Dockerfile copies (not the whole checkout); the engine's step output is kept in
``.cache/build/<name>/build.log``, as the CLI would print it, and quoted when a build fails.
Two context folders are written here rather than by scripts/prepare-build-context (``GENERATED``):
the runner's metadata wheel (runner/stack/project_wheel.py) and the bytecode of the packages it
copies (runner/stack/image_bytecode.py), so a change under ``runner/`` builds no wheel and runs
no container step: the runner image takes it in COPY layers only.

Fast when nothing changed: each image is stamped with a digest of everything it is built from
(``trialbox.inputs``: its Dockerfile and folder, the checkout files its Dockerfile copies, the
base image, build arguments, labels, the host's extra CA certificates). An image whose stamp
matches is up to date and is not built at all — no context upload, no ``docker build``.

No dangling images: the legacy builder leaves each multi-stage build's builder stage as an
untagged image (the 705/814 MB ``<none>`` images), and a rebuilt image leaves its predecessor
untagged. The builder stage is the layer cache of the next build, so it is tagged
(``trialbox/<name>:stage-<stage>``) rather than deleted; after a build, the untagged images it
left (labelled ``trialbox.image=<name>``, or the stage its tag moved away from) are removed;
those in use by a container stay.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tarfile
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

import docker
from docker.errors import DockerException, ImageNotFound

from runner.stack import image_bytecode, project_wheel
from runner.system.digests import sha256_of_file

# The images trialbox builds, in build order (each is independent; the order is for humans).
IMAGES: tuple[str, ...] = ("llm-cpu", "agent-ui", "runner", "fixer")
# The local, registry-free base (scripts/bootstrap-base-image). TRIALBOX_BASE_IMAGE overrides
# it, e.g. with python:3.11-slim where a registry answers.
BASE_IMAGE = "trialbox/base:bookworm"
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


class ImageBuildError(RuntimeError):
    """One image could not be built; the message carries the command and the last log lines."""


# Who hears how a build is going (runner/bench/make_bench.py shows it): each phase before the engine's
# build and each of its `Step n/m` lines. A context variable rather than a parameter, so every
# path to `_build` (agent-ui, fixer) reports without threading a callback through each.
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
    name: str
    tag: str
    image_id: str
    seconds: float
    size_bytes: int
    labels: dict[str, str] = field(default_factory=dict)  # what we stamped on it (and why)
    rebuilt: bool = True  # False: its inputs were unchanged, so nothing was built
    removed: tuple[str, ...] = ()  # ids of the stale untagged images this build removed
    removed_bytes: int = 0


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


def _run_logged(
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


def _engine_build(context: IO[bytes], dockerfile: str, tag: str, build_args: dict[str, str],
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
    _run_logged([str(root / "scripts" / "bootstrap-base-image")], log, "bootstrap-base-image", root)
    return base


def prepare_context(
    name: str, root: Path | None = None, env: dict[str, str] | None = None, log: Path | None = None
) -> None:
    """Fill ``.cache/build/<name>/`` (wheels, certs) with scripts/prepare-build-context.

    ``env`` passes the script's TRIALBOX_BUILD_OUT / TRIALBOX_REQUIREMENTS settings."""
    root = root or repo_root()
    log = log or root / ".cache" / "build" / name / "build.log"
    _run_logged(
        [str(root / "scripts" / "prepare-build-context"), name], log, "prepare-build-context",
        root, env=env,
    )  # fmt: skip


def build_image(name: str, root: Path | None = None, base: str | None = None) -> BuiltImage:
    """Build ``trialbox/<name>:dev`` from ``images/<name>/Dockerfile`` and return what was built.

    The agent-ui image is built from the pinned amd-gaia and labelled with its version."""
    if name == AGENT_UI:
        return build_agent_ui(None, root, base)
    if name == "fixer":  # fix mode's sandbox image; Claude Code inside with TRIALBOX_FIXER_CLAUDE=1
        from runner.stack.fixer_image import build_fixer_image

        return build_fixer_image(root, base)
    return _build(name, root, base)


def _build(
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
    root = root or repo_root()
    dockerfile = root / "images" / name / "Dockerfile"
    if not dockerfile.is_file():
        raise ImageBuildError(f"{dockerfile} does not exist; known images: {', '.join(IMAGES)}")
    started = time.perf_counter()
    log = (log_dir or root / ".cache" / "build" / name) / "build.log"
    base = base or ensure_base_image(root)
    tag = tag or image_tag(name)
    labels = {"trialbox.image": name, "trialbox.base": base, **(labels or {})}
    digest = inputs_digest(name, root, _image_id(base), build_args or {}, labels)
    current = _image_labels(tag)
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
        _engine_build(context, str(dockerfile.relative_to(root)), tag, args, labels, log)
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


# -- up-to-date detection ----------------------------------------------------------------------

#: The label holding the digest of everything an image was built from.
INPUTS_LABEL = "trialbox.inputs"


@dataclass(frozen=True)
class GeneratedFolder:
    """A .cache/build/<name>/<folder> trialbox writes itself just before a build (rather than
    scripts/prepare-build-context)."""

    write: Callable[[Path, str, Path], object]  # (checkout, Dockerfile text, folder): fill it
    inputs: Callable[[Path], bytes]  # checkout → what it is made from that the digest lacks


def _write_files(target: Path, files: dict[str, bytes]) -> None:
    """Make ``target`` hold exactly ``files`` (unchanged ones keep their mtime)."""
    target.mkdir(parents=True, exist_ok=True)
    for stale in target.iterdir():
        if stale.name not in files and stale.is_file():
            stale.unlink()
    for file_name, content in files.items():
        path = target / file_name
        if not path.is_file() or path.read_bytes() != content:
            path.write_bytes(content)


#: The generated folders, by name. The metadata wheel is made from pyproject's name, version,
#: dependencies and scripts only, so editing its tool settings rebuilds no image; the bytecode
#: from the sources the Dockerfile copies, which the digest holds already.
GENERATED: dict[str, GeneratedFolder] = {
    "metadata": GeneratedFolder(
        lambda root, _, target: _write_files(target, project_wheel.context_files(root)),
        project_wheel.wheel_inputs,
    ),
    "bytecode": GeneratedFolder(
        lambda root, dockerfile, target: image_bytecode.write_bytecode(root, dockerfile, target),
        lambda _: image_bytecode.inputs(),
    ),
}
#: Never part of an image (.dockerignore leaves them out of every build context).
_SKIPPED_NAMES = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
_SKIPPED_SUFFIXES = (".pyc", ".egg-info")


def _copy_sources(dockerfile: str) -> list[str]:
    """Every source of the Dockerfile's COPY/ADD lines, as written (``--from`` stages excluded)."""
    text = re.sub(r"\\\n", " ", dockerfile)
    found: list[str] = []
    for line in text.splitlines():
        words = line.split()
        if len(words) < 3 or words[0].upper() not in ("COPY", "ADD"):
            continue
        if any(word.startswith("--from") for word in words[1:]):
            continue
        found += [word for word in words[1:] if not word.startswith("--")][:-1]
    return found


def _prefix(source: str) -> str:
    """The folder or file a source names, up to its first wildcard."""
    return re.split(r"[*?\[]", source)[0].rstrip("/") or "."


def copied_paths(dockerfile: str) -> list[str]:
    """The checkout paths a Dockerfile's COPY/ADD lines take (``--from`` stages excluded),
    with ``.cache/build/<name>/<folder>`` replaced by what that folder is made from."""
    found: list[str] = []
    for source in _copy_sources(dockerfile):
        parts = source.strip("/").split("/")
        if source.startswith("$"):
            continue  # an ARG-named context folder: its build arguments are in the digest
        if parts[:2] == [".cache", "build"]:
            # Made from what the digest already holds: images/<name>/requirements*.txt
            # (scripts/prepare-build-context) or a GeneratedFolder's own inputs.
            continue
        found.append(_prefix(source))
    return sorted(set(found))


def generated_folders(dockerfile: str) -> list[str]:
    """The ``.cache/build/<name>/<folder>`` a Dockerfile copies that trialbox writes itself
    (``GENERATED``), as checkout paths."""
    found = set()
    for source in _copy_sources(dockerfile):
        parts = source.strip("/").split("/")
        if parts[:2] == [".cache", "build"] and len(parts) > 3 and parts[3] in GENERATED:
            found.add("/".join(parts[:4]))
    return sorted(found)


def write_generated(root: Path, dockerfile: str) -> None:
    """Fill each generated folder the Dockerfile copies (``GENERATED``)."""
    for folder in generated_folders(dockerfile):
        GENERATED[folder.rsplit("/", 1)[1]].write(root, dockerfile, root / folder)


def context_paths(dockerfile: str, name: str, build_args: dict[str, str]) -> list[str]:
    """What the build context must hold: the Dockerfile and each COPY/ADD source, ARG names
    resolved (``build_args`` over the Dockerfile's defaults). Sending only these, rather than
    the whole checkout with every image's wheels and the models (over 500 MB), is most of
    what a rebuild of the runner used to wait for."""
    args = dict(re.findall(r"^ARG\s+(\w+)=(\S+)", dockerfile, re.MULTILINE)) | build_args
    paths = {f"images/{name}/Dockerfile"}
    for source in _copy_sources(dockerfile):
        paths.add(_prefix(re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), ""), source)))
    # A file inside a folder already sent would be sent twice.
    return [p for p in sorted(paths) if not any(p.startswith(q + "/") for q in paths)]


def _context_filter(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """What .dockerignore leaves out: caches, bytecode, egg-info, and build logs — but a
    generated folder is sent whole (the bytecode one holds nothing else)."""
    parts = info.name.split("/")
    if parts[:2] == [".cache", "build"] and len(parts) > 3 and parts[3] in GENERATED:
        return info
    if _SKIPPED_NAMES.intersection(parts) or any(p.endswith(".egg-info") for p in parts):
        return None
    if info.name.endswith(".pyc") or (parts[:2] == [".cache", "build"] and parts[-1] == "build.log"):
        return None
    return info


def write_context(root: Path, paths: list[str], sink: IO[bytes]) -> None:
    """A tar build context of ``paths`` (relative to ``root``; absent ones are skipped, so
    the Dockerfile's COPY names the missing file itself)."""
    with tarfile.open(fileobj=sink, mode="w") as archive:
        for relative in paths:
            if (root / relative).exists():
                archive.add(root / relative, arcname=relative, filter=_context_filter)


def _hash_tree(update: Callable[[bytes], object], root: Path, relative: str) -> None:
    path = root / relative
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted(
            p for p in path.rglob("*")
            if p.is_file() and not _SKIPPED_NAMES.intersection(p.relative_to(root).parts)
            and not p.name.endswith(_SKIPPED_SUFFIXES)
            and not any(part.endswith(".egg-info") for part in p.relative_to(root).parts)
        )
    else:
        files = []
    for file in files:
        update(str(file.relative_to(root)).encode() + b"\0")
        update(hashlib.sha256(file.read_bytes()).digest())


def _certificates() -> list[Path]:
    ca_dir = Path(os.environ.get("TRIALBOX_CA_DIR", "/usr/local/share/ca-certificates"))
    return sorted(ca_dir.rglob("*.crt")) if ca_dir.is_dir() else []


def inputs_digest(name: str, root: Path, base_id: str, build_args: dict[str, str],
                  labels: dict[str, str]) -> str:
    """sha256 of everything ``trialbox/<name>`` is built from (``base_id``: the base image's
    id, so a re-bootstrapped base rebuilds everything); equal digests, equal images."""
    digest = hashlib.sha256()
    dockerfile = root / "images" / name / "Dockerfile"
    text = dockerfile.read_text()
    for relative in sorted({f"images/{name}", "scripts/prepare-build-context",
                            *copied_paths(text)}):
        _hash_tree(digest.update, root, relative)
    for folder in generated_folders(text):
        digest.update(folder.encode() + b"\0")
        digest.update(hashlib.sha256(GENERATED[folder.rsplit("/", 1)[1]].inputs(root)).digest())
    for cert in _certificates():
        digest.update(cert.name.encode() + b"\0" + cert.read_bytes())
    settings = {"base_id": base_id, "build_args": build_args, "labels": labels,
                "target_python": os.environ.get("TRIALBOX_TARGET_PYTHON", "3.11.2")}
    digest.update(repr(sorted(settings.items())).encode())
    return digest.hexdigest()


def _image_labels(tag: str) -> dict[str, str] | None:
    """The image's labels, or None when no image has that tag."""
    try:
        client = docker.from_env()
        try:
            return dict(client.images.get(tag).labels or {})
        finally:
            client.close()
    except ImageNotFound:
        return None
    except DockerException as error:
        raise ImageBuildError(f"cannot ask the Docker engine about {tag}: {error}") from error


def _image_id(tag: str) -> str:
    try:
        client = docker.from_env()
        try:
            return str(client.images.get(tag).id)
        finally:
            client.close()
    except ImageNotFound:
        return "absent"
    except DockerException as error:
        raise ImageBuildError(f"cannot ask the Docker engine about {tag}: {error}") from error


# -- builder stages and stale images -------------------------------------------------------------

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


# -- the agent-ui image for a chosen amd-gaia (--gaia SPEC) ------------------------------------

AGENT_UI = "agent-ui"
#: Labels on every agent-ui image: the amd-gaia it installed, and what it was built from.
GAIA_VERSION_LABEL = "trialbox.gaia-version"
GAIA_SPEC_LABEL = "trialbox.gaia-spec"
#: The extras the Agent UI and its MCP bridge need, whichever amd-gaia is installed.
GAIA_EXTRAS = "ui,mcp"
_VERSION = re.compile(r"^\d+(\.\d+)*([._-]?(a|b|rc|post|dev)\d*)*(\+[A-Za-z0-9.]+)?$")
_WHEEL = re.compile(r"^amd_gaia-(?P<version>[^-]+)-.+\.whl$")
#: A fixed wheel timestamp: a source tree built twice gives the same wheel, hence the same tag.
_SOURCE_DATE_EPOCH = "315532800"


@dataclass(frozen=True)
class GaiaSpec:
    """Which amd-gaia an agent-ui image installs (``--gaia``): a release, a wheel or a source tree."""

    kind: Literal["pinned", "version", "wheel", "source"]
    version: str  # the amd-gaia version the image will report (and the label states)
    source: str  # what the user gave: the version, the wheel path or the source folder
    wheel: Path | None = None  # the local wheel installed (wheel and source kinds)
    digest: str = ""  # the wheel's sha256 when it was chosen (a later change makes another spec)

    @property
    def tag(self) -> str:
        """``trialbox/agent-ui:dev`` for the pinned GAIA, a tag of its own for any other."""
        if self.kind == "pinned":
            return image_tag(AGENT_UI)
        suffix = re.sub(r"[^A-Za-z0-9_.-]", "-", self.version)
        if self.digest:  # two builds of one version differ: the wheel's hash says which
            suffix += f"-{self.kind}-{self.digest[:10]}"
        return f"trialbox/{AGENT_UI}:gaia-{suffix}"[:128]

    def requirement_lines(self) -> tuple[str, str]:
        """(what the host downloads, what the image installs) as requirement-file text."""
        install = f"amd-gaia[{GAIA_EXTRAS}]=={self.version}\n"
        if self.wheel is None:
            return install, install
        # The wheel's hash in a comment: a new wheel at the same path must refresh the context.
        download = (f"# sha256 {self.digest}\n"
                    f"amd-gaia[{GAIA_EXTRAS}] @ {self.wheel.resolve().as_uri()}\n")
        return download, install


def pinned_gaia_version(root: Path | None = None) -> str:
    """The amd-gaia version images/agent-ui/requirements.txt pins (trialbox's default)."""
    path = (root or repo_root()) / "images" / AGENT_UI / "requirements.txt"
    match = re.search(r"^amd-gaia(\[[^\]]*\])?==(\S+)", path.read_text(), re.MULTILINE)
    if match is None:
        raise ImageBuildError(f"{path}: no `amd-gaia[...]==VERSION` line; the agent-ui image "
                              "needs its pinned GAIA there")
    return match.group(2)


def parse_gaia_spec(spec: str | None, root: Path | None = None) -> GaiaSpec:
    """``None`` (the pinned GAIA), a version (``0.25.1``), a wheel path or a source folder."""
    root = root or repo_root()
    if spec is None or not spec.strip():
        version = pinned_gaia_version(root)
        return GaiaSpec("pinned", version, version)
    spec = spec.strip()
    path = Path(spec).expanduser()
    if spec.endswith(".whl"):
        if not path.is_file():
            raise ImageBuildError(f"--gaia {spec}: no such wheel file")
        match = _WHEEL.match(path.name)
        if match is None:
            raise ImageBuildError(f"--gaia {spec}: not an amd-gaia wheel (expected "
                                  "amd_gaia-<version>-...whl, as `pip wheel` names it)")
        return GaiaSpec("wheel", match.group("version"), spec, path.resolve(), sha256_of_file(path))
    if path.is_dir():
        if not ((path / "pyproject.toml").is_file() or (path / "setup.py").is_file()):
            raise ImageBuildError(f"--gaia {spec}: a folder, but not a Python project (no "
                                  "pyproject.toml or setup.py); give GAIA's source checkout")
        return GaiaSpec("source", "", spec)  # version known once the wheel is built
    if _VERSION.match(spec):
        return GaiaSpec("version", spec, spec)
    raise ImageBuildError(f"--gaia {spec}: neither an amd-gaia version (e.g. 0.25.1), an "
                          "existing .whl file, nor a source folder")


def wheel_from_source(spec: GaiaSpec, root: Path) -> GaiaSpec:
    """Build the source folder into a wheel on the host (where pip reaches an index)."""
    out = root / ".cache" / "build" / "gaia-source"
    out.mkdir(parents=True, exist_ok=True)
    python = root / ".venv" / "bin" / "python"
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        command = [str(python if python.exists() else "python3"), "-m", "pip", "wheel",
                   "--quiet", "--no-deps", "--wheel-dir", tmp, str(Path(spec.source).resolve())]
        _run_logged(command, out / "build.log", f"building a wheel from {spec.source}", root,
                    env={"SOURCE_DATE_EPOCH": _SOURCE_DATE_EPOCH})
        built = [p for p in Path(tmp).glob("*.whl") if _WHEEL.match(p.name)]
        if not built:
            raise ImageBuildError(f"--gaia {spec.source}: the folder built no amd_gaia wheel "
                                  f"(got {[p.name for p in Path(tmp).glob('*.whl')]})")
        wheel = out / built[0].name
        built[0].replace(wheel)
    match = _WHEEL.match(wheel.name)
    assert match is not None
    return GaiaSpec("source", match.group("version"), spec.source, wheel, sha256_of_file(wheel))


def build_agent_ui(spec: str | None, root: Path | None = None, base: str | None = None) -> BuiltImage:
    """Build the agent-ui image for ``spec`` (see ``parse_gaia_spec``), offline as every image:
    the host downloads the wheels, the build installs only those."""
    root = root or repo_root()
    gaia = parse_gaia_spec(spec, root)
    if gaia.kind == "source":
        gaia = wheel_from_source(gaia, root)
    labels = {GAIA_VERSION_LABEL: gaia.version, GAIA_SPEC_LABEL: f"{gaia.kind}:{gaia.source}"}
    build_args = {"GAIA_VERSION": gaia.version}
    if gaia.kind == "pinned":  # the default context, exactly as `make images` fills it
        return _build(AGENT_UI, root, base, labels=labels, build_args=build_args)
    context = root / ".cache" / "build" / f"{AGENT_UI}-{gaia.tag.rsplit(':', 1)[1]}"
    context.mkdir(parents=True, exist_ok=True)
    download, install = gaia.requirement_lines()
    (context / "download.txt").write_text(download)
    (context / "install.txt").write_text(install)
    env = {
        "TRIALBOX_BUILD_OUT": str(context),
        "TRIALBOX_REQUIREMENTS": str(context / "download.txt"),
        "TRIALBOX_INSTALL_REQUIREMENTS": str(context / "install.txt"),
    }
    build_args["GAIA_CONTEXT"] = str(context.relative_to(root))
    return _build(AGENT_UI, root, base, tag=gaia.tag, labels=labels, build_args=build_args,
                  context_env=env, log_dir=context)


def build_agent_ui_image(spec: str | None = None) -> tuple[str, str]:
    """Build the Agent UI image for ``--gaia SPEC``; return (image tag, amd-gaia version)."""
    built = build_agent_ui(spec)
    return built.tag, built.labels[GAIA_VERSION_LABEL]


def image_labels(tag: str) -> dict[str, str] | None:
    """An image's labels; None when no image has that tag."""
    try:
        client = docker.from_env()
        try:
            return dict(client.images.get(tag).labels or {})
        finally:
            client.close()
    except ImageNotFound:
        return None
    except DockerException as error:
        raise ImageBuildError(f"cannot ask the Docker engine about {tag}: {error}") from error


def image_gaia(tag: str) -> dict[str, str | None]:
    """What an agent-ui image says it holds: ``{"gaia_version", "gaia_spec"}`` (None: unlabelled)."""
    labels = image_labels(tag)
    if labels is None:
        raise ImageBuildError(f"image {tag} is not built — `trialbox images`")
    return {"gaia_version": labels.get(GAIA_VERSION_LABEL), "gaia_spec": labels.get(GAIA_SPEC_LABEL)}


