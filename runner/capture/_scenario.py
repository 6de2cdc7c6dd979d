"""A captured session as a scenario in GAIA's captured form (what `gaia eval agent
--capture-session` writes): category `captured`, user turns verbatim, `expected_tools` from
the agent's steps, the session's documents as plain path strings, `captured_from` metadata.

Each turn gets a `success_criteria` quoting the captured reply, because a scenario turn needs
`ground_truth` or `success_criteria`; a comment above it says the author must review it (the
captured reply is what the agent said, not necessarily what is right).
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from runner.capture._chatdb import CapturedSession, SessionDocument
from runner.scenarios import Scenario, corpus_files, corpus_relative

CATEGORY = "captured"
QUOTED_CHARS = 200
"""How much of the captured reply the success criteria quotes."""
OBJECTIVE_CHARS = 120
PERSONA = "casual_user"
"""The turns are sent verbatim, so the persona only matters to a simulator asked to improvise;
GAIA's own capture writes free text here, which our loader warns about — a known one is quiet."""

REVIEW_NOTE = ("# REVIEW: quotes the captured reply, which is what the agent said, not what is "
               "right; replace it with what a correct answer must say, or add ground_truth.")


def scenario_id_for(title: str, session_id: str) -> str:
    """GAIA's rule: `captured_` + the title as a snake_case slug of at most 40 characters
    (the session id's first 8 hex characters when the title has no letters or digits)."""
    slug = re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")[:40].strip("_")
    if not slug:
        slug = re.sub(r"[^a-z0-9]+", "", session_id.lower())[:8] or "session"
    return f"captured_{slug}"


def document_path(document: SessionDocument, corpus_root: Path | None,
                  by_hash: dict[str, PurePosixPath]) -> str:
    """How the scenario names a session document.

    The same bytes in the corpus win (GAIA's file_hash is their SHA-256), so a sandbox's
    `/corpus/documents/x.md` comes back as `documents/x.md`; then a path under an
    `eval/corpus` folder, made relative; else the path as the Agent UI indexed it (GAIA's
    captured form, backslashes turned to slashes as GAIA does), which the loader matches to a
    corpus file by name.
    """
    if document.sha256 and document.sha256 in by_hash:
        return str(by_hash[document.sha256])
    relative = corpus_relative(document.filepath)
    if relative is not None and corpus_root is not None and (corpus_root / relative).is_file():
        return str(relative)
    return document.filepath.replace("\\", "/")


def corpus_hashes(corpus_root: Path | None) -> dict[str, PurePosixPath]:
    """SHA-256 → path relative to the corpus, for every corpus file (first path wins)."""
    if corpus_root is None or not corpus_root.is_dir():
        return {}
    found: dict[str, PurePosixPath] = {}
    for relative in corpus_files(corpus_root):
        digest = hashlib.sha256((corpus_root / relative).read_bytes()).hexdigest()
        found.setdefault(digest, relative)
    return found


def build_scenario(session: CapturedSession, corpus_root: Path | None, database: Path,
                   captured_at: datetime) -> dict[str, Any]:
    """The scenario as data, in the key order GAIA's captured files use."""
    summary = session.summary
    by_hash = corpus_hashes(corpus_root) if session.documents else {}
    turns = []
    for number, turn in enumerate(session.turns, start=1):
        entry: dict[str, Any] = {
            "turn": number,
            "objective": "Ask, as the captured user did: " + _one_line(turn.user_message,
                                                                        OBJECTIVE_CHARS),
            "user_message": turn.user_message,
        }
        if turn.tools:
            entry["expected_tools"] = list(turn.tools)
        entry["success_criteria"] = ("Answers like the captured session did: "
                                     + _one_line(turn.answer, QUOTED_CHARS))
        turns.append(entry)
    title = summary.title or "captured session"
    return {
        "id": scenario_id_for(summary.title, summary.id),
        "name": f"Captured: {title}",
        "category": CATEGORY,
        "description": f"Captured from GAIA Agent UI session: {title}",
        "persona": PERSONA,
        "setup": {"index_documents": [document_path(doc, corpus_root, by_hash)
                                      for doc in session.documents]},
        "turns": turns,
        "captured_from": {
            "session_id": summary.id,
            "title": summary.title,
            "captured_at": captured_at.isoformat(timespec="seconds"),
            "session_created_at": summary.created_at,
            "model": summary.model,
            "database": str(database),
            "tool": "trialbox capture",
        },
    }


def render_yaml(data: dict[str, Any]) -> str:
    """YAML with a header saying what to review and a review note above each success_criteria.

    The notes are inserted at the exact indentation PyYAML gives a turn's keys (block
    scalars inside a turn are indented deeper), and the result is parsed back and compared,
    so a comment can never change the data.
    """
    body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False,
                          width=100)
    lines = []
    for line in body.splitlines():
        if line.startswith("  success_criteria:"):
            lines.append("  " + REVIEW_NOTE)
        lines.append(line)
    header = [
        f"# Captured by `trialbox capture` from GAIA Agent UI session {data['captured_from']['session_id']}.",
        "# The user turns are verbatim and expected_tools are the tools the agent called then.",
        "# Review before relying on it: each success_criteria quotes the captured reply.",
    ]
    text = "\n".join(header + lines) + "\n"
    assert yaml.safe_load(text) == data, "a review comment changed the captured data"
    return text


def check_form(data: dict[str, Any]) -> Scenario:
    """The data is a scenario our loader's model accepts (raises pydantic's ValidationError)."""
    return Scenario.model_validate(data)


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit].rstrip() + "…"
