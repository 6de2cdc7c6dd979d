"""Build trialbox's images: base (bootstrapped if missing) → build context → ``docker build``.

The CLI is used for ``docker build`` rather than the SDK: the engine here has only the legacy
builder, and the CLI gives the same log a user would see when building by hand, which we keep
in ``.cache/build/<name>/build.log`` and quote from when a build fails.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

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
    labels: dict[str, str] = field(default_factory=dict)  # what we stamped on it (and why)


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
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")  # one log per build, so the quoted tail is this build's
    base = base or ensure_base_image(root)
    prepare_context(name, root, env=context_env, log=log)
    tag = tag or image_tag(name)
    labels = {"trialbox.image": name, "trialbox.base": base, **(labels or {})}
    cmd = [
        "docker", "build",
        "--force-rm",  # a failed step must not leave its container behind
        "-f", str(dockerfile.relative_to(root)),
        "--build-arg", f"BASE_IMAGE={base}",
        "-t", tag,
    ]  # fmt: skip
    for key, value in (build_args or {}).items():
        cmd += ["--build-arg", f"{key}={value}"]
    for key, value in labels.items():
        cmd += ["--label", f"{key}={value}"]
    cmd.append(".")
    _run_logged(cmd, log, f"docker build of {tag}", root)
    image = docker.from_env().images.get(tag)
    return BuiltImage(
        name=name,
        tag=tag,
        image_id=str(image.id),
        seconds=time.perf_counter() - started,
        size_bytes=int(image.attrs.get("Size", 0)),
        labels=labels,
    )


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
        return GaiaSpec("wheel", match.group("version"), spec, path.resolve(), _sha256(path))
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
    return GaiaSpec("source", match.group("version"), spec.source, wheel, _sha256(wheel))


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


def image_gaia(tag: str) -> dict[str, str | None]:
    """What an agent-ui image says it holds: ``{"gaia_version", "gaia_spec"}`` (None: unlabelled)."""
    try:
        client = docker.from_env()
        try:
            labels = client.images.get(tag).labels or {}
        finally:
            client.close()
    except ImageNotFound:
        raise ImageBuildError(f"image {tag} is not built — `trialbox images`") from None
    except DockerException as error:
        raise ImageBuildError(f"cannot ask the Docker engine about {tag}: {error}") from error
    return {"gaia_version": labels.get(GAIA_VERSION_LABEL), "gaia_spec": labels.get(GAIA_SPEC_LABEL)}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
