"""Build ``trialbox/fixer:dev`` offline, like every trialbox image, optionally with Claude Code.

Claude Code's npm package needs Node ≥ 22 (Debian bookworm has 18), but its platform package
``@anthropic-ai/claude-code-linux-x64`` is one native executable that runs without Node
(DESIGN 2.9). With ``TRIALBOX_FIXER_CLAUDE=1`` (or ``claude=True``; see ``claude_wanted``) the host fetches it once
with ``npm pack`` (the ordinary npm client, the npm registry) into
``.cache/claude-code/<version>/`` and links it into the build context for that build only; without, the
context holds no binary and the image has no ``claude`` (the ``claude-code`` fixer then says how
to build it). It is optional because it adds ~400 MB and a download to every image build.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from runner.stack.image_build import BuiltImage, build_dockerfile
from runner.stack.image_store import ImageBuildError, image_labels, repo_root

FIXER = "fixer"
CLAUDE_PACKAGE = "@anthropic-ai/claude-code-linux-x64"
CLAUDE_VERSION = "2.1.332"  # pinned: the version a build fetches (checked with `claude --version`)
CLAUDE_LABEL = "trialbox.claude-code"


def claude_wanted(root: Path, env: dict[str, str] | None = None) -> bool:
    """``TRIALBOX_FIXER_CLAUDE=1`` fetches and includes Claude Code, ``=0`` leaves it out; unset,
    it is included when it was fetched before — so once a machine opted in, every image build
    (``trialbox images``, whoever runs it) keeps it instead of flipping the image back and forth."""
    value = (os.environ if env is None else env).get("TRIALBOX_FIXER_CLAUDE", "").strip()
    if value in ("0", "1"):
        return value == "1"
    return (_download_dir(root, CLAUDE_VERSION) / "package" / "claude").is_file()


def _download_dir(root: Path, version: str) -> Path:
    # Outside .cache/build: every image build sends that folder to the engine as context.
    return root / ".cache" / "claude-code" / version


def fetch_claude(root: Path, version: str = CLAUDE_VERSION) -> Path:
    """The extracted package folder (``.../package/claude``), fetched with `npm pack` if absent."""
    folder = _download_dir(root, version)
    binary = folder / "package" / "claude"
    if binary.is_file():
        return folder
    if shutil.which("npm") is None:
        raise ImageBuildError("TRIALBOX_FIXER_CLAUDE=1 needs npm on the host to fetch "
                              f"{CLAUDE_PACKAGE}@{version} (apt-get install npm), or unset it")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        done = subprocess.run(["npm", "pack", "--silent", f"{CLAUDE_PACKAGE}@{version}"], cwd=tmp,
                              capture_output=True, text=True, check=False)
        tarballs = list(Path(tmp).glob("*.tgz"))
        if done.returncode != 0 or not tarballs:
            raise ImageBuildError(f"npm pack {CLAUDE_PACKAGE}@{version} failed: {done.stderr.strip()[-500:]}")
        with tarfile.open(tarballs[0]) as archive:
            archive.extractall(folder, filter="data")
    manifest = json.loads((folder / "package" / "package.json").read_text())
    if manifest.get("version") != version or not binary.is_file():
        raise ImageBuildError(f"{CLAUDE_PACKAGE}@{version}: the package holds no package/claude "
                              f"of that version (got {manifest.get('version')})")
    return folder


def _link_claude(root: Path, source: Path | None) -> None:
    """Put (or take away) the binary in the build context; a hard link costs no copy."""
    target = root / ".cache" / "build" / FIXER / "claude"
    shutil.rmtree(target, ignore_errors=True)
    if source is None:
        return
    (target / "package").mkdir(parents=True)
    for name in ("claude", "package.json"):
        try:
            os.link(source / "package" / name, target / "package" / name)
        except OSError:
            shutil.copy2(source / "package" / name, target / "package" / name)


def build_fixer_image(root: Path | None = None, base: str | None = None,
                      claude: bool | None = None) -> BuiltImage:
    """Build ``trialbox/fixer:dev``; with Claude Code when `claude` (default: `claude_wanted`)."""
    root = root or repo_root()
    claude = claude_wanted(root) if claude is None else claude
    _link_claude(root, fetch_claude(root) if claude else None)
    try:
        return build_dockerfile(FIXER, root, base, labels={CLAUDE_LABEL: CLAUDE_VERSION if claude else "none"})
    finally:
        _link_claude(root, None)  # 400 MB must not ride along in the other images' contexts


def image_has_claude(tag: str) -> str | None:
    """The Claude Code version an image carries (its label), None when it has none."""
    labels = image_labels(tag)
    if labels is None:
        return None
    version = labels.get(CLAUDE_LABEL)
    return None if version in (None, "none") else version
