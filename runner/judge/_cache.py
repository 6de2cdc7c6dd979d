"""The judge-call cache: the same question to the same server and model at the same temperature
is asked once (per `--rejudge` repeat index; the calibration gate never reads it).

Judging is the slow and (with a hosted judge) the paid part of a run. A rerun of an unchanged
scenario asks byte-identical questions; at temperature 0 the answer is the same, so it is read
from disk. The calibration gate is the exception: it is asked live at the start of every run
(`calibrate` judges without the cache), because it checks the model that answers now, under
this run's deadline, not the one that answered when the cache was filled. Only replies that passed validation are stored,
so a cached reply never carries a transient malformed answer into a later run.

The key includes the server's identity (its URL and what it reports about the model it serves),
not just the model name: two OpenAI-compatible servers can serve different weights under the same
name, and a judge that passed calibration on one must never lend its answers to the other.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trialbox" / "judge"


class CacheStats(BaseModel):
    """Counters for the run report: how much judging was served from disk."""

    hits: int = Field(default=0, description="questions answered from disk")
    misses: int = Field(default=0, description="questions asked of the judge")
    directory: str = Field(description="the cache folder")


class _Entry(BaseModel):
    provider: str = Field(description="judge provider (anthropic, openai)")
    model: str = Field(description="the model name the request asked for")
    reply: str = Field(description="the validated reply text")
    server: dict[str, Any] | None = Field(
        default=None, description="the server identity the key was made with (URL, reported model)")
    served_model: str | None = Field(
        default=None, description="the model the server's reply said answered, when it said")


def cache_key(
    provider: str,
    model: str,
    system: str,
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    temperature: float | None,
    server: dict[str, Any] | None = None,
    repeat: int = 0,
) -> str:
    """sha256 over everything that determines the reply (canonical JSON, sorted keys), including
    the server's identity and, for `--rejudge K`, which of the K judgings asks (0-based).

    The repeat index is part of the key because repeat i of a question must be a real call the
    first time it is asked: served from repeat j it would agree with j by construction, and
    judge agreement would read perfect whatever the judge does. Repeat 0 keeps the key it always
    had, so a cache written before repeats were keyed still serves single judgings."""
    material: dict[str, Any] = {
        "provider": provider,
        "model": model,
        "server": server,
        "system": system,
        "messages": messages,
        "schema": schema,
        "temperature": temperature,
    }
    if repeat:
        material["repeat"] = repeat
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

    def put(
        self,
        key: str,
        provider: str,
        model: str,
        reply: str,
        server: dict[str, Any] | None = None,
        served_model: str | None = None,
    ) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        entry = _Entry(provider=provider, model=model, reply=reply, server=server, served_model=served_model)
        temporary.write_text(entry.model_dump_json(), encoding="utf-8")
        temporary.replace(path)  # atomic: concurrent scenarios never read half a file

    def stats(self) -> CacheStats:
        return CacheStats(hits=self.hits, misses=self.misses, directory=str(self.directory))
