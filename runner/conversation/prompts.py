"""How the simulated user answers the agent's mid-turn permission prompts and questions.

A permission prompt is allowed only for reading inside the corpus; a question is told to proceed.

The simulated user is a careful one and has no channel for a mid-turn question, so both answers
are rules, not a model's words.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import PurePath
from typing import Any

#: Said to the agent when it asks the user a mid-turn question: the simulated user has no
#: channel for it, so it is told to proceed rather than left waiting until the turn times out.
QUESTION_REPLY = "Please continue with your best judgement."
#: Tools whose permission prompt may be allowed: they only read, and only inside the corpus.
READ_TOOL_PREFIXES = ("read_", "search_", "query_", "list_", "index_", "preview_", "browse_",
                      "summarize_", "get_", "find_")  # fmt: skip
_PATH_KEY = re.compile(r"path|file|dir|folder", re.IGNORECASE)


def question_reply(question: dict[str, Any]) -> str:
    """The answer to a mid-turn question: proceed, or its first option when it takes no free text."""
    if question.get("allow_free_text", True):
        return QUESTION_REPLY
    options = question.get("options") or []
    first = options[0] if options else ""
    return str(first.get("value", "") if isinstance(first, dict) else first)


def permission_decision(prompt: dict[str, Any], corpus_root: PurePath) -> str:
    """``allow_once`` for a read-only tool whose every path lies inside the corpus, else ``deny``.

    The simulated user is a careful one: it lets the agent read the documents it was given and
    refuses anything else (writes, shell commands, paths outside the corpus).
    """
    tool = str(prompt.get("tool") or "")
    if not tool.startswith(READ_TOOL_PREFIXES):
        return "deny"
    arguments = prompt.get("args") or {}
    paths = [v for k, v in arguments.items() if _PATH_KEY.search(k) and isinstance(v, str) and v]
    if not paths:
        return "deny"  # a read prompt that names no path is not one we can vet
    # Lexical on purpose: the paths live in the Agent UI's filesystem (a container's, perhaps),
    # not the runner's, so nothing here may consult the local disk.
    root = posixpath.normpath(str(corpus_root))
    for value in paths:
        candidate = posixpath.normpath(posixpath.join(root, value))  # join keeps absolute values
        if posixpath.commonpath([root, candidate]) != root:
            return "deny"
    return "allow_once"
