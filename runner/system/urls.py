"""A URL as trialbox prints it: without the user name and password a user may have put in it.

Why: `--judge-url http://user:SECRET@host/v1` is a real way to reach a judge behind basic auth,
and every error about that judge names its URL. The secret must not reach a terminal or a CI
log, so each message formats a judge's or an LLM server's URL through `shown_url`.
"""

from __future__ import annotations

import re

#: What stands in for the user name and password.
HIDDEN = "***"

# The scheme and `//` that open an authority; everything after them up to the last `@` before
# the path's query or fragment is userinfo. The last `@`, not the first: an unencoded `@` or `/`
# in a password must not leave half of it shown (hiding a little too much is the safe side).
_AUTHORITY = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*:)?//")


def shown_url(url: str) -> str:
    """`url` with its userinfo replaced by ***: http://user:SECRET@host:9/v1 → http://***@host:9/v1.
    Any text is accepted (a URL that does not parse is still masked), and one without
    userinfo comes back unchanged."""
    opening = _AUTHORITY.match(url)
    start = opening.end() if opening else 0
    rest = url[start:]
    end = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    at = rest.rfind("@", 0, end)
    if at < 0:
        return url
    return url[:start] + HIDDEN + rest[at:]
