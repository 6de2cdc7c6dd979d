"""What fix mode asks of the Agent UI image: does a patched agent still import under GAIA, and
(``--scope gaia``) GAIA's own package source to expose to the fixer.

The import check runs the agent's ``agent.py`` in a throwaway agent-ui container (the GAIA the
sandboxes run) with no network and the patched folder mounted read-only: a fixer that breaks the
import is reported as such and its patch is not re-run.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import docker
from docker.errors import APIError, ContainerError, ImageNotFound

from runner.fix._sandbox import FixSandboxError
from runner.stack.labels import ROLE_LABEL, RUN_LABEL

CHECK_MOUNT = "/opt/trialbox/check"
GAIA_PACKAGE = "/opt/venv/lib/python3.11/site-packages/gaia"

# Load each named agent.py as GAIA does (its folder on sys.path), print {file: error or null}.
_IMPORT = r"""
import importlib.util, json, sys, traceback
from pathlib import Path
root, results = Path(sys.argv[1]), {}
for name in sys.argv[2:]:
    path = root / name
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location("agent_" + path.parent.name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        results[name] = None
    except BaseException:
        results[name] = traceback.format_exc(limit=3)[-1500:]
    finally:
        sys.path.pop(0)
print("TRIALBOX-IMPORTS " + json.dumps(results))
"""


def check_imports(tree: Path, files: list[str], image: str, label: str,
                  client: docker.DockerClient | None = None) -> dict[str, str]:
    """{agent file: why it does not import} for each `files` entry (``<id>/agent.py``) in tree."""
    if not files:
        return {}
    client = client or docker.from_env()
    try:
        output = client.containers.run(
            image, entrypoint=["python", "-c", _IMPORT, CHECK_MOUNT, *files], remove=True,
            network_mode="none", volumes={str(tree.resolve()): {"bind": CHECK_MOUNT, "mode": "ro"}},
            labels={RUN_LABEL: label, ROLE_LABEL: "import-check"},
            cap_drop=["ALL"], security_opt=["no-new-privileges:true"], mem_limit="1g", pids_limit=128,
            stdout=True, stderr=False)
    except ImageNotFound:
        raise FixSandboxError(f"image {image} is missing — `trialbox images`") from None
    except (ContainerError, APIError) as exc:
        raise FixSandboxError(f"the import check could not run: {exc}") from exc
    for line in output.decode(errors="replace").splitlines():
        if line.startswith("TRIALBOX-IMPORTS "):
            found = json.loads(line.removeprefix("TRIALBOX-IMPORTS "))
            return {name: error for name, error in found.items() if error}
    raise FixSandboxError("the import check printed no result")


def gaia_source(image: str, dest: Path, label: str, client: docker.DockerClient | None = None) -> Path:
    """Copy GAIA's package source out of the Agent UI image into dest/gaia (``.py`` files and
    data; caches left out); returns dest."""
    client = client or docker.from_env()
    try:
        container = client.containers.create(image, entrypoint=["true"],
                                             labels={RUN_LABEL: label, ROLE_LABEL: "gaia-source"})
    except ImageNotFound:
        raise FixSandboxError(f"image {image} is missing — `trialbox images`") from None
    try:
        stream, _ = container.get_archive(GAIA_PACKAGE)
        data = b"".join(stream)
    finally:
        container.remove(force=True)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        members = [m for m in archive.getmembers()
                   if (m.isfile() or m.isdir()) and "__pycache__" not in m.name]
        archive.extractall(dest, members=members, filter="data")
    return dest
