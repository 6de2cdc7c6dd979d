"""Trees in and out of the fix sandbox and the patch between them: the patch applies with
`git apply`, unpacking refuses what could escape, and the fix log has GAIA's shape."""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from runner.fix._models import FixNote
from runner.fix._patch import PatchError, fix_log, make_patch, pack, tree_hash, unpack


def _tree(root: Path) -> Path:
    (root / "scout").mkdir(parents=True)
    (root / "scout" / "agent.py").write_text("PROMPT = 'never search'\n\ndef tools():\n    return []\n")
    (root / "scout" / "notes.txt").write_text("old notes\n")
    (root / "scout" / "logo.bin").write_bytes(bytes(range(256)))
    return root


def test_the_patch_applies_to_a_copy_with_git_apply(tmp_path: Path) -> None:
    before = _tree(tmp_path / "before")
    after = tmp_path / "after"
    shutil.copytree(before, after)
    (after / "scout" / "agent.py").write_text("PROMPT = 'search first'\n\ndef tools():\n    return ['query_documents']\n")
    (after / "scout" / "notes.txt").unlink()
    (after / "scout" / "helper.py").write_text("X = 1\n")
    (after / "scout" / "logo.bin").write_bytes(bytes(reversed(range(256))))
    patch, counts = make_patch(before, after)
    assert counts == {"scout/agent.py": 4, "scout/helper.py": 1, "scout/logo.bin": 0, "scout/notes.txt": 1}
    copy = tmp_path / "copy"
    shutil.copytree(before, copy)
    (tmp_path / "p.diff").write_text(patch)
    subprocess.run(["git", "apply", "--check", str(tmp_path / "p.diff")], cwd=copy, check=True)
    subprocess.run(["git", "apply", str(tmp_path / "p.diff")], cwd=copy, check=True)
    assert tree_hash(copy) == tree_hash(after)
    assert tree_hash(before) != tree_hash(after)


def test_no_change_gives_an_empty_patch(tmp_path: Path) -> None:
    before = _tree(tmp_path / "a")
    after = tmp_path / "b"
    shutil.copytree(before, after)
    assert make_patch(before, after) == ("", {})


def test_pack_then_unpack_round_trips_with_our_modes(tmp_path: Path) -> None:
    source = _tree(tmp_path / "src")
    (source / "scout" / "__pycache__").mkdir()
    (source / "scout" / "__pycache__" / "x.pyc").write_bytes(b"junk")
    (source / "scout" / "link").symlink_to("/etc/passwd")
    data = pack({"workspace": source, "workspace/extra.md": b"hi"}, uid=10003)
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        names = {m.name: m for m in archive.getmembers()}
    assert "workspace/scout/link" not in names and "workspace/scout/__pycache__/x.pyc" not in names
    assert names["workspace/scout/agent.py"].uid == 10003 and names["workspace/extra.md"].size == 2
    out = tmp_path / "out"
    assert unpack([data], out, "workspace") == []
    assert (out / "scout" / "agent.py").read_text() == (source / "scout" / "agent.py").read_text()
    assert (out / "extra.md").read_text() == "hi"


def _archive(*members: tarfile.TarInfo, data: bytes = b"x") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for member in members:
            archive.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return buffer.getvalue()


def test_unpack_refuses_links_devices_and_escapes(tmp_path: Path) -> None:
    link = tarfile.TarInfo("workspace/evil")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
    escape = tarfile.TarInfo("workspace/../../outside.txt")
    escape.size = 1
    fifo = tarfile.TarInfo("workspace/pipe")
    fifo.type = tarfile.FIFOTYPE
    good = tarfile.TarInfo("workspace/ok.txt")
    good.size = 1
    refused = unpack([_archive(link, escape, fifo, good)], tmp_path / "out", "workspace")
    assert refused == ["workspace/evil", "workspace/../../outside.txt", "workspace/pipe"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["ok.txt"]
    assert not (tmp_path / "outside.txt").exists()


def test_unpack_stops_a_workspace_that_grew_too_big(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("runner.fix._patch.MAX_WORKSPACE_BYTES", 10)
    big = tarfile.TarInfo("workspace/big.txt")
    big.size = 11
    with pytest.raises(PatchError, match="grew past"):
        unpack([_archive(big, data=b"x" * 11)], tmp_path / "out", "workspace")


def test_fix_log_uses_the_fixers_notes_else_the_diff(tmp_path: Path) -> None:
    notes = [FixNote(file="/workspace/scout/agent.py", change_summary="register RAG tools",
                     rationale="no tool was offered", targets_scenario=["a"])]
    entries = fix_log({"scout/agent.py": 4, "scout/helper.py": 1}, notes, ["a", "b"], "command")
    assert [e.model_dump() for e in entries] == [
        {"fix_id": 1, "file": "scout/agent.py", "change_summary": "register RAG tools",
         "targets_scenario": ["a"], "rationale": "no tool was offered", "lines_changed": 4},
        {"fix_id": 2, "file": "scout/helper.py", "change_summary": "1 line(s) changed by the command fixer",
         "targets_scenario": ["a", "b"], "rationale": "the command fixer gave no rationale for this file",
         "lines_changed": 1},
    ]


def test_tree_hash_sees_modes_and_new_folders(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    first = tree_hash(root)
    (root / "scout" / "agent.py").chmod(0o755)
    second = tree_hash(root)
    (root / "empty").mkdir()
    assert len({first, second, tree_hash(root)}) == 3
