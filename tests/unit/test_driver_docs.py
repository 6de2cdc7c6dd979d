"""design/architecture.md lists every null and planted test of the driver report: a reader
looking for what holds the report's figures finds each file, none left out."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_architecture_names_every_driver_null_test() -> None:
    text = (ROOT / "design" / "architecture.md").read_text(encoding="utf-8")
    files = sorted(p.name for p in (ROOT / "tests" / "unit").glob("test_driver_null*.py"))
    assert "test_driver_null_interleaved.py" in files
    assert [name for name in files if name not in text] == []
