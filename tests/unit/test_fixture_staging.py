"""What fixture staging puts into a sandbox: exactly the declared folders, packed here as a tar
(GAIA's own staging script's exclusions never packed, no link followed, no name outside the
home, the modes the scenario allows), and that tar unpacked here by the very script a sandbox
runs, fed on stdin as the exec feeds it (no Docker). The exec's stdin plumbing against a stand-in
engine. And what a path named only in a turn gets: nothing staged, unless declared.
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import socket
import stat
import subprocess
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from runner.sandbox import SandboxError, stage_fixtures
from runner.sandbox._exec import exec_with_input
from runner.sandbox._fixtures import fixture_archive, staged_mode, unpack_script
from runner.scenarios import fixture_stagings, load_suite
from runner.scenarios._fixtures import NOT_AGENT_FACING, agent_facing, left_out_of

REPO = Path(__file__).parents[1] / "fixtures" / "gaia_staged_repo"
TREE = REPO / "eval" / "scenarios"
CORPUS = REPO / "eval" / "corpus"
FIXTURES = REPO / "tests" / "fixtures" / "gaia"
LEDGER = FIXTURES / "shelf_files" / "ledger"
#: What the reading scenario's folder stages from the `sandbox` tree, and nothing else.
LEDGER_STAGED = {"pantry count.txt", "older", "older/pantry count 2025.txt", "tally.sh"}


def _scenario(scenario_id: str, tree: Path = TREE):  # type: ignore[no-untyped-def]
    suite = load_suite([tree], CORPUS)
    return next(s for s in suite.scenarios if s.id == scenario_id)


def _files(root: Path) -> set[str]:
    return {path.relative_to(root).as_posix() for path in root.rglob("*")}


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A fixture tree with every kind of answer file and every kind of link (``mount``), and an
    empty home."""
    mount, home, outside = tmp_path / "mount", tmp_path / "home", tmp_path / "outside"
    shutil.copytree(FIXTURES, mount)
    ledger = mount / "shelf_files" / "ledger"
    (ledger / "__pycache__").mkdir()
    (ledger / "__pycache__" / "_gen_ledger.cpython-311.pyc").write_bytes(b"\0")
    (ledger / "older").mkdir()
    (ledger / "older" / "pantry count 2025.txt").write_text("Pantry count: 9 jars.\n")
    (ledger / "older" / "ground_truth.json").write_text('{"jars": 9}\n')
    (ledger / "older" / "_gen_older").mkdir()
    (ledger / "older" / "_gen_older" / "seed.txt").write_text("9\n")
    (ledger / "tally.sh").write_text("#!/bin/sh\necho 17\n")
    (ledger / "tally.sh").chmod(0o700)
    (ledger / "pantry count.txt").chmod(0o600)  # the owner's alone: staged readable anyway
    # Links, each pointing where the sandbox must not see: never followed, never packed.
    outside.mkdir()
    (outside / "host secret.txt").write_text("a file of this machine\n")
    (ledger / "answers.json").symlink_to("ground_truth.json")  # an answer under another name
    (ledger / "neighbour").symlink_to("../settings")  # another scenario's folder
    (ledger / "elsewhere").symlink_to(outside)  # a folder outside the tree
    (ledger / "secret.txt").symlink_to(outside / "host secret.txt")  # a file outside the tree
    (ledger / "dangling").symlink_to("/nonexistent/at/all")
    os.mkfifo(ledger / "pipe")
    (ledger / "older").chmod(0o555)  # a read-only folder in the source still loses its answers
    home.mkdir()
    yield mount, home
    for root in (mount, home):  # give tmp_path's cleanup back what the staging locked
        for folder, dirs, _ in os.walk(root):
            for name in dirs:
                Path(folder, name).chmod(0o755)
        root.chmod(0o755)


def _members(archive: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {member.name: member for member in tar.getmembers()}


#: What the exec's stdin may hold after the archive (it never ends): never the script's to read.
AFTER = b"not the archive" * 64


def _unpack(stagings, home: Path) -> subprocess.CompletedProcess[bytes]:  # type: ignore[no-untyped-def]
    """The sandbox's own unpacking, run here: the script on ``sh``, the tar on its stdin with
    more after it; then ``cat`` prints what the script left unread, and the script's exit code
    goes last on stderr."""
    archive = fixture_archive(stagings)
    script = unpack_script(stagings, len(archive), home=str(home))
    return subprocess.run(["sh", "-c", f"( {script}\n)\necho \"exit $?\" >&2\ncat"],
                          input=archive + AFTER, capture_output=True, timeout=30)


def test_the_exclusions_are_gaias_and_match_names_not_paths():
    # GAIA's stage_eval_env.py: shutil.ignore_patterns("_gen_*", "ground_truth.json", "__pycache__")
    assert NOT_AGENT_FACING == ("_gen_*", "ground_truth.json", "__pycache__")
    assert not agent_facing("ground_truth.json") and not agent_facing("_gen_sales.py")
    assert not agent_facing("__pycache__")
    assert agent_facing("pantry count.txt") and agent_facing("my_gen_notes.txt")
    assert agent_facing("Ground_Truth.json")  # case-sensitive, as GAIA's glob on Linux
    assert not agent_facing("notes.bak", ("*.bak",)) and agent_facing("_gen_x", ())


def test_the_plan_says_what_is_left_out_of_a_staged_folder():
    [staging], missing = fixture_stagings(_scenario("shelf_read_ledger"), FIXTURES)
    assert missing == [] and staging.excluded == NOT_AGENT_FACING
    assert left_out_of(staging.source) == [LEDGER / "_gen_ledger.py", LEDGER / "ground_truth.json"]


def test_the_archive_holds_exactly_the_declared_folders_and_no_answer(sandbox: tuple[Path, Path]):
    mount, _ = sandbox
    [ledger], _ = fixture_stagings(_scenario("shelf_read_ledger"), mount)
    [settings], _ = fixture_stagings(_scenario("shelf_copy_settings"), mount)
    assert left_out_of(ledger.source) == sorted(
        mount / "shelf_files" / "ledger" / name
        for name in ("__pycache__", "_gen_ledger.py", "ground_truth.json",
                     "older/_gen_older", "older/ground_truth.json"))
    members = _members(fixture_archive([ledger, settings]))
    top = "gaia-eval/shelf_files/ledger"
    assert set(members) == {top, *(f"{top}/{name}" for name in LEDGER_STAGED),
                            "gaia-eval/shelf_files/settings", "gaia-eval/shelf_files/settings/kiln.ini"}
    for name, member in members.items():
        # Nothing GAIA leaves out, no name outside the home, only folders and files: no link,
        # hard or symbolic, no device or pipe — what a link pointed at is not in it either.
        assert all(agent_facing(part) for part in PurePosixPath(name).parts), name
        assert not name.startswith("/") and ".." not in PurePosixPath(name).parts, name
        assert member.isdir() or member.isreg(), name
        assert not member.linkname, name
    assert (members[f"{top}/pantry count.txt"].size
            == (mount / "shelf_files" / "ledger" / "pantry count.txt").stat().st_size)
    # Read-only for the reading scenario (the owner's execute bit kept), writable for the writer.
    modes = {name: member.mode for name, member in members.items()}
    assert modes[top] == modes[f"{top}/older"] == 0o555
    assert modes[f"{top}/pantry count.txt"] == 0o444 and modes[f"{top}/tally.sh"] == 0o555
    assert modes["gaia-eval/shelf_files/settings"] == 0o755
    assert modes["gaia-eval/shelf_files/settings/kiln.ini"] == 0o644
    # The same tree packs the same bytes.
    assert fixture_archive([ledger, settings]) == fixture_archive([ledger, settings])


def test_the_staged_modes():
    assert staged_mode(0o600, folder=False, read_only=False) == 0o644
    assert staged_mode(0o100, folder=False, read_only=True) == 0o555
    assert staged_mode(0o700, folder=True, read_only=True) == 0o555
    assert staged_mode(0o000, folder=True, read_only=False) == 0o755


def test_the_script_unpacks_exactly_the_archive_in_the_home(sandbox: tuple[Path, Path]):
    mount, home = sandbox
    [ledger], _ = fixture_stagings(_scenario("shelf_read_ledger"), mount)
    [settings], _ = fixture_stagings(_scenario("shelf_copy_settings"), mount)
    script = unpack_script([ledger, settings], 10240, home="/home/gaia")
    assert "cp " not in script and "/fixtures" not in script
    assert script.startswith("head -c 10240 | {")
    assert "tar -x -f - -C /home/gaia --no-same-owner" in script.splitlines()

    done = _unpack([ledger, settings], home)
    # Exactly the archive read: what followed it is still there for the next reader.
    assert (done.stdout, done.stderr) == (AFTER, b"exit 0\n")
    staged = home / "gaia-eval" / "shelf_files"
    assert _files(home) == {"gaia-eval", "gaia-eval/shelf_files", "gaia-eval/shelf_files/ledger",
                            "gaia-eval/shelf_files/settings", "gaia-eval/shelf_files/settings/kiln.ini",
                            *(f"gaia-eval/shelf_files/ledger/{name}" for name in LEDGER_STAGED)}
    assert (staged / "ledger" / "pantry count.txt").read_text() == (
        LEDGER / "pantry count.txt").read_text()
    # The source is untouched; the reading scenario's copy is read-only, the writing one's not.
    assert (mount / "shelf_files" / "ledger" / "ground_truth.json").is_file()
    assert stat.S_IMODE((staged / "ledger" / "pantry count.txt").stat().st_mode) == 0o444
    assert stat.S_IMODE((staged / "ledger" / "older").stat().st_mode) == 0o555
    assert stat.S_IMODE((staged / "settings" / "kiln.ini").stat().st_mode) == 0o644

    # Staged again (a reused home): the same copy, nothing of the earlier one in the way.
    (staged / "settings" / "kiln.local.ini").write_text("hold_minutes = 30\n")
    again = _unpack([ledger, settings], home)
    assert (again.stdout, again.stderr) == (AFTER, b"exit 0\n")
    assert _files(staged / "ledger") == LEDGER_STAGED
    assert _files(staged / "settings") == {"kiln.ini"}


def test_a_failed_unpack_says_why_and_still_reads_exactly_the_archive(sandbox: tuple[Path, Path]):
    # A command that stops reading early leaves the engine holding the exec's stream for
    # seconds (7 s for 1 MB, 30 s for 20 MB, measured): a failure reads the rest and drops it.
    mount, home = sandbox
    [ledger], _ = fixture_stagings(_scenario("shelf_read_ledger"), mount)
    home.rmdir()
    home.write_text("a file where the home should be\n")
    done = _unpack([ledger], home)
    assert done.stdout == AFTER
    assert done.stderr.endswith(b"exit 1\n") and b"mkdir" in done.stderr, done.stderr


def test_a_folder_outside_the_fixture_tree_is_never_staged(tmp_path: Path):
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    shutil.copytree(FIXTURES, tree)
    outside.mkdir()
    (tree / "shelf_files" / "linked").symlink_to(outside)
    (tree / "shelf_files" / "inner").symlink_to("settings")  # a link inside the tree is the tree's
    scenario = _scenario("shelf_read_ledger").model_copy(update={"fixtures": [
        ".", "../outside", str(outside), "shelf_files/linked", "shelf_files/inner"]})
    stagings, missing = fixture_stagings(scenario, tree)
    assert [staging.folder for staging in stagings] == ["shelf_files/inner"]
    assert missing == [f"{tree} (the whole fixture tree: name the folders to stage)",
                       f"{tree / '../outside'} (outside the fixture tree: never staged)",
                       f"{outside} (outside the fixture tree: never staged)",
                       f"{tree / 'shelf_files' / 'linked'} (outside the fixture tree: never staged)"]


def test_a_sandbox_without_a_home_of_its_own_gets_nothing_staged():
    # The local and attached backends run in the user's real home: refused, as before.
    [staging], _ = fixture_stagings(_scenario("shelf_read_ledger"), FIXTURES)
    with pytest.raises(SandboxError, match="use --backend docker"):
        asyncio.run(stage_fixtures(object(), [staging]))
    asyncio.run(stage_fixtures(object(), []))  # nothing to stage: nothing asked of it


class _Engine:
    """A stand-in for the Docker engine's exec API: the command's side of the exec's socket
    reads ``expect`` bytes (never an end-of-file, as in a sandbox) and answers in Docker's
    frames, one on stdout and one on stderr, then the stream closes."""

    def __init__(self, expect: int) -> None:
        self.ours, self.theirs = socket.socketpair()
        self.expect, self.got = expect, b""
        self.api = self
        self.thread = threading.Thread(target=self._command)

    def _command(self) -> None:
        while len(self.got) < self.expect:
            self.got += self.theirs.recv(self.expect - len(self.got))
        for stream, text in ((1, b"unpacked\n"), (2, b"a warning\n")):
            self.theirs.sendall(bytes([stream, 0, 0, 0]) + len(text).to_bytes(4, "big") + text)
        self.theirs.close()

    def exec_create(self, container: str, command: list[str], stdin: bool) -> dict[str, Any]:
        assert stdin and command[0] == "sh"
        return {"Id": "exec-1"}

    def exec_start(self, exec_id: str, socket: bool) -> Any:
        self.thread.start()
        return socket and self.ours

    def exec_inspect(self, exec_id: str) -> dict[str, Any]:
        return {"Running": False, "ExitCode": 0}


def test_the_exec_feeds_stdin_without_an_end_and_reads_the_frames():
    data = os.urandom(300_000)  # more than one socket buffer
    engine = _Engine(len(data))
    box = type("Box", (), {"client": engine, "id": "c1", "name": "tbx-c1"})()
    code, output = exec_with_input(box, ["sh", "-c", "head -c 300000 | tar -x"], data, 10)  # type: ignore[arg-type]
    engine.thread.join(5)
    assert (code, output, engine.got == data) == (0, b"unpacked\na warning\n", True)


def test_a_declared_folder_that_is_itself_an_answer_is_never_staged():
    scenario = _scenario("shelf_read_ledger").model_copy(
        update={"fixtures": ["shelf_files/ledger/__pycache__", "shelf_files/_gen_shelves"]})
    stagings, missing = fixture_stagings(scenario, FIXTURES)
    assert stagings == []
    assert missing == [
        f"{LEDGER / '__pycache__'} (holds answers: GAIA never stages it)",
        f"{FIXTURES / 'shelf_files' / '_gen_shelves'} (holds answers: GAIA never stages it)"]


SCENARIO = """\
id: shelf_turn_only
name: "Shelf — A Path Named Only in the Turn"
category: gaia_files
persona: casual_user
setup:
  index_documents: []
{fixtures}turns:
  - turn: 1
    objective: "Ask how many jars the pantry count says"
    user_message: "how many jars does ~/gaia-eval/shelf_files/ledger/pantry count.txt say?"
    ground_truth:
      expected_answer: "17"
    success_criteria: "Agent reads the file and answers 17."
"""


def test_a_path_named_only_in_a_turn_is_staged_only_when_declared(tmp_path: Path):
    # GAIA's harness stages its fixture folders before any scenario, reading no scenario; trialbox
    # stages what a scenario declares, and the turns' words are not a declaration.
    tree = tmp_path / "scenarios" / "gaia_files"
    tree.mkdir(parents=True)
    (tree / "shelf_turn_only.yaml").write_text(SCENARIO.format(fixtures=""))
    bare = _scenario("shelf_turn_only", tmp_path / "scenarios")
    assert bare.fixtures == [] and fixture_stagings(bare, FIXTURES) == ([], [])

    (tree / "shelf_turn_only.yaml").write_text(
        SCENARIO.format(fixtures="fixtures: [shelf_files/ledger]\n"))
    declared = _scenario("shelf_turn_only", tmp_path / "scenarios")
    [staging], missing = fixture_stagings(declared, FIXTURES)
    assert missing == [] and staging.inside == PurePosixPath("gaia-eval/shelf_files/ledger")
