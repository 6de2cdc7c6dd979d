"""GAIA's own keys load without a warning that tells the user to rename or remove them: facts
and phrases written inside `ground_truth`, the bookkeeping at the head of GAIA's manifest, and
the success criteria GAIA's capture wrote as a mapping (GAIA's public tree keeps such a file,
and refusing it made the whole run exit 2). Our own tree, written in those shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.scenarios import load_suite

MANIFEST = {
    "generated_at": "2026-09-14T08:30:00Z",
    "total_documents": 1,
    "total_facts": 1,
    "notes": "Ferry timetable rewritten 2026-09-14: winter departures moved to 17:40.",
    "documents": [{"id": "ferry_timetable", "filename": "ferry_timetable.md", "format": "markdown",
                   "domain": "transport",
                   "facts": [{"id": "last_winter_departure", "question": "When is the last "
                              "winter departure?", "answer": "17:40", "difficulty": "easy"}]}],
}

RAG = """\
id: ferry_last_winter_boat
category: rag_quality
persona: casual_user
agent_type: doc
setup:
  index_documents:
    - corpus_doc: ferry_timetable
      path: eval/corpus/documents/ferry_timetable.md
turns:
  - turn: 1
    objective: "Ask 'When does the last ferry leave in winter?'"
    ground_truth:
      doc_id: ferry_timetable
      fact_ids: [last_winter_departure]
      expected_phrases: ["17:40", "winter"]
    success_criteria: Gives 17:40 as the last winter departure.
"""

CAPTURED = """\
id: captured_ferry_question
category: captured
description: 'Captured from session: ferry question'
persona: casual_user
setup:
  index_documents: []
turns:
- turn: 1
  objective: '[REVIEW] Is there a ferry after six in winter?'
  user_message: Is there a ferry after six in winter?
  expected_tools:
  - query_documents
  success_criteria:
    must_contain: ["17:40"]
    agent_response_preview: 'The last winter ferry leaves at 17:40'
captured_from:
  session_id: 5d1e0c44
  captured_at: '2026-09-20T09:12:44'
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    corpus = tmp_path / "eval" / "corpus"
    (corpus / "documents").mkdir(parents=True)
    (corpus / "documents" / "ferry_timetable.md").write_text(
        "# Ferry timetable\n\nWinter: departures 07:10, 12:30 and 17:40.\n")
    (corpus / "manifest.json").write_text(json.dumps(MANIFEST, indent=2))
    for folder, name, text in (("rag_quality", "ferry.yaml", RAG),
                               ("captured", "captured_ferry.yaml", CAPTURED)):
        (tmp_path / "eval" / "scenarios" / folder).mkdir(parents=True)
        (tmp_path / "eval" / "scenarios" / folder / name).write_text(text)
    return tmp_path


def test_gaias_own_keys_load_without_warnings(tree: Path) -> None:
    suite = load_suite([tree / "eval" / "scenarios"], tree / "eval" / "corpus")
    assert [str(problem) for problem in suite.errors] == []
    assert [str(problem) for problem in suite.warnings] == []
    rag = next(s for s in suite.scenarios if s.id == "ferry_last_winter_boat")
    truth = rag.turns[0].ground_truth
    assert truth is not None
    assert truth.fact_ids == ["last_winter_departure"]
    assert truth.expected_phrases == ["17:40", "winter"]


def test_captured_criteria_written_as_a_mapping_are_said_in_words(tree: Path) -> None:
    suite = load_suite([tree / "eval" / "scenarios"], tree / "eval" / "corpus")
    captured = next(s for s in suite.scenarios if s.id == "captured_ferry_question")
    assert captured.turns[0].success_criteria == (
        "The answer contains '17:40'. The captured answer began: 'The last winter ferry leaves "
        "at 17:40'")


@pytest.mark.parametrize("criteria", [
    "{must_contain: [], agent_response_preview: ''}",
    "{must_contain: []}",
])
def test_empty_captured_criteria_say_that_nothing_was_written(tree: Path, criteria: str) -> None:
    path = tree / "eval" / "scenarios" / "captured" / "captured_ferry.yaml"
    text = path.read_text()
    start = text.index("  success_criteria:")
    end = text.index("captured_from:")
    path.write_text(text[:start] + f"  success_criteria: {criteria}\n" + text[end:])
    suite = load_suite([tree / "eval" / "scenarios"], tree / "eval" / "corpus")
    captured = next(s for s in suite.scenarios if s.id == "captured_ferry_question")
    assert captured.turns[0].success_criteria == (
        "The captured session wrote no words the answer must contain.")


def test_any_other_mapping_is_still_refused_naming_the_field(tree: Path) -> None:
    path = tree / "eval" / "scenarios" / "captured" / "captured_ferry.yaml"
    path.write_text(path.read_text().replace("    must_contain:", "    must_say:"))
    suite = load_suite([tree / "eval" / "scenarios"], tree / "eval" / "corpus")
    assert [p.field for p in suite.errors] == ["turns[0].success_criteria"]
    assert "captured_ferry_question" not in [s.id for s in suite.scenarios]
