"""How trialbox names what it creates for a sandbox in Docker: safe characters, unique names."""

from __future__ import annotations

import hashlib
import re


def safe_name(text: str) -> str:
    """``text`` as Docker names (and firewall labels, and file names) allow it: every character
    but [a-zA-Z0-9_.-] becomes "-", and at most 60 of them (scenario ids are snake_case, but
    a run id or an agent's name may be anything)."""
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", text)[:60]


def sandbox_name(run_id: str, job_key: str) -> str:
    """Container and network names: a short hash of run + job makes them unique whatever the
    id's length (a cut prefix made two long ids collide), and a readable part helps `docker ps`."""
    digest = hashlib.sha256(f"{run_id}\0{job_key}".encode()).hexdigest()[:12]
    return f"tbx-{digest}-{safe_name(job_key)[:30]}"
