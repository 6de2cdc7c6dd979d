"""A large generated document, made only when asked: the embedding benchmark's indexing load.

Why not in the manifest: at 5 million characters it would make every corpus build (and every
CI run) write and hash a file no scenario reads. It is made on demand instead
(`python -m runner.corpus large OUT --chars N`, or `scripts/bench-embeddings --index-chars N`),
from the same fictional site-review vocabulary as the operations archive, deterministically:
the same `chars` gives the same bytes on every machine, and a shorter document is a prefix of a
longer one (sections are numbered and each is a pure function of its number).
"""

from __future__ import annotations

from pathlib import Path

from runner.corpus._generated import _CLOSINGS, _MONTHS, _OBSERVATIONS, _SITES, _TOPICS, _pick
from runner.system.writes import atomic_write

#: What `python -m runner.corpus large` writes unless told otherwise (issue 23's figure).
DEFAULT_LARGE_CHARS = 5_000_000

_TITLE = "# Vellacourt Instruments Site Review Register, all sites, all years"
_INTRO = (
    "This register repeats, site by site and visit by visit, the review notes that the "
    "operations archive summarises. It is generated for load tests and holds no facts that "
    "any scenario asks about."
)


def _section(number: int) -> str:
    """Section `number` of the register: a heading, five observations and a closing line."""
    site = _SITES[_pick("large-site", number, len(_SITES))]
    topic = _TOPICS[_pick("large-topic", number, len(_TOPICS))]
    month = _MONTHS[_pick("large-month", number, 12)]
    year = 2010 + _pick("large-year", number, 17)
    lines = [f"## Visit {number}: {site}, {topic}, {month} {year}", ""]
    for paragraph in range(5):
        template = _OBSERVATIONS[_pick(f"large-obs{paragraph}", number, len(_OBSERVATIONS))]
        n = 8 + _pick(f"large-n{paragraph}", number, 60)
        k = max(1, n - _pick(f"large-k{paragraph}", number, 7))
        version = f"{1 + _pick('large-v', number, 6)}.{_pick('large-w', number, 10)}"
        lines += [template.format(site=site, topic=topic, n=n, k=k, v=version), ""]
    lines += [_CLOSINGS[_pick("large-close", number, len(_CLOSINGS))], ""]
    return "\n".join(lines) + "\n"


def large_register_text(chars: int = DEFAULT_LARGE_CHARS) -> str:
    """Whole sections until the text holds at least `chars` characters."""
    if chars < 1:
        raise ValueError(f"chars must be at least 1, got {chars}")
    parts = [f"{_TITLE}\n\n{_INTRO}\n\n"]
    size = len(parts[0])
    number = 0
    while size < chars:
        number += 1
        parts.append(_section(number))
        size += len(parts[-1])
    return "".join(parts)


def write_large_register(path: Path, chars: int = DEFAULT_LARGE_CHARS) -> Path:
    """Write the register (UTF-8 Markdown) to `path`, creating its folder; whole or not at all,
    and a destination that is not a regular file is refused (WriteRefused), left as it is."""
    atomic_write(path, large_register_text(chars))
    return path
