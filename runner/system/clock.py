"""Seconds as a person reads them on a clock, for every line that shows a duration."""

from __future__ import annotations


def clock_text(seconds: float) -> str:
    """`0:42`, `12:05`, `1:02:03`: minutes and seconds, hours only when there are some."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
