"""Trees in and out of the fix sandbox, and the patch they differ by.

The user's agent directory is only ever *read*: it is packed into a tar that Docker unpacks
into the sandbox, and what comes back is unpacked into a folder under ``results/<run>/fix/``.
Unpacking takes regular files and folders only, with relative paths that stay inside the
destination; a symlink, device or ``..`` path a fixer made is listed and left behind.

The patch is made by git itself (``diff --cached --binary --no-renames`` between two trees
staged into a throwaway repository), so ``git apply`` takes it in the agent directory: the
same tool writes and reads it.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from runner.fix._models import FixLogEntry, FixNote

#: Folders that never go into the sandbox or the patch (caches, VCS data).
IGNORED = frozenset({"__pycache__", ".git", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
#: What one workspace may hold when it comes back (a runaway fixer must not fill the disk).
MAX_WORKSPACE_BYTES = 512 * 1024 * 1024


class PatchError(RuntimeError):
    """A tree could not be packed, unpacked or diffed; the message names the cause."""


def _files(root: Path) -> Iterable[Path]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in IGNORED)
        for name in sorted(files):
            yield Path(folder) / name


def tree_hash(root: Path) -> str:
    """sha256 over every path, mode and content under root (the 'host tree unchanged' proof).
    Nothing is skipped here: a cache folder appearing would change the hash too."""
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files) + [d + "/" for d in dirs]:
            path = Path(folder) / name.rstrip("/")
            info = path.lstat()
            digest.update(f"{path.relative_to(root).as_posix()}\0{info.st_mode:o}\0".encode())
            if path.is_symlink():
                digest.update(os.readlink(path).encode())
            elif path.is_file():
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def pack(entries: dict[str, Path | bytes], *, uid: int, mode_dirs: int = 0o755,
         mode_files: int = 0o644) -> bytes:
    """A tar of {path in the archive: host folder/file or bytes}, owned by `uid`.

    Folders are walked (ignoring caches); ownership and modes are set here, not copied, so a
    read-only /context is read-only whatever the host's modes were."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        made: set[str] = set()

        def add_dir(name: str) -> None:
            parts = PurePosixPath(name).parts
            for i in range(1, len(parts) + 1):
                sub = "/".join(parts[:i])
                if sub not in made:
                    made.add(sub)
                    info = tarfile.TarInfo(sub)
                    info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, mode_dirs, uid, uid
                    archive.addfile(info)

        def add_file(name: str, data: bytes, executable: bool = False) -> None:
            parent = str(PurePosixPath(name).parent)
            if parent != ".":
                add_dir(parent)
            info = tarfile.TarInfo(name)
            info.size, info.uid, info.gid = len(data), uid, uid
            info.mode = mode_files | (0o111 if executable else 0)
            archive.addfile(info, io.BytesIO(data))

        for name, source in entries.items():
            if isinstance(source, bytes):
                add_file(name, source)
            elif source.is_dir():
                add_dir(name)
                for file in _files(source):
                    if file.is_symlink():
                        continue  # a link could point anywhere on the host: never followed
                    rel = file.relative_to(source).as_posix()
                    add_file(f"{name}/{rel}", file.read_bytes(), os.access(file, os.X_OK))
            else:
                add_file(name, source.read_bytes(), os.access(source, os.X_OK))
    return buffer.getvalue()


def unpack(stream: Iterable[bytes], dest: Path, strip: str) -> list[str]:
    """Unpack a ``get_archive`` stream of folder `strip` into dest; return what was refused."""
    data = b"".join(stream)
    refused: list[str] = []
    total = 0
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        for member in archive.getmembers():
            path = PurePosixPath(member.name)
            if path.parts and path.parts[0] == strip:
                path = PurePosixPath(*path.parts[1:]) if len(path.parts) > 1 else PurePosixPath(".")
            if str(path) == ".":
                continue
            if path.is_absolute() or ".." in path.parts or any(p in IGNORED for p in path.parts):
                if not any(p in IGNORED for p in path.parts):
                    refused.append(member.name)
                continue
            target = dest / path
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                total += member.size
                if total > MAX_WORKSPACE_BYTES:
                    raise PatchError(f"the workspace grew past {MAX_WORKSPACE_BYTES >> 20} MB; not taken back")
                target.parent.mkdir(parents=True, exist_ok=True)
                extracted = archive.extractfile(member)
                assert extracted is not None
                target.write_bytes(extracted.read())
                target.chmod(0o755 if member.mode & 0o111 else 0o644)
            else:
                refused.append(member.name)  # symlinks, hard links, devices, fifos
    return refused


def _git(git_dir: Path, work: Path | None, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_AUTHOR_NAME": "trialbox", "GIT_AUTHOR_EMAIL": "fix@trialbox.invalid",
           "GIT_COMMITTER_NAME": "trialbox", "GIT_COMMITTER_EMAIL": "fix@trialbox.invalid"}
    command = ["git", f"--git-dir={git_dir}"] + ([f"--work-tree={work}"] if work else []) + list(args)
    done = subprocess.run(command, capture_output=True, env=env, check=False)
    if done.returncode != 0:
        raise PatchError(f"`{' '.join(command)}` failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout.decode("utf-8", errors="replace")


def make_patch(before: Path, after: Path) -> tuple[str, dict[str, int]]:
    """(git patch turning `before` into `after`, {file: lines added + removed})."""
    with tempfile.TemporaryDirectory(prefix="trialbox-patch-") as tmp:
        git_dir = Path(tmp) / "repo" / ".git"
        _git(git_dir, None, "init", "--quiet", str(git_dir.parent))
        # -f: the user's .gitignore must not hide a changed file from the patch.
        _git(git_dir, before, "add", "--all", "--force", ".")
        _git(git_dir, before, "commit", "--quiet", "--allow-empty", "--no-verify", "-m", "before")
        # Restage from scratch for `after`: files deleted there must leave the index.
        _git(git_dir, before, "rm", "--cached", "-r", "--quiet", "--ignore-unmatch", ".")
        _git(git_dir, after, "add", "--all", "--force", ".")
        patch = _git(git_dir, after, "diff", "--cached", "--binary", "--no-renames", "--full-index")
        counts: dict[str, int] = {}
        for line in _git(git_dir, after, "diff", "--cached", "--numstat", "--no-renames").splitlines():
            added, removed, name = line.split("\t", 2)
            counts[name] = (int(added) if added.isdigit() else 0) + (int(removed) if removed.isdigit() else 0)
    return patch, counts


def fix_log(counts: dict[str, int], notes: list[FixNote], failing: list[str],
            fixer: str) -> list[FixLogEntry]:
    """GAIA's fix_log.json entries, one per changed file: the fixer's own words when it gave
    them (``$TRIALBOX_FIX_NOTES``), else what the diff says."""
    by_file = {note.file.removeprefix("/workspace/").lstrip("./"): note for note in notes}
    entries = []
    for number, (name, lines) in enumerate(sorted(counts.items()), 1):
        note = by_file.get(name)
        entries.append(FixLogEntry(
            fix_id=number, file=name, lines_changed=lines,
            change_summary=note.change_summary if note and note.change_summary
            else f"{lines} line(s) changed by the {fixer} fixer",
            targets_scenario=note.targets_scenario if note and note.targets_scenario else list(failing),
            rationale=note.rationale if note and note.rationale
            else f"the {fixer} fixer gave no rationale for this file",
        ))
    return entries
