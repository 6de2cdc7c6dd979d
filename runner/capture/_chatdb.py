"""Reading a GAIA Agent UI chat database (`gaia_chat.db`) without ever writing to it.

The schema is GAIA's (amd-gaia 0.25.1, `gaia/ui/database.py`): `sessions`, `messages` (with the
JSON `agent_steps` the UI persists per reply), `documents` (`file_hash` is the SHA-256 of the
file's bytes) and `session_documents`. Only the columns named in REQUIRED_COLUMNS are read,
so older and newer databases with extra columns work as long as those are there.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from runner.records.evidence import UI_INDEXING_STEP

DEFAULT_DB = Path.home() / ".gaia" / "chat" / "gaia_chat.db"
"""Where the Agent UI keeps a user's chats when GAIA_HOME is not set."""


def default_db() -> Path:
    """The user's own chat database: `$GAIA_HOME/chat/gaia_chat.db`, as the Agent UI finds it."""
    home = os.environ.get("GAIA_HOME")
    return Path(home) / "chat" / "gaia_chat.db" if home else DEFAULT_DB

REQUIRED_COLUMNS: dict[str, frozenset[str]] = {
    "sessions": frozenset({"id", "title", "created_at", "model"}),
    "messages": frozenset({"id", "session_id", "role", "content", "agent_steps"}),
    "documents": frozenset({"id", "filename", "filepath", "file_hash"}),
    "session_documents": frozenset({"session_id", "document_id"}),
}


class CaptureError(Exception):
    """Bad input for capture: the message names the file, what is wrong and the fix."""


class SessionSummary(BaseModel):
    """One chat as `--list` shows it."""

    id: str = Field(description="The session's UUID in the chat database.")
    title: str = Field(description="The session's title as the Agent UI shows it.")
    created_at: str = Field(default="", description="When the session was created (GAIA's text).")
    model: str = Field(default="", description="The chat model the session was set to.")
    turns: int = Field(description="User/assistant pairs in the session.")
    documents: int = Field(description="Documents attached to the session.")


class CapturedTurn(BaseModel):
    """One user message and the reply the agent saved for it."""

    user_message: str = Field(description="What the user wrote, verbatim.")
    answer: str = Field(description="The agent's saved reply.")
    tools: list[str] = Field(default_factory=list, description=(
        "Tools the agent called, first-call order, each once; the UI's own indexing left out."))


class SessionDocument(BaseModel):
    """A document attached to the session."""

    filepath: str = Field(description="The path the Agent UI indexed it from.")
    filename: str = Field(description="The file's name.")
    sha256: str = Field(default="", description="GAIA's file_hash: SHA-256 of the file's bytes.")


class CapturedSession(BaseModel):
    """Everything capture needs from one session."""

    summary: SessionSummary = Field(description="The session as --list shows it.")
    turns: list[CapturedTurn] = Field(description="Question/reply pairs, in order.")
    documents: list[SessionDocument] = Field(description="Attached documents, by path.")


def open_chat_db(path: Path) -> sqlite3.Connection:
    """Open read-only and check it is GAIA's chat database, or raise CaptureError."""
    if not path.is_file():
        raise CaptureError(f"{path}: no such file; give the path of a gaia_chat.db (a user's "
                           f"{default_db()}, or a run's results/<run>/artifacts/<id>/gaia_chat.db)")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        tables = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise CaptureError(f"{path}: not an SQLite database ({exc}); give the GAIA Agent UI's "
                           "chat database, gaia_chat.db") from None
    missing = []
    for table, columns in REQUIRED_COLUMNS.items():
        if table not in tables:
            missing.append(f"table {table}")
            continue
        have = {row["name"] for row in conn.execute(f"PRAGMA table_info({table})")}
        missing += [f"column {table}.{column}" for column in sorted(columns - have)]
    if missing:
        conn.close()
        raise CaptureError(f"{path}: not a GAIA Agent UI chat database (missing "
                           f"{', '.join(missing)}); give the Agent UI's gaia_chat.db")
    return conn


def list_sessions(path: Path) -> list[SessionSummary]:
    """Every session, newest first."""
    with closing(open_chat_db(path)) as conn:
        rows = conn.execute("SELECT id FROM sessions ORDER BY created_at DESC, id").fetchall()
        return [_summary(conn, row["id"]) for row in rows]


def read_session(path: Path, session_id: str | None) -> CapturedSession:
    """The session `session_id` (a full id or a unique prefix); None picks the only session
    that has a reply, which is what a sandbox's database holds."""
    with closing(open_chat_db(path)) as conn:
        full_id = _resolve(conn, path, session_id)
        summary = _summary(conn, full_id)
        messages = conn.execute(
            "SELECT role, content, agent_steps FROM messages WHERE session_id = ? ORDER BY id",
            (full_id,)).fetchall()
        documents = conn.execute(
            "SELECT d.filepath, d.filename, d.file_hash FROM documents d JOIN session_documents sd"
            " ON sd.document_id = d.id WHERE sd.session_id = ? ORDER BY d.filepath",
            (full_id,)).fetchall()
    turns = pair_turns([dict(row) for row in messages])
    if not turns:
        raise CaptureError(f"{path}: session {full_id} has no user message with a saved reply; "
                           "nothing to capture (pick another with --list)")
    return CapturedSession(summary=summary, turns=turns, documents=[
        SessionDocument(filepath=row["filepath"] or row["filename"], filename=row["filename"],
                        sha256=row["file_hash"] or "") for row in documents])


def pair_turns(messages: list[dict[str, Any]]) -> list[CapturedTurn]:
    """User/assistant pairs in order. Several user rows before one reply are one question
    (the UI saves a message added mid-turn as its own row; GAIA's history joins them the same
    way); system and autonomous rows and a reply without a question are not the user's turns."""
    turns: list[CapturedTurn] = []
    pending: list[str] = []
    for message in messages:
        if message["role"] == "user":
            pending.append(message["content"])
        elif message["role"] == "assistant" and pending:
            turns.append(CapturedTurn(user_message="\n\n".join(pending), answer=message["content"],
                                      tools=tools_from_steps(message.get("agent_steps"))))
            pending = []
    return turns


def tools_from_steps(raw: str | None) -> list[str]:
    """The tool names in a reply's `agent_steps` JSON, in first-call order, each once.

    0.25.1 writes `{"type": "tool", "tool": name, ...}` steps beside thinking/status steps;
    older databases named the tool `name` or `tool_name`. The Agent UI's own indexing step is
    the harness's doing, not the agent's choice, so it is left out (as runner.records.evidence does).
    """
    try:
        steps = json.loads(raw) if raw else []
    except (json.JSONDecodeError, TypeError):
        return []  # a damaged step log loses the tools, never the conversation
    names: list[str] = []
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, dict) or step.get("type", "tool") != "tool":
            continue
        name = step.get("tool") or step.get("name") or step.get("tool_name")
        if isinstance(name, str) and name and name != UI_INDEXING_STEP and name not in names:
            names.append(name)
    return names


def _resolve(conn: sqlite3.Connection, path: Path, session_id: str | None) -> str:
    if session_id is None:
        answered = [row["session_id"] for row in conn.execute(
            "SELECT DISTINCT session_id FROM messages WHERE role = 'assistant'")]
        if len(answered) == 1:
            return str(answered[0])
        raise CaptureError(f"{path}: holds {len(answered)} sessions with replies; name one with "
                           f"--session ID{_choices(conn)}")
    exact = conn.execute("SELECT id FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if exact:
        return str(exact["id"])
    # A prefix as `--list` prints it; compared as text (no LIKE: `_` and `%` are wildcards there).
    matches = [row["id"] for row in conn.execute("SELECT id FROM sessions")
               if str(row["id"]).startswith(session_id)]
    if len(matches) == 1:
        return str(matches[0])
    if matches:
        raise CaptureError(f"{path}: session prefix {session_id!r} matches {len(matches)} "
                           f"sessions ({', '.join(sorted(matches))}); give more of the id")
    raise CaptureError(f"{path}: no session {session_id!r}; give an id from --list"
                       f"{_choices(conn)}")


def _choices(conn: sqlite3.Connection) -> str:
    rows = conn.execute(
        "SELECT id, title FROM sessions ORDER BY created_at DESC, id LIMIT 10").fetchall()
    if not rows:
        return " (the database has no sessions)"
    return " — sessions here: " + "; ".join(f"{row['id']} {row['title']!r}" for row in rows)


def _summary(conn: sqlite3.Connection, session_id: str) -> SessionSummary:
    row = conn.execute("SELECT id, title, created_at, model FROM sessions WHERE id = ?",
                       (session_id,)).fetchone()
    roles = [r["role"] for r in conn.execute(
        "SELECT role, content FROM messages WHERE session_id = ? ORDER BY id", (session_id,))]
    turns = sum(1 for before, after in zip(roles, roles[1:], strict=False)
                if before == "user" and after == "assistant")
    documents = conn.execute("SELECT COUNT(*) FROM session_documents WHERE session_id = ?",
                             (session_id,)).fetchone()[0]
    return SessionSummary(id=str(row["id"]), title=row["title"] or "", created_at=row["created_at"]
                          or "", model=row["model"] or "", turns=turns, documents=int(documents))
