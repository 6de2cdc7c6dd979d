"""The writers that still wrote in place or unchecked (issue 34, item 2): the corpus manifest and
generated documents, `capture`, an attached sandbox's artifacts and the cluster's per-node
driver-build reports. Each now goes through runner/system/writes.py: a FIFO or a folder where
the file should go is refused and left as it is (never written into, never renamed over), and a
successful write replaces the file in one rename (a hard link to the old file keeps the old
bytes: an in-place write would have changed both).
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel
from test_capture import APPLES_DB, CORPUS

from runner.capture import CaptureError, capture
from runner.corpus import write_checksums
from runner.corpus._build import _write_if_changed
from runner.corpus._large import write_large_register
from runner.sandbox.attach import AttachedSandbox
from runner.system.writes import WriteRefused

HOSTILE = ["fifo", "folder"]


@contextmanager
def hostile(path: Path, kind: str) -> Iterator[None]:
    """A FIFO or a folder where a file is to be written. The FIFO has a reader open, so a writer
    that does not check the destination writes into it instead of blocking for ever."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "folder":
        path.mkdir()
        (path / "keep.txt").write_text("mine")
        yield
        assert path.is_dir() and (path / "keep.txt").read_text() == "mine"
        return
    os.mkfifo(path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        yield
        assert stat.S_ISFIFO(os.lstat(path).st_mode), "the FIFO was renamed over"
        assert os.read(reader, 1) == b"", "written into the FIFO"  # no writer, nothing sent
    finally:
        os.close(reader)


def replaced_whole(path: Path, old: str, write: Callable[[], object]) -> None:
    """`write` replaces `path` by a rename: a hard link made before still holds `old`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(old)
    link = path.with_name(path.name + ".link")
    os.link(path, link)
    write()
    assert link.read_text() == old, "written in place"
    assert path.read_text() != old
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def no_temporaries(folder: Path) -> None:
    assert not [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


# --- corpus -------------------------------------------------------------------------------

MANIFEST = {"documents": [{"id": "a", "filename": "documents/a.md", "sha256": "0" * 64}]}


@pytest.mark.parametrize("kind", HOSTILE)
def test_write_checksums_refuses_a_manifest_that_is_not_a_file(tmp_path: Path, kind: str) -> None:
    # The manifest is read first, bounded: a FIFO blocked that read for ever. Nothing is written
    # into or over it.
    with hostile(tmp_path / "manifest.json", kind), pytest.raises(ValueError, match="not a regular"):
        write_checksums(tmp_path, {"a": "1" * 64})
    no_temporaries(tmp_path)


def test_write_checksums_replaces_the_manifest_whole(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.json"
    replaced_whole(manifest, json.dumps(MANIFEST),
                   lambda: write_checksums(tmp_path, {"a": "1" * 64}))
    assert json.loads(manifest.read_text())["documents"][0]["sha256"] == "1" * 64


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_generated_document_is_not_written_over_a_fifo_or_a_folder(
        tmp_path: Path, kind: str) -> None:
    target = tmp_path / "documents" / "a.md"
    with hostile(target, kind), pytest.raises(WriteRefused, match="not a file"):
        _write_if_changed(target, b"generated\n")
    no_temporaries(tmp_path)


def test_a_generated_document_replaces_the_old_one_whole(tmp_path: Path) -> None:
    target = tmp_path / "documents" / "a.md"
    replaced_whole(target, "old\n", lambda: _write_if_changed(target, b"generated\n"))


@pytest.mark.parametrize("kind", HOSTILE)
def test_the_large_register_is_not_written_over_a_fifo_or_a_folder(
        tmp_path: Path, kind: str) -> None:
    target = tmp_path / "large.md"
    with hostile(target, kind), pytest.raises(WriteRefused, match="not a file"):
        write_large_register(target, 2_000)
    no_temporaries(tmp_path)


def test_the_large_register_replaces_the_old_one_whole(tmp_path: Path) -> None:
    target = tmp_path / "large.md"
    replaced_whole(target, "old\n", lambda: write_large_register(target, 2_000))


# --- capture ------------------------------------------------------------------------------

CAPTURED = "captured_trialbox_orchard_apples.yaml"


@pytest.mark.parametrize("kind", HOSTILE)
@pytest.mark.parametrize("force", [False, True])
def test_capture_refuses_a_fifo_or_a_folder_even_with_force(
        tmp_path: Path, kind: str, force: bool) -> None:
    out = tmp_path / "out"
    with hostile(out / CAPTURED, kind), pytest.raises(CaptureError, match="not a file"):
        capture(APPLES_DB, out_dir=out, corpus_root=CORPUS, force=force)
    no_temporaries(out)


def test_capture_with_force_replaces_the_file_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    replaced_whole(out / CAPTURED, "# reviewed by hand\n",
                   lambda: capture(APPLES_DB, out_dir=out, corpus_root=CORPUS, force=True))


# --- an attached sandbox's artifacts ------------------------------------------------------

def attached() -> AttachedSandbox:
    return AttachedSandbox("s", "http://ui", "http://bridge/mcp", "", PurePosixPath("/corpus"))


@pytest.mark.parametrize("kind", HOSTILE)
def test_attach_collect_refuses_a_fifo_or_a_folder_and_says_so(tmp_path: Path, kind: str) -> None:
    dest = tmp_path / "artifacts"
    with hostile(dest / "attached.json", kind):
        problems = asyncio.run(attached().collect(dest))
    assert len(problems) == 1 and problems[0].startswith("attached.json: WriteRefused"), problems
    assert "not a file" in problems[0]
    assert (dest / "collect-errors.txt").read_text().startswith("attached.json: WriteRefused")
    no_temporaries(dest)


def test_attach_collect_replaces_its_note_whole(tmp_path: Path) -> None:
    dest = tmp_path / "artifacts"
    replaced_whole(dest / "attached.json", "{}\n", lambda: asyncio.run(attached().collect(dest)))
    assert json.loads((dest / "attached.json").read_text())["attached"] == "http://bridge/mcp"


# --- the cluster's per-node driver-build reports ------------------------------------------

class _Report(BaseModel):
    speed: float = 1.0


def compare_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Path], list[str]]:
    import runner.cluster._run as cluster_run
    from runner.cluster._placements import ClusterNode

    monkeypatch.setattr(cluster_run, "_card", lambda folder: None)
    monkeypatch.setattr(cluster_run, "read_traces", lambda folder: [])
    monkeypatch.setattr(cluster_run, "driver_report", lambda *a, **k: _Report())
    monkeypatch.setattr(cluster_run, "render_driver_md", lambda report: "# driver report\n")

    def node(name: str) -> ClusterNode:
        return ClusterNode(node_id=name, name=name, device="gpu", slots=1, fingerprint_id="f",
                           driver="d")

    runs = [cluster_run.NodeRun(node=node("alpha"), run_id="run-a"),
            cluster_run.NodeRun(node=node("beta"), run_id="run-b")]
    settings: Any = SimpleNamespace(results_root=tmp_path, allow_device_fallback=False)
    said: list[str] = []
    return cluster_run._compare_nodes(settings, runs, said.append), said


@pytest.mark.parametrize("name", ["driver-vs-alpha.md", "driver-vs-alpha.json"])
@pytest.mark.parametrize("kind", HOSTILE)
def test_a_node_report_is_not_written_over_a_fifo_or_a_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, name: str) -> None:
    with hostile(tmp_path / "run-b" / name, kind):
        reports, said = compare_nodes(tmp_path, monkeypatch)
    assert reports == []
    assert said and said[-1].startswith("no driver-build comparison alpha → beta: "), said
    assert "not a file" in said[-1]
    no_temporaries(tmp_path)


def test_a_node_report_replaces_the_old_one_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "run-b"
    replaced_whole(folder / "driver-vs-alpha.json", "{}",
                   lambda: compare_nodes(tmp_path, monkeypatch))
    replaced_whole(folder / "driver-vs-alpha.md", "old",
                   lambda: compare_nodes(tmp_path, monkeypatch))
    assert json.loads((folder / "driver-vs-alpha.json").read_text()) == {"speed": 1.0}
