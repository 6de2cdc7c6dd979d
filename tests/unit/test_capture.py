"""`trialbox capture` on real GAIA chat databases (tests/fixtures/chat_db, written by GAIA's Agent
UI in a real sandbox run): the scenario it writes, and every bad input's message and exit code."""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from runner.capture import (
    REVIEW_NOTE,
    CaptureError,
    SessionDocument,
    capture,
    capture_command,
    document_path,
    list_sessions,
    pair_turns,
    read_session,
    render_yaml,
    scenario_id_for,
    tools_from_steps,
)
from runner.scenarios import load_suite

ROOT = Path(__file__).resolve().parents[2]
CHAT_DB = ROOT / "tests" / "fixtures" / "chat_db"
CORPUS = ROOT / "tests" / "fixtures" / "engine_suite" / "corpus"
APPLES_DB = CHAT_DB / "orchard_apples.db"
SESSION = "b166e357-7457-4bc5-a9a7-77da77ce2e2b"
FIXED = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def cli() -> typer.Typer:
    app = typer.Typer()
    app.command("capture")(capture_command)
    app.command("version")(lambda: None)  # two commands: `capture` stays a subcommand, as in runner/cli/app.py
    return app


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli(), ["capture", *args])


@pytest.fixture()
def out_dir(tmp_path: Path) -> Path:
    return tmp_path / "eval" / "scenarios" / "captured"


@pytest.fixture()
def two_sessions(tmp_path: Path) -> Path:
    """The real database plus a second session, inserted through GAIA's own schema."""
    db = tmp_path / "gaia_chat.db"
    shutil.copy(APPLES_DB, db)
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO sessions (id, title, created_at) VALUES (?, ?, ?)",
                     ("b166ffff-0000-4000-8000-000000000001", "Second chat", "2026-11-30T12:00:00"))
        conn.execute("INSERT INTO messages (session_id, role, content) VALUES (?, 'user', 'Hi')",
                     ("b166ffff-0000-4000-8000-000000000001",))
        conn.execute("INSERT INTO messages (session_id, role, content) VALUES (?, 'assistant', "
                     "'Hello.')", ("b166ffff-0000-4000-8000-000000000001",))
    return db


# --- reading the database ----------------------------------------------------------------

def test_lists_the_sandbox_session() -> None:
    [session] = list_sessions(APPLES_DB)
    assert (session.id, session.title, session.turns, session.documents) == (
        SESSION, "trialbox: orchard_apples", 2, 1)
    assert session.model == "Gemma-4-E4B-it-GGUF"


def test_reads_turns_tools_and_documents_from_the_real_database() -> None:
    captured = read_session(APPLES_DB, None)
    with sqlite3.connect(APPLES_DB) as conn:
        users = [r[0] for r in conn.execute("SELECT content FROM messages WHERE role='user' ORDER BY id")]
        steps = [json.loads(r[0]) for r in conn.execute(
            "SELECT agent_steps FROM messages WHERE role='assistant' ORDER BY id")]
    assert [t.user_message for t in captured.turns] == users
    assert steps[0][0]["tool"] == "index_documents"  # the UI's own step is really there …
    assert [t.tools for t in captured.turns] == [["query_documents"], ["query_documents"]]  # … and left out
    assert [d.filename for d in captured.documents] == ["orchard_report.md"]
    assert captured.documents[0].sha256 == json.loads((CORPUS / "manifest.json").read_text())[
        "documents"][1]["sha256"]


def test_tools_from_steps_handles_every_step_shape() -> None:
    steps = [{"type": "thinking", "label": "Thinking"},
             {"type": "tool", "tool": "index_documents"},
             {"type": "tool", "tool": "search_file"},
             {"type": "tool", "tool": "query_documents"},
             {"type": "tool", "tool": "search_file"},
             {"name": "legacy_named"}, {"tool_name": "older_named"}, "not a step"]
    assert tools_from_steps(json.dumps(steps)) == [
        "search_file", "query_documents", "legacy_named", "older_named"]
    assert tools_from_steps("{not json") == []
    assert tools_from_steps(None) == []
    assert tools_from_steps(json.dumps({"type": "tool"})) == []


def test_pairs_turns_as_gaias_history_does() -> None:
    messages = [{"role": "system", "content": "setup"},
                {"role": "assistant", "content": "orphan reply"},
                {"role": "user", "content": "first"},
                {"role": "user", "content": "added mid-turn"},
                {"role": "assistant", "content": "answer", "agent_steps": None},
                {"role": "autonomous", "content": "background"},
                {"role": "user", "content": "never answered"}]
    [turn] = pair_turns(messages)
    assert (turn.user_message, turn.answer) == ("first\n\nadded mid-turn", "answer")


def test_scenario_ids_follow_gaias_slug_rule() -> None:
    assert scenario_id_for("trialbox: orchard_apples", SESSION) == "captured_trialbox_orchard_apples"
    assert scenario_id_for("What's the Q3 budget?!", SESSION) == "captured_what_s_the_q3_budget"
    assert scenario_id_for("¿¿??", SESSION) == "captured_b166e357"
    assert len(scenario_id_for("x" * 100, SESSION)) == len("captured_") + 40


# --- the scenario written ----------------------------------------------------------------

def test_capture_writes_gaias_captured_form_and_it_validates(out_dir: Path) -> None:
    result = capture(APPLES_DB, SESSION[:8], out_dir=out_dir, corpus_root=CORPUS, now=lambda: FIXED)
    assert result.path == out_dir / "captured_trialbox_orchard_apples.yaml"
    data = yaml.safe_load(result.path.read_text())
    assert data["category"] == "captured"
    assert data["setup"] == {"index_documents": ["documents/orchard_report.md"]}  # plain strings
    assert [t["user_message"] for t in data["turns"]] == [
        "How many kilograms of apples were picked this season?",
        "And how many cider batches were pressed?"]
    assert all(t["expected_tools"] == ["query_documents"] for t in data["turns"])
    assert all(t["success_criteria"].startswith("Answers like the captured session did: You can")
               for t in data["turns"])
    assert data["captured_from"]["session_id"] == SESSION
    assert data["captured_from"]["captured_at"] == "2026-11-30T12:00:00+00:00"
    text = result.path.read_text()
    assert text.count(REVIEW_NOTE) == 2 and text.startswith("# Captured by `trialbox capture`")
    suite = load_suite([result.path], CORPUS)
    assert result.problems == [] and suite.errors == []
    [scenario] = suite.scenarios
    assert scenario.setup_documents[0].relative_path.as_posix() == "documents/orchard_report.md"


def test_a_document_not_in_the_corpus_keeps_the_path_the_ui_indexed(tmp_path: Path, out_dir: Path) -> None:
    other = tmp_path / "corpus"
    (other / "documents").mkdir(parents=True)
    (other / "documents" / "orchard_report.md").write_text("different bytes\n")
    (other / "manifest.json").write_text('{"documents": []}')
    result = capture(APPLES_DB, out_dir=out_dir, corpus_root=other)
    written = yaml.safe_load(result.path.read_text())["setup"]["index_documents"]
    assert written == ["/tmp/capwork/head/tests/fixtures/engine_suite/corpus/documents/orchard_report.md"]
    # our loader matches such an absolute path to the corpus file of that name, with a warning
    assert result.errors == [] and any("same name" in p.message for p in result.problems)


def test_document_paths_under_eval_corpus_become_relative(tmp_path: Path) -> None:
    (tmp_path / "documents").mkdir()
    (tmp_path / "documents" / "x.md").write_text("x")
    doc = SessionDocument(filepath="C:\\Users\\dev\\gaia\\eval\\corpus\\documents\\x.md", filename="x.md")
    assert document_path(doc, tmp_path, {}) == "documents/x.md"
    assert document_path(doc, None, {}) == "C:/Users/dev/gaia/eval/corpus/documents/x.md"


def test_review_comments_never_change_the_data() -> None:
    data = {"id": "captured_x", "category": "captured", "persona": "casual_user",
            "turns": [{"turn": 1, "objective": "o",
                       "user_message": "line one\n  success_criteria: not a key\nend",
                       "success_criteria": "multi\nline"}],
            "captured_from": {"session_id": "s"}}
    text = render_yaml(data)
    assert yaml.safe_load(text) == data
    assert text.count(REVIEW_NOTE) == 1


def test_an_existing_file_is_refused_unless_forced(out_dir: Path) -> None:
    first = capture(APPLES_DB, out_dir=out_dir, corpus_root=CORPUS)
    first.path.write_text(first.path.read_text() + "# reviewed by hand\n")
    with pytest.raises(CaptureError, match="already exists.*--force"):
        capture(APPLES_DB, out_dir=out_dir, corpus_root=CORPUS)
    assert first.path.read_text().endswith("# reviewed by hand\n")
    capture(APPLES_DB, out_dir=out_dir, corpus_root=CORPUS, force=True)
    assert "reviewed by hand" not in first.path.read_text()


# --- bad input: one clear message, exit code 2 -------------------------------------------

def test_cli_captures_and_lists(out_dir: Path) -> None:
    listed = invoke(str(APPLES_DB), "--list")
    assert listed.exit_code == 0 and SESSION in listed.output and "trialbox: orchard_apples" in listed.output
    done = invoke(str(APPLES_DB), "--out", str(out_dir), "--corpus", str(CORPUS))
    assert done.exit_code == 0, done.output
    assert "valid; review each success_criteria" in done.output
    assert (out_dir / "captured_trialbox_orchard_apples.yaml").is_file()


def test_cli_refuses_an_existing_output(out_dir: Path) -> None:
    args = (str(APPLES_DB), "--out", str(out_dir), "--corpus", str(CORPUS))
    assert invoke(*args).exit_code == 0
    again = invoke(*args)
    assert again.exit_code == 2
    assert "captured_trialbox_orchard_apples.yaml: already exists" in again.output
    assert invoke(*args, "--force").exit_code == 0


def test_cli_refuses_a_database_that_is_not_gaias(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE sessions (id TEXT, title TEXT)")
    done = invoke(str(other), "--list")
    assert done.exit_code == 2
    assert "not a GAIA Agent UI chat database" in done.output
    assert "column sessions.created_at" in done.output and "table messages" in done.output

    text = tmp_path / "notes.db"
    text.write_text("just some text, not SQLite at all " * 10)
    done = invoke(str(text))
    assert done.exit_code == 2 and "not an SQLite database" in done.output

    done = invoke(str(tmp_path / "missing.db"))
    assert done.exit_code == 2 and "missing.db: no such file" in done.output


def test_cli_refuses_an_unknown_session_and_names_the_ones_there(out_dir: Path) -> None:
    done = invoke(str(APPLES_DB), "--session", "deadbeef", "--out", str(out_dir))
    assert done.exit_code == 2
    assert "no session 'deadbeef'" in done.output and SESSION in done.output
    assert not out_dir.exists()


def test_several_sessions_need_a_session_and_an_unambiguous_prefix(two_sessions: Path, out_dir: Path) -> None:
    assert [s.title for s in list_sessions(two_sessions)] == ["Second chat", "trialbox: orchard_apples"]  # newest first
    done = invoke(str(two_sessions), "--out", str(out_dir))
    assert done.exit_code == 2 and "holds 2 sessions with replies" in done.output
    done = invoke(str(two_sessions), "--session", "b166", "--out", str(out_dir))
    assert done.exit_code == 2 and "matches 2 sessions" in done.output
    done = invoke(str(two_sessions), "--session", "b166ff", "--out", str(out_dir), "--corpus", str(CORPUS))
    assert done.exit_code == 0, done.output
    data = yaml.safe_load((out_dir / "captured_second_chat.yaml").read_text())
    assert data["setup"]["index_documents"] == [] and "expected_tools" not in data["turns"][0]


def test_a_session_without_replies_is_refused(two_sessions: Path) -> None:
    with sqlite3.connect(two_sessions) as conn:
        conn.execute("DELETE FROM messages WHERE role = 'assistant' AND session_id LIKE 'b166ffff%'")
    with pytest.raises(CaptureError, match="no user message with a saved reply"):
        read_session(two_sessions, "b166ffff")


def test_cli_says_when_the_capture_does_not_validate(tmp_path: Path, out_dir: Path) -> None:
    empty = tmp_path / "empty_corpus"
    empty.mkdir()
    done = invoke(str(APPLES_DB), "--out", str(out_dir), "--corpus", str(empty))
    assert done.exit_code == 2
    assert "does not validate against the corpus" in done.output
    assert "orchard_report.md" in done.output  # the loader's own problem line names the document


def test_the_database_is_opened_read_only(tmp_path: Path, out_dir: Path) -> None:
    db = tmp_path / "gaia_chat.db"
    shutil.copy(APPLES_DB, db)
    before = db.read_bytes()
    capture(db, out_dir=out_dir, corpus_root=CORPUS)
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval", "gaia_chat.db"]


def test_out_must_be_a_folder(tmp_path: Path) -> None:
    file = tmp_path / "taken"
    file.write_text("")
    done = invoke(str(APPLES_DB), "--out", str(file), "--corpus", str(CORPUS))
    assert done.exit_code == 2 and "is a file; give a folder" in done.output


def test_without_a_path_the_users_own_database_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "chat").mkdir()
    shutil.copy(APPLES_DB, tmp_path / "chat" / "gaia_chat.db")
    monkeypatch.setenv("GAIA_HOME", str(tmp_path))
    done = invoke("--list")
    assert done.exit_code == 0 and SESSION in done.output
    monkeypatch.setenv("GAIA_HOME", str(tmp_path / "elsewhere"))
    done = invoke("--list")
    assert done.exit_code == 2 and "elsewhere/chat/gaia_chat.db: no such file" in done.output


def test_an_empty_database_says_so(tmp_path: Path) -> None:
    db = tmp_path / "gaia_chat.db"
    shutil.copy(APPLES_DB, db)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM sessions")
    listed = invoke(str(db), "--list")
    assert listed.exit_code == 0 and "no sessions" in listed.output
    done = invoke(str(db), "--session", "abc")
    assert done.exit_code == 2 and "(the database has no sessions)" in done.output
