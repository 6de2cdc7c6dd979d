"""The large generated register: made only when asked, the same bytes every time, any size."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from runner.corpus import GENERATED
from runner.corpus.__main__ import app
from runner.corpus._large import DEFAULT_LARGE_CHARS, large_register_text, write_large_register


def test_it_reaches_the_size_asked_and_a_shorter_one_is_a_prefix() -> None:
    short = large_register_text(200_000)
    longer = large_register_text(600_000)
    assert len(short) >= 200_000 and len(longer) >= 600_000
    assert longer.startswith(short)
    assert len(longer) - 600_000 < 2_000  # whole sections, never much more than asked
    assert large_register_text(200_000) == short  # deterministic


def test_default_is_five_million_characters_of_varied_prose() -> None:
    text = large_register_text(DEFAULT_LARGE_CHARS)
    assert len(text) >= 5_000_000
    paragraphs = [p for p in text.split("\n\n") if p and not p.startswith("#")]
    # Varied enough that a retriever sees distinct chunks, not one paragraph repeated.
    assert len(set(paragraphs)) > 10_000


def test_it_is_not_part_of_every_corpus_build() -> None:
    assert all("register" not in doc.filename for doc in GENERATED.values())


def test_cli_writes_it_on_demand(tmp_path: Path) -> None:
    out = tmp_path / "big" / "register.md"
    result = CliRunner().invoke(app, ["large", str(out), "--chars", "50000"])
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8") == large_register_text(50_000)
    assert write_large_register(tmp_path / "again.md", 50_000).read_bytes() == out.read_bytes()
