"""A resumed run folder whose kept rows have artifacts an older run left cut short (a full
disk: 0-byte logs, a chat DB cut mid-page, half a JSON file): each is removed and named in its
row's notes and trace before anything runs, and whole artifacts are left alone (issue 34)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from test_report import failing, passing
from test_report_writer import trace, writer

from runner.report import RunWriter, read_scorecard, read_trace
from runner.run.resume import damage_of, flag_damaged_artifacts


def whole_database(path: Path) -> None:
    with sqlite3.connect(path) as database:
        database.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, content TEXT)")
        database.executemany("INSERT INTO messages (content) VALUES (?)", [("x" * 500,)] * 200)
    database.close()


def cut_short(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def test_cut_artifacts_are_removed_and_named_and_whole_ones_kept(tmp_path: Path) -> None:
    w = writer(tmp_path)
    w.add(trace(passing()))
    w.add(trace(failing()))
    run = tmp_path / "run-1"
    damaged, whole = run / "artifacts" / "budget_lookup", run / "artifacts" / "budget_wrong"
    for folder in (damaged, whole):
        folder.mkdir(parents=True)
        whole_database(folder / "gaia_chat.db")
        (folder / "agent-ui.log").write_text("INFO: Uvicorn running\n")
        (folder / "llm-stats.json").write_text('{"source": "front_door", "records": []}')
    cut_short(damaged / "gaia_chat.db", 4096 + 100)  # the header survives, the pages do not
    (damaged / "agent-ui.log").write_bytes(b"")
    cut_short(damaged / "llm-stats.json", 12)

    said: list[str] = []
    resumed = RunWriter.resume(run)
    assert flag_damaged_artifacts(resumed, said.append) == 3
    assert said == ["resume: 3 damaged artifact(s) of 1 kept scenario(s) removed and named in "
                    "their rows' notes (written before by a run that ran out of space or was cut "
                    "short)"]  # fmt: skip
    assert sorted(p.name for p in damaged.iterdir()) == []
    assert sorted(p.name for p in whole.iterdir()) == ["agent-ui.log", "gaia_chat.db", "llm-stats.json"]

    card = read_scorecard(run / "scorecard.json")
    row = next(r for r in card.scenarios if r.key == "budget_lookup")
    assert [n.split(" was damaged")[0] for n in row.notes if "was damaged" in n] == [
        "artifact agent-ui.log", "artifact gaia_chat.db", "artifact llm-stats.json"]
    assert "artifact agent-ui.log was damaged (0 bytes)" in " ".join(row.notes)
    assert "artifact llm-stats.json was damaged (not JSON)" in " ".join(row.notes)
    assert read_trace(run / "traces" / "budget_lookup.json").result.notes == row.notes
    assert not [n for r in card.scenarios if r.key == "budget_wrong" for n in r.notes if "damaged" in n]

    # Resumed again: nothing left to flag, and the notes are not doubled.
    assert flag_damaged_artifacts(RunWriter.resume(run), said.append) == 0
    again = read_scorecard(run / "scorecard.json")
    assert next(r for r in again.scenarios if r.key == "budget_lookup").notes == row.notes


def test_a_database_that_is_not_one_is_named_as_such(tmp_path: Path) -> None:
    fake = tmp_path / "gaia_chat.db"
    fake.write_text("not a database at all, but long enough to look like something")
    assert damage_of(fake) == "not an SQLite database"
    whole_database(tmp_path / "real.db")
    assert damage_of(tmp_path / "real.db") is None


def test_a_wal_mode_database_with_its_empty_companions_is_whole(tmp_path: Path) -> None:
    """GAIA writes its chat DB in WAL mode: a Docker sandbox's copy comes with a -wal file that
    is empty after a checkpoint. Neither is damage (the soak caught this)."""
    database = tmp_path / "gaia_chat.db"
    with sqlite3.connect(database) as live:
        live.execute("PRAGMA journal_mode=WAL")
        live.execute("CREATE TABLE t (x)")
        live.execute("INSERT INTO t VALUES (1)")
    live.close()
    (tmp_path / "gaia_chat.db-wal").write_bytes(b"")
    (tmp_path / "gaia_chat.db-shm").unlink(missing_ok=True)
    assert damage_of(database) is None
    assert damage_of(tmp_path / "gaia_chat.db-wal") is None
