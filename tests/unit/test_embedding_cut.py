"""The character cut the front door falls back to: never more word pieces than the window."""

from __future__ import annotations

from trialbox_llm.embedding_inputs import cut_characters


def test_a_text_within_the_bound_is_kept_whole() -> None:
    assert cut_characters("short text", 256) == "short text"


def test_a_long_text_keeps_at_most_limit_minus_two_characters_that_are_not_spaces() -> None:
    text = " ".join(["4,250.00"] * 200)
    short = cut_characters(text, 256)
    assert text.startswith(short) and sum(not c.isspace() for c in short) == 254
    # Each of those characters is at most one word piece, plus the two special tokens.
    assert sum(not c.isspace() for c in short) + 2 <= 256
