"""Staging a scenario's fixture folders into its sandbox's home (``~/gaia-eval/<folder>/``).

No part of the fixture tree (run ``--fixtures DIR``) is mounted into a sandbox: the tree holds
every scenario's folders and, beside them, the answers (``ground_truth.json``, the generators
that plant it), and whatever is mounted stays readable by the agent under test for the whole
scenario. Instead, before the first turn, this machine packs a tar of exactly the folders the
scenario declares (``fixture_archive``) with the files GAIA's own staging leaves out never
packed (runner.scenarios.NOT_AGENT_FACING: ground truth, the generators that plant it,
byte-code caches), so the answers never enter the sandbox at all; the tar is streamed on one
``docker exec``'s stdin to ``tar -x`` in the home (a tmpfs, new with each sandbox, so every
scenario gets a fresh copy, as it gets a clean RAG cache). Not ``docker cp``/``put_archive``:
the sandbox's root is read-only and Docker's archive API does not see its tmpfs mounts
(runner/sandbox/_hardening.py). Each folder is read-only when the scenario only reads it; the
modes are the tar's own. Such a sandbox's Agent UI works from ``~/gaia-eval`` (``STAGING_HOME``),
as GAIA's harness runs it. A copy, not a link: GAIA's agent refuses paths that resolve outside
the home (its symlink-escape scenarios test exactly that).

Only folders and regular files are packed. A symbolic link in a declared folder is neither
followed nor packed, wherever it points: its target is a path on this machine, which would
either bring in what the folder does not hold (another folder's answers, a host file) or name
something else inside the sandbox. (GAIA's own staging, ``shutil.copytree``, follows links and
copies what they point at: a difference only for a fixture tree that holds links.) Pipes,
sockets and devices are left out too.
"""

from __future__ import annotations

import asyncio
import io
import os
import shlex
import stat
import tarfile
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath

from docker.models.containers import Container

from runner.sandbox._exec import exec_with_input
from runner.sandbox._hardening import IMAGE_HOME
from runner.sandbox._protocol import SandboxError
from runner.scenarios import STAGING_DIR, FixtureStaging, agent_facing

#: Where the fixtures are staged, and where a sandbox of a run with a fixture tree works from:
#: GAIA's own harness runs its backend from ~/gaia-eval, and GAIA grants a session without
#: documents its working directory, so that is the folder such a session may read.
STAGING_HOME = str(PurePosixPath(IMAGE_HOME) / STAGING_DIR)

#: Longest wait on the staging exec's stream: a fixture folder is a few MB, unpacked in well
#: under a second; a stalled engine must not hold the scenario's thread past its own deadline.
STAGING_TIMEOUT_S = 60.0

#: Write bits, taken away where the scenario only reads its fixtures.
_WRITE = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


def staged_mode(source_mode: int, *, folder: bool, read_only: bool) -> int:
    """A staged folder's or file's mode: 0o755 for a folder or a file its owner may execute,
    else 0o644, whatever else the source's mode says (the sandbox has one user, who must be able
    to read everything staged); without the write bits when ``read_only``, so a scenario that
    only reads cannot be passed by changing its files."""
    mode = 0o755 if folder or source_mode & stat.S_IXUSR else 0o644
    return mode & ~_WRITE if read_only else mode


def _member_name(inside: PurePosixPath) -> str:
    """``inside`` as a tar member name: relative to the home, never climbing out of it."""
    if inside.is_absolute() or ".." in inside.parts or not inside.parts:
        raise SandboxError(f"fixture path {inside} is not inside the sandbox's home")
    return str(inside)


def _staged(source: Path, inside: PurePosixPath, excluded: Sequence[str]
            ) -> Iterator[tuple[Path, PurePosixPath, os.stat_result]]:
    """Each folder and regular file under ``source`` that is staged, parents before their
    contents, sorted by name (the same tree packs the same tar): where it is here, where it
    goes in the home, its ``lstat``. Nothing ``excluded`` names, nothing under it, no link."""
    with os.scandir(source) as listing:
        entries = sorted(listing, key=lambda entry: entry.name)
    for entry in entries:
        if not agent_facing(entry.name, excluded):
            continue
        path, there = Path(entry.path), inside / entry.name
        found = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(found.st_mode):
            yield path, there, found
            yield from _staged(path, there, excluded)
        elif stat.S_ISREG(found.st_mode):
            yield path, there, found
        # Anything else (a symbolic link, a pipe, a socket, a device) is not staged: see above.


def fixture_archive(stagings: Sequence[FixtureStaging]) -> bytes:
    """A tar of ``stagings``' folders, their members named relative to the sandbox's home
    (``gaia-eval/<folder>/...``), each folder's excluded names (GAIA's ``NOT_AGENT_FACING``) and
    every link left out, modes as ``staged_mode`` says, owned by nobody in particular (the
    extracting user keeps them)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for staging in stagings:
            top = os.stat(staging.source)  # the declared folder itself (fixture_stagings: a folder)
            members = [(staging.source, staging.inside, top),
                       *_staged(staging.source, staging.inside, staging.excluded)]
            for path, inside, found in members:
                info = tarfile.TarInfo(_member_name(inside))
                info.mtime = int(found.st_mtime)
                folder = stat.S_ISDIR(found.st_mode)
                info.mode = staged_mode(found.st_mode, folder=folder, read_only=staging.read_only)
                if folder:
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                    continue
                with path.open("rb") as data:
                    info.size = os.fstat(data.fileno()).st_size  # the size of what is read
                    tar.addfile(info, data)
    return buffer.getvalue()


def unpack_script(stagings: Sequence[FixtureStaging], size: int, home: str = IMAGE_HOME) -> str:
    """The shell commands that unpack a ``size``-byte ``fixture_archive`` of ``stagings``, read
    from stdin, into ``home``: each folder staged before (a reused home) removed first, then the
    archive unpacked. Exactly ``size`` bytes are read, always: the exec's stdin is never closed
    (``exec_with_input``), and a command that stops reading early leaves the engine holding the
    stream for seconds before it says how the command ended (measured: 7 s for 1 MB, 30 s for
    20 MB, to a command failing at once), so whatever fails, the rest is read and dropped. GNU
    tar sets a read-only folder's mode once its contents are in. Plain ``sh``, ``head``,
    ``chmod``, ``rm``, ``tar`` (GNU or BSD) and ``cat``: it runs as well on this machine as in
    a sandbox."""
    steps = []
    for staging in stagings:
        target = shlex.quote(str(PurePosixPath(home) / staging.inside))
        steps += [f"mkdir -p {shlex.quote(str(PurePosixPath(home) / staging.inside.parent))}",
                  # A read-only copy needs its write bits back before its files can go.
                  f"if [ -e {target} ]; then chmod -R u+w {target}; rm -rf {target}; fi"]
    steps.append(f"tar -x -f - -C {shlex.quote(home)} --no-same-owner")
    unpack = "\n".join(["(", "set -e", *steps, ")"])
    return f"head -c {size} | {{\n{unpack}\nstatus=$?\ncat >/dev/null\nexit $status\n}}"


async def stage_fixtures(box: object, stagings: Sequence[FixtureStaging]) -> None:
    """Stage ``stagings`` into ``box``'s home; SandboxError when that fails or the sandbox has
    no home of its own (a local or attached Agent UI runs in the user's real home, which a run
    must never write into)."""
    if not stagings:
        return
    container = getattr(box, "ui", None)
    if not isinstance(container, Container):
        raise SandboxError("fixture folders can only be staged into a Docker sandbox's own home "
                           "(this backend runs in your real home): use --backend docker")
    try:
        archive = await asyncio.to_thread(fixture_archive, stagings)
    except OSError as exc:
        raise SandboxError(f"reading the fixture folders failed: {exc}") from exc
    script = unpack_script(stagings, len(archive))
    code, output = await asyncio.to_thread(exec_with_input, container, ["sh", "-c", script],
                                           archive, STAGING_TIMEOUT_S)
    if code != 0:
        said = output.decode(errors="replace").strip()[-300:]
        raise SandboxError(f"staging the fixtures failed (exit {code}): {said}")
