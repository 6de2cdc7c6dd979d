"""The agent-ui image for a chosen amd-gaia (``--gaia SPEC``): a release, a wheel or a source tree.

The pinned GAIA builds ``trialbox/agent-ui:dev``; any other gets a ``gaia-…`` tag of its own and
a build context of its own, labelled with the amd-gaia version it installed.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from runner.stack.image_build import BuiltImage, build_dockerfile, run_logged
from runner.stack.image_store import ImageBuildError, image_labels, image_tag, repo_root
from runner.system.digests import sha256_of_file

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
        run_logged(command, out / "build.log", f"building a wheel from {spec.source}", root,
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
        return build_dockerfile(AGENT_UI, root, base, labels=labels, build_args=build_args)
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
    return build_dockerfile(AGENT_UI, root, base, tag=gaia.tag, labels=labels, build_args=build_args,
                  context_env=env, log_dir=context)


def build_agent_ui_image(spec: str | None = None) -> tuple[str, str]:
    """Build the Agent UI image for ``--gaia SPEC``; return (image tag, amd-gaia version)."""
    built = build_agent_ui(spec)
    return built.tag, built.labels[GAIA_VERSION_LABEL]



def image_gaia(tag: str) -> dict[str, str | None]:
    """What an agent-ui image says it holds: ``{"gaia_version", "gaia_spec"}`` (None: unlabelled)."""
    labels = image_labels(tag)
    if labels is None:
        raise ImageBuildError(f"image {tag} is not built — `trialbox images`")
    return {"gaia_version": labels.get(GAIA_VERSION_LABEL), "gaia_spec": labels.get(GAIA_SPEC_LABEL)}
