"""The judge-call cache: the same question to the same model at the same temperature is asked once.

Judging is the slow and (with a hosted judge) the paid part of a run. A rerun of an unchanged
scenario, or the calibration gate before every run, asks byte-identical questions; at temperature 0
the answer is the same, so it is read from disk. Only replies that passed validation are stored,
so a cached reply never carries a transient malformed answer into a later run.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trialbox" / "judge"


class CacheStats(BaseModel):
    """Counters for the run report: how much judging was served from disk."""

    hits: int = 0
    misses: int = 0
    directory: str


class _Entry(BaseModel):
    provider: str
    model: str
    reply: str


def cache_key(
    provider: str,
    model: str,
    system: str,
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    temperature: float | None,
) -> str:
    """sha256 over everything that determines the reply (canonical JSON, sorted keys)."""
    material = {
        "provider": provider,
        "model": model,
        "system": system,
        "messages": messages,
        "schema": schema,
        "temperature": temperature,
    }
    canonical = json.dumps(material, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class JudgeCache:
    """Validated judge replies on disk, one JSON file per key."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> str | None:
        path = self._path(key)
        try:
            entry = _Entry.model_validate_json(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            # A missing or unreadable entry is a miss; the fresh reply will overwrite it.
            self.misses += 1
            return None
        self.hits += 1
        return entry.reply

    def put(self, key: str, provider: str, model: str, reply: str) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        entry = _Entry(provider=provider, model=model, reply=reply)
        temporary.write_text(entry.model_dump_json(), encoding="utf-8")
        temporary.replace(path)  # atomic: concurrent scenarios never read half a file

    def stats(self) -> CacheStats:
        return CacheStats(hits=self.hits, misses=self.misses, directory=str(self.directory))
