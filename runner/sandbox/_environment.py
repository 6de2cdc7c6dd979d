"""The environment a local sandbox's processes get: an allow-list, never the caller's whole one.

Why: the runner's environment holds the judge's secrets (``ANTHROPIC_API_KEY``,
``OPENAI_API_KEY``, a judge URL with a token in it, cloud credentials). GAIA's Agent UI runs
the agent under test, whose tools can read their own process's environment; with
``env={**os.environ}`` a prompt-injected document could make the agent print the judge's key.
A container sandbox starts from the image's environment; this gives a local one the same:
what Python, locale and TLS need, nothing else. The caller adds the sandbox's own variables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: Variables a GAIA process needs from its parent: finding programs and the home folder,
#: the user name, locale and time zone, a temp folder, and the host's CA certificates.
ALLOWED = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "TIKTOKEN_CACHE_DIR", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
})  # fmt: skip
#: Locale variables come as a family (LC_ALL, LC_CTYPE, ...).
ALLOWED_PREFIXES = ("LC_",)


def sandbox_environment(extra: Mapping[str, str], parent: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed part of ``parent`` (default: this process's environment) plus ``extra``."""
    parent = os.environ if parent is None else parent
    kept = {name: value for name, value in parent.items()
            if name in ALLOWED or name.startswith(ALLOWED_PREFIXES)}  # fmt: skip
    return kept | dict(extra)
