"""The ``openai`` fixer: trialbox's own tool loop against any OpenAI-compatible chat model.

Runs inside the fix sandbox (``python3 /opt/trialbox/tool_loop.py``), so it uses the standard
library only; urllib honours ``HTTP(S)_PROXY``, which the sandbox points at the egress proxy.
The model gets five tools: ``list_files``, ``read_file``, ``search`` (over ``/workspace`` and the
read-only ``/context``), ``write_file`` (``/workspace`` only) and ``finish``. Every path is
resolved and must stay inside its root — a model asking for ``../etc/passwd`` or a symlink out
gets an error message back, never the file. The loop stops at ``finish``, at the step budget,
at the token budget, or when the model answers without a tool call.

Every step is printed as one JSON line (the transcript). At the end the notes the model gave
in ``finish`` are written to ``$TRIALBOX_FIX_NOTES`` for the fix log.

Environment: ``TRIALBOX_FIXER_URL`` (base URL ending in /v1), ``TRIALBOX_FIXER_MODEL``,
``TRIALBOX_FIXER_API_KEY`` (optional), ``TRIALBOX_FIXER_MAX_STEPS`` (default 30),
``TRIALBOX_FIXER_MAX_TOKENS`` (total prompt+completion tokens, default 200000),
``TRIALBOX_FIXER_PROMPT`` (default /context/fixer-prompt.md), ``TRIALBOX_FIX_NOTES``.
Exit codes: 0 finished, 3 budget exhausted or the model stopped without ``finish``, 4 the model
endpoint failed.
"""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

WORKSPACE = Path(os.environ.get("TRIALBOX_WORKSPACE", "/workspace"))
CONTEXT = Path(os.environ.get("TRIALBOX_CONTEXT", "/context"))
MAX_READ = 40_000  # characters of one file per read_file call
MAX_WRITE = 400_000  # characters one write_file may put down
MAX_LISTED = 400
MAX_MATCHES = 60

SYSTEM = (
    "You repair an AI agent's source code so that failing evaluation scenarios pass. "
    "The agent's source is under /workspace (you may change it); the evaluation results are "
    "under /context (read-only). Use the tools; call finish when you are done."
)

TOOLS = [
    {"type": "function", "function": {
        "name": "list_files", "description": "List files under a folder of /workspace or /context.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": []}}},
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a text file under /workspace or /context.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Find lines matching a regular expression under a folder.",
        "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}},
                       "required": ["pattern"]}}},
    {"type": "function", "function": {
        "name": "write_file", "description": "Replace (or create) a text file under /workspace.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                       "required": ["path", "content"]}}},
    {"type": "function", "function": {
        "name": "finish", "description": "Stop and describe each change made.",
        "parameters": {"type": "object", "properties": {
            "summary": {"type": "string"},
            "fixes": {"type": "array", "items": {"type": "object", "properties": {
                "file": {"type": "string"}, "change_summary": {"type": "string"},
                "rationale": {"type": "string"},
                "targets_scenario": {"type": "array", "items": {"type": "string"}}}}}},
            "required": ["summary"]}}},
]


class ToolError(Exception):
    """A tool call the model got wrong: the message goes back to the model."""


def resolve(path: str, *, writable: bool = False) -> Path:
    """A model-given path as a real path inside /workspace (or /context when reading)."""
    raw = Path(path or ".")
    # The model knows the roots by their names in the sandbox; map those onto the real roots.
    for name, root in (("/workspace", WORKSPACE), ("/context", CONTEXT)):
        if raw == Path(name) or Path(name) in raw.parents:
            raw = root / raw.relative_to(name)
    candidate = raw if raw.is_absolute() else WORKSPACE / raw
    real = Path(os.path.realpath(candidate))
    roots = [WORKSPACE] if writable else [WORKSPACE, CONTEXT]
    for root in roots:
        root_real = Path(os.path.realpath(root))
        if real == root_real or root_real in real.parents:
            return real
    where = "/workspace" if writable else "/workspace or /context"
    raise ToolError(f"{path}: outside {where}; give a path inside it")


def list_files(path: str = ".") -> str:
    folder = resolve(path)
    if not folder.is_dir():
        raise ToolError(f"{path}: not a folder")
    found = sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts)
    more = f"\n... {len(found) - MAX_LISTED} more" if len(found) > MAX_LISTED else ""
    return "\n".join(found[:MAX_LISTED]) + more or "(empty)"


def read_file(path: str) -> str:
    file = resolve(path)
    if not file.is_file():
        raise ToolError(f"{path}: no such file")
    text = file.read_text(encoding="utf-8", errors="replace")
    return text[:MAX_READ] + (f"\n... cut at {MAX_READ} characters" if len(text) > MAX_READ else "")


def search(pattern: str, path: str = ".") -> str:
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"pattern {pattern!r}: {exc}") from None
    root = resolve(path)
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    hits = []
    for file in files:
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except (UnicodeDecodeError, OSError):
            continue
        hits += [f"{file}:{n}: {line[:200]}" for n, line in enumerate(lines, 1) if regex.search(line)]
        if len(hits) >= MAX_MATCHES:
            break
    return "\n".join(hits[:MAX_MATCHES]) or "no match"


def write_file(path: str, content: str) -> str:
    if len(content) > MAX_WRITE:
        raise ToolError(f"content of {len(content)} characters; at most {MAX_WRITE}")
    file = resolve(path, writable=True)
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(content, encoding="utf-8")
    return f"wrote {len(content)} characters to {file}"


HANDLERS: dict[str, Callable[..., str]] = {"list_files": list_files, "read_file": read_file, "search": search, "write_file": write_file}


def emit(event: dict[str, Any]) -> None:
    print(json.dumps(event), flush=True)


def chat(url: str, model: str, key: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    body = json.dumps({"model": model, "messages": messages, "tools": TOOLS, "tool_choice": "auto",
                       "temperature": 0}).encode()
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(f"{url.rstrip('/')}/chat/completions", body, headers)
    with urllib.request.urlopen(request, timeout=300) as reply:  # noqa: S310 — the configured model only
        answer = json.loads(reply.read())
    if not isinstance(answer, dict):
        raise ValueError(f"the model endpoint answered with a JSON {type(answer).__name__}, not an object")
    return answer


def run(url: str, model: str, key: str, prompt: str, max_steps: int,
        max_tokens: int) -> tuple[int, dict[str, Any]]:
    """The loop; returns (exit code, finish arguments or {})."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM},
                                      {"role": "user", "content": prompt}]
    used = 0
    for step in range(1, max_steps + 1):
        try:
            reply = chat(url, model, key, messages)
            message = reply["choices"][0]["message"]
        except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError) as exc:
            emit({"event": "error", "step": step, "error": f"{type(exc).__name__}: {exc}"})
            return 4, {}
        usage = reply.get("usage") or {}
        used += int(usage.get("total_tokens") or 0)
        calls = message.get("tool_calls") or []
        emit({"event": "model", "step": step, "content": message.get("content"),
              "tool_calls": [c.get("function", {}) for c in calls], "tokens": used})
        messages.append({"role": "assistant", "content": message.get("content") or "", "tool_calls": calls}
                        if calls else {"role": "assistant", "content": message.get("content") or ""})
        if not calls:
            emit({"event": "stopped", "reason": "the model answered without calling a tool"})
            return 3, {}
        for call in calls:
            function = call.get("function", {})
            name = function.get("name", "")
            try:
                args = json.loads(function.get("arguments") or "{}")
                if not isinstance(args, dict):
                    raise ToolError("arguments must be a JSON object")
                if name == "finish":
                    emit({"event": "finish", "arguments": args})
                    return 0, args
                if name not in HANDLERS:
                    raise ToolError(f"unknown tool {name!r}; use one of {', '.join([*HANDLERS, 'finish'])}")
                result = HANDLERS[name](**args)
            except (ToolError, TypeError, ValueError, OSError) as exc:
                result = f"error: {exc}"
            emit({"event": "tool", "step": step, "name": name, "result": result[:2000]})
            messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": result})
        if used > max_tokens:
            emit({"event": "stopped", "reason": f"token budget spent ({used} > {max_tokens})"})
            return 3, {}
    emit({"event": "stopped", "reason": f"step budget spent ({max_steps} steps)"})
    return 3, {}


def main() -> int:
    env = os.environ
    prompt = Path(env.get("TRIALBOX_FIXER_PROMPT", str(CONTEXT / "fixer-prompt.md"))).read_text(encoding="utf-8")
    code, finish = run(env["TRIALBOX_FIXER_URL"], env.get("TRIALBOX_FIXER_MODEL", ""),
                       env.get("TRIALBOX_FIXER_API_KEY", ""), prompt,
                       int(env.get("TRIALBOX_FIXER_MAX_STEPS", "30")),
                       int(env.get("TRIALBOX_FIXER_MAX_TOKENS", "200000")))
    notes = env.get("TRIALBOX_FIX_NOTES")
    if notes and finish.get("fixes"):
        Path(notes).parent.mkdir(parents=True, exist_ok=True)
        Path(notes).write_text(json.dumps(finish["fixes"]), encoding="utf-8")
    return code


if __name__ == "__main__":
    sys.exit(main())
