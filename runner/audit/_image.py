"""The GAIA package inside an Agent UI image, copied out without running the image."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import uuid
from io import BytesIO
from pathlib import Path

from runner.audit._limits import CHAT_HELPERS, HISTORY, LEMONADE_CLIENT, AuditError

IMAGE_SITE_PACKAGES = "/opt/venv/lib/python3.{minor}/site-packages/gaia"
"""Where the agent-ui image installs amd-gaia (images/agent-ui/Dockerfile: venv in /opt/venv)."""
AUDITED_FILES = (CHAT_HELPERS, HISTORY, LEMONADE_CLIENT, Path("version.py"))


def gaia_package_from_image(image: str, dest: Path) -> tuple[Path, str]:
    """Copy the files the audit reads out of an Agent UI image, without running it; returns
    the local copy and the package's path inside the image.

    A stopped container is created (never started) so `docker cp` can read its filesystem;
    it carries a trialbox.run label and is removed whatever happens.
    """
    if shutil.which("docker") is None:
        raise AuditError(f"--gaia-image {image}: the docker command is not installed; give "
                         "--gaia-source DIR instead")
    # Looked up first so a missing image is never pulled: audit reaches no registry.
    present = subprocess.run(["docker", "image", "inspect", image], capture_output=True,
                             text=True, timeout=60)
    if present.returncode != 0 and "no such image" in present.stderr.lower():
        raise AuditError(f"--gaia-image {image}: no such image on this Docker engine; build it "
                         "with `make images` (or `trialbox run --gaia ...`) or give "
                         "--gaia-source DIR")
    label = f"trialbox.run=audit-{uuid.uuid4().hex[:12]}"
    created = present if present.returncode != 0 else subprocess.run(
        ["docker", "create", "--label", label, "--network", "none", image, "true"],
        capture_output=True, text=True, timeout=60)
    if created.returncode != 0:
        raise AuditError(f"--gaia-image {image}: Docker refused ({created.stderr.strip()}); "
                         "check that the engine runs (scripts/ensure-docker) or give "
                         "--gaia-source DIR")
    container = created.stdout.strip()
    try:
        for minor in range(9, 20):
            root = IMAGE_SITE_PACKAGES.format(minor=minor)
            if _docker_cp(container, f"{root}/{CHAT_HELPERS.as_posix()}", dest / CHAT_HELPERS):
                for relative in AUDITED_FILES[1:]:
                    _docker_cp(container, f"{root}/{relative.as_posix()}", dest / relative)
                return dest, root
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, timeout=60)
    raise AuditError(f"--gaia-image {image}: no GAIA package under /opt/venv/lib/python3.*/"
                     "site-packages/gaia; is it an Agent UI image?")


def _docker_cp(container: str, source: str, target: Path) -> bool:
    """One file out of the container (docker cp streams a tar archive to stdout)."""
    done = subprocess.run(["docker", "cp", f"{container}:{source}", "-"], capture_output=True,
                          timeout=60)
    if done.returncode != 0:
        return False
    with tarfile.open(fileobj=BytesIO(done.stdout)) as archive:
        member = next((m for m in archive.getmembers() if m.isfile()), None)
        extracted = archive.extractfile(member) if member is not None else None
        if extracted is None:
            return False
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(extracted.read())
    return True
