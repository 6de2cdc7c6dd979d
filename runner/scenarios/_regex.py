"""User-written regular expressions (a check's `matches:`), run on RE2.

Python's `re` backtracks: `^(a|aa)+$` against a 41-character answer took 19 s, holding the
event loop, so no scenario timeout could fire. RE2 matches in time linear in the text, whatever
the pattern. It refuses what needs backtracking (backreferences, lookaround); such a pattern is
refused when the scenario is validated, with the reason, so nothing is found out mid-run.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

_OPTIONS = re2.Options()
# Otherwise RE2 also logs every refused pattern to stderr through absl, outside our one line.
_OPTIONS.log_errors = False


class RegexError(ValueError):
    """The pattern is not one RE2 can run; the message says why."""


@lru_cache(maxsize=512)  # a scenario's patterns are matched against every call and turn
def compile_user_regex(pattern: str) -> Any:
    """The compiled pattern (RE2), or RegexError naming what RE2 cannot run."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as err:
        reason = err.args[0] if err.args else err
        text = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise RegexError(
            f"invalid regular expression {pattern!r} ({text}); check regexes run on RE2, "
            "in linear time: no backreferences or lookaround") from None


def user_regex_search(pattern: str, text: str) -> bool:
    """`pattern` is found somewhere in `text` (RE2: linear in len(text), never backtracking)."""
    return compile_user_regex(pattern).search(text) is not None
