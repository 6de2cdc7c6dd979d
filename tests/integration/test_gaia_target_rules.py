"""The target's readings of GAIA's output, checked against GAIA's own code where GAIA makes it.

Tool arguments reach the transcript only as the text GAIA's SSE handler formats for the UI, so
the parser is checked against that formatter itself (run in .venv-gaia), not against a copy.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path, PurePosixPath

import pytest

from runner.conversation import parse_tool_detail, permission_decision, tool_calls_from_steps

FORMAT_WITH_GAIA = """
import json, sys
from gaia.ui.sse_handler import _format_tool_args
print(json.dumps([_format_tool_args("t", args) for args in json.load(sys.stdin)]))
"""

ARGUMENT_SETS = [
    {"query": "total budget"},
    {"file_path": "/corpus/documents/budget.md", "query": "travel, lodging and meals"},
    {"query": "budget", "file_path": "/corpus/a.md", "max_results": 5},
    {"pattern": "Q2", "case_sensitive": True},
]


@pytest.mark.integration
def test_arguments_survive_gaia_formatting(gaia_python: Path) -> None:
    shown = subprocess.run(
        [str(gaia_python), "-c", FORMAT_WITH_GAIA],
        input=json.dumps(ARGUMENT_SETS), capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    details = json.loads(shown.stdout)
    parsed = [parse_tool_detail(detail) for detail in details]
    assert parsed == [
        {"query": "total budget"},
        # a value holding ", " makes GAIA switch to one argument per line; nothing is split
        {"file_path": "/corpus/documents/budget.md", "query": "travel, lodging and meals"},
        {"query": "budget", "file_path": "/corpus/a.md", "max_results": "5"},
        {"pattern": "Q2", "case_sensitive": True},
    ]


def test_a_label_is_kept_whole_not_misread_as_arguments() -> None:
    assert parse_tool_detail("Indexing 1 document(s) for RAG") == {
        "_detail": "Indexing 1 document(s) for RAG"
    }
    assert parse_tool_detail("") == {}


def test_tool_calls_come_in_order_with_failures_and_denials() -> None:
    steps = [
        {"type": "thinking", "label": "Thinking"},
        {"type": "tool", "tool": "query_documents", "detail": "query: budget",
         "result": "3 chunks " + "x" * 400, "success": True},
        {"type": "tool", "tool": "read_file", "detail": "file_path: /etc/passwd",
         "result": "Permission denied by user", "success": False},
        {"type": "status", "label": "Working"},
    ]  # fmt: skip
    denials = [{"tool": "read_file", "message": "The user declined"}]
    calls = tool_calls_from_steps(steps, denials)
    assert [c.name for c in calls] == ["query_documents", "read_file"]
    assert calls[0].arguments == {"query": "budget"}
    assert len(calls[0].result_summary) == 300 and calls[0].error is None
    assert calls[1].error == "permission denied: The user declined"


@pytest.mark.parametrize(
    ("prompt", "decision"),
    [
        ({"tool": "read_file", "args": {"file_path": "/corpus/documents/a.md"}}, "allow_once"),
        ({"tool": "read_file", "args": {"file_path": "documents/a.md"}}, "allow_once"),
        ({"tool": "read_file", "args": {"file_path": "/corpus/../etc/passwd"}}, "deny"),
        ({"tool": "read_file", "args": {"file_path": "/home/user/.ssh/id_rsa"}}, "deny"),
        ({"tool": "search_file", "args": {"directory": "/"}}, "deny"),
        ({"tool": "write_file", "args": {"file_path": "/corpus/documents/a.md"}}, "deny"),
        ({"tool": "run_shell_command", "args": {"command": "cat /corpus/a.md"}}, "deny"),
        ({"tool": "read_file", "args": {}}, "deny"),
    ],
)
def test_permission_rule_allows_only_reads_inside_the_corpus(prompt: dict, decision: str) -> None:
    assert permission_decision(prompt, PurePosixPath("/corpus")) == decision


def test_a_simulators_reply_becomes_a_user_message_either_shape() -> None:
    from runner.conversation.target import as_user_message
    from runner.records.transcript import UserMessage

    said = UserMessage(text="What is the budget?", source="extracted")
    assert as_user_message(said) is said
    assert as_user_message("Hello") == UserMessage(text="Hello", source="verbatim", model=None)
