"""Staging a scenario's fixture folders into its sandbox's home (``~/gaia-eval/<folder>/``).

The fixture tree (run ``--fixtures DIR``) is mounted read-only into every Docker sandbox at
``FIXTURES_MOUNT``, like the corpus; before the first turn each folder the scenario declares is
copied from there into the home (a tmpfs, new with each sandbox, so every scenario gets a fresh
copy, as it gets a clean RAG cache), the files GAIA's own staging leaves out removed from the
copy before the agent starts (runner.scenarios.NOT_AGENT_FACING: ground truth, the
generators that plant it, byte-code caches), and made read-only when the scenario only reads it. Such a
sandbox's Agent UI works from ``~/gaia-eval`` (``STAGING_HOME``), as GAIA's harness runs it. A copy,
not a link: GAIA's agent refuses paths that resolve outside the home (its symlink-escape
scenarios test exactly that)."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from runner.sandbox._hardening import IMAGE_HOME
from runner.sandbox._protocol import SandboxError
from runner.scenarios import NOT_AGENT_FACING, STAGING_DIR

#: Where a Docker sandbox sees the fixture tree (read-only).
FIXTURES_MOUNT = "/fixtures"

#: Where the fixtures are staged, and where a sandbox of a run with a fixture tree works from:
#: GAIA's own harness runs its backend from ~/gaia-eval, and GAIA grants a session without
#: documents its working directory, so that is the folder such a session may read.
STAGING_HOME = str(PurePosixPath(IMAGE_HOME) / STAGING_DIR)


def staging_script(stagings: Sequence[Any], home: str = IMAGE_HOME,
                   mount: str = FIXTURES_MOUNT) -> str:
    """The shell commands that stage ``stagings`` (runner.scenarios.FixtureStaging) in ``home``:
    copy each folder, remove what its ``excluded`` names (GAIA's ``NOT_AGENT_FACING``) from the
    copy, then set its mode. Plain ``sh``, ``cp``, ``find`` (GNU, BSD or busybox: ``-mindepth``)
    and ``chmod``: it runs as well on this machine as in a sandbox."""
    commands = ["set -e"]
    for staging in stagings:
        source = PurePosixPath(mount) / staging.folder
        target = shlex.quote(str(PurePosixPath(home) / staging.inside))
        names = " -o ".join(f"-name {shlex.quote(pattern)}"
                            for pattern in getattr(staging, "excluded", NOT_AGENT_FACING))
        commands += [f"mkdir -p {shlex.quote(str(PurePosixPath(home) / staging.inside.parent))}",
                     f"rm -rf {target}",
                     f"cp -R {shlex.quote(str(source))} {target}",
                     # Writable first, so a read-only folder of the source can lose its files.
                     f"chmod -R u+rwX {target}"]
        if names:
            commands.append(f"find {target} -mindepth 1 \\( {names} \\) -prune "
                            "-exec rm -rf {} +")
        # The copy is the sandbox user's; its mode says what the scenario may do.
        commands.append(f"chmod -R {'a-w,u+rX' if staging.read_only else 'u+rwX'} {target}")
    return "\n".join(commands)


async def stage_fixtures(box: Any, stagings: Sequence[Any]) -> None:
    """Copy ``stagings`` into ``box``'s home; SandboxError when the copy fails or the sandbox
    has no home of its own (a local or attached Agent UI runs in the user's real home, which
    a run must never write into)."""
    if not stagings:
        return
    container = getattr(box, "ui", None)
    if container is None or not hasattr(container, "exec_run"):
        raise SandboxError("fixture folders can only be staged into a Docker sandbox's own home "
                           "(this backend runs in your real home): use --backend docker")
    script = staging_script(stagings)
    result = await asyncio.to_thread(container.exec_run, ["sh", "-c", script])
    if result.exit_code != 0:
        output = (result.output or b"").decode(errors="replace").strip()[-300:]
        raise SandboxError(f"staging the fixtures failed (exit {result.exit_code}): {output}")
