"""The suite's breadth: at least 77 scenarios in the 12 categories GAIA 0.25.1 users have
(including memory, mcp_reliability and captured), and the category tables in README.md and
eval/README.md give the tree's true counts — a table that drifts from the tree is caught, so
a user deciding what `make bench` covers reads today's numbers.

Each file is read by our own single-file loader (no corpus needed); test_suite.py does the
corpus-level gates.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from runner.scenarios import load_scenario_file

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "eval" / "scenarios"
TABLES = (REPO / "README.md", REPO / "eval" / "README.md")

CATEGORIES = {
    "rag_quality", "context_retention", "tool_selection", "error_recovery", "adversarial",
    "personality", "vision", "real_world", "web_system", "memory", "mcp_reliability",
    "captured",
}
MINIMUM = {"memory": 10, "mcp_reliability": 6, "captured": 2}

# A category table row: | `memory` | 11 | what it covers |
_ROW = re.compile(r"^\|\s*`(?P<category>[a-z_]+)`\s*\|\s*(?P<count>\d+)\s*\|", re.MULTILINE)
_TOTAL = re.compile(r"(?P<total>\d+) scenarios in (?P<categories>\d+) categories")


def category_counts(root: Path) -> Counter[str]:
    """Scenarios per category, each file loaded by the real loader (a rejected file fails)."""
    counts: Counter[str] = Counter()
    for file in sorted(root.rglob("*.yaml")):
        scenario, problems = load_scenario_file(file)
        assert scenario is not None, (file, [str(p) for p in problems])
        assert file.parent.name == scenario.category, file
        counts[scenario.category] += 1
    return counts


def table_counts(text: str) -> dict[str, int]:
    """The category table in a Markdown text: {category: count}; a category listed twice
    keeps both rows visible as a doubled entry (so it fails the comparison)."""
    rows: dict[str, int] = {}
    for match in _ROW.finditer(text):
        category = match["category"]
        rows[category] = rows.get(category, 0) + int(match["count"])
    return rows


def table_problems(text: str, counts: Counter[str]) -> list[str]:
    """What in a document's category table (and its "N scenarios in M categories" line,
    when it has one) disagrees with `counts`; empty when all agree."""
    problems = []
    rows = table_counts(text)
    for category in sorted(set(rows) | set(counts)):
        if rows.get(category) != counts.get(category):
            problems.append(f"{category}: table {rows.get(category)}, tree {counts.get(category)}")
    for match in _TOTAL.finditer(text):
        if (int(match["total"]), int(match["categories"])) != (sum(counts.values()), len(counts)):
            problems.append(f"'{match[0]}' but the tree has {sum(counts.values())} in {len(counts)}")
    return problems


@pytest.fixture(scope="module")
def counts() -> Counter[str]:
    return category_counts(SCENARIOS)


def test_the_suite_has_at_least_77_scenarios_in_the_12_categories(counts: Counter[str]) -> None:
    assert set(counts) == CATEGORIES
    assert sum(counts.values()) >= 77
    for category, minimum in MINIMUM.items():
        assert counts[category] >= minimum, (category, counts[category])


@pytest.mark.parametrize("document", TABLES, ids=lambda p: str(p.relative_to(REPO)))
def test_the_category_tables_give_the_trees_counts(document: Path, counts: Counter[str]) -> None:
    text = document.read_text(encoding="utf-8")
    assert table_counts(text), f"{document} has no category table"
    assert table_problems(text, counts) == []


def test_an_unchanged_table_reports_nothing(counts: Counter[str]) -> None:
    """Null test: the table written from the counts themselves agrees."""
    rows = "\n".join(f"| `{c}` | {n} | ... |" for c, n in sorted(counts.items()))
    line = f"{sum(counts.values())} scenarios in {len(counts)} categories"
    assert table_problems(f"{line}\n\n{rows}\n", counts) == []


def test_a_table_one_scenario_off_or_missing_a_category_is_caught(counts: Counter[str]) -> None:
    """Planted changes of known size: one row off by one, one category dropped, one total
    off by one — each is reported, naming what differs."""
    rows = {c: n for c, n in counts.items()}
    rows["memory"] += 1
    del rows["captured"]
    text = "\n".join(f"| `{c}` | {n} | ... |" for c, n in sorted(rows.items()))
    text += f"\n{sum(counts.values()) + 1} scenarios in {len(counts)} categories\n"
    problems = table_problems(text, counts)
    assert f"memory: table {counts['memory'] + 1}, tree {counts['memory']}" in problems
    assert f"captured: table None, tree {counts['captured']}" in problems
    assert any(p.startswith(f"'{sum(counts.values()) + 1} scenarios") for p in problems)
    assert len(problems) == 3


def test_a_file_in_the_wrong_category_folder_is_refused(tmp_path: Path) -> None:
    """The count is by category, and a file's folder must say its category."""
    source = SCENARIOS / "memory" / "seeded_home_airport.yaml"
    (tmp_path / "memory").mkdir()
    (tmp_path / "mcp_reliability").mkdir()
    (tmp_path / "memory" / source.name).write_bytes(source.read_bytes())
    assert category_counts(tmp_path) == Counter({"memory": 1})
    (tmp_path / "memory" / source.name).rename(tmp_path / "mcp_reliability" / source.name)
    with pytest.raises(AssertionError):
        category_counts(tmp_path)
