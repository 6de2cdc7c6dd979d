"""The three fixers, as what the fix sandbox runs: an argv, an environment and the one endpoint
the egress proxy lets through. Nothing of the host's environment is passed on except the one
key a fixer needs (named below): no other secret reaches the sandbox.

- ``command``: any command (``sh -c``) in ``/workspace``. When its first word is a file on the
  host (``--fixer-cmd ./my_fixer.py``), that file is copied read-only to ``/context/tools/`` and
  run from there — the way to plug in your own tool. No network unless ``--fixer-url`` is given.
- ``claude-code``: the Claude Code CLI in the fixer image, run as GAIA's fixer runs it
  (``claude -p <prompt> --dangerously-skip-permissions``) with our prompt from
  ``/context/fixer-prompt.md``, a dollar budget per iteration and JSON-lines output (the
  transcript). Reaches ``api.anthropic.com:443`` or ``--fixer-url`` (``ANTHROPIC_BASE_URL``).
- ``openai``: trialbox's tool loop (``_tool_loop.py``) against ``--fixer-url`` / ``--fixer-model``.
"""

from __future__ import annotations

import io
import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import TypedDict

from runner.fix._models import FixerKind
from runner.fix._sandbox import egress_target
from runner.records.status import Status
from runner.report import ScenarioResult
from runner.system.paths import eval_root

PROMPT_PATH = "/context/fixer-prompt.md"
TOOLS_DIR = "tools"  # under /context
ANTHROPIC_API = "api.anthropic.com"
SEVERITY_RANK = {"critical": 0, "high": 1, "medium": 2, "low": 3, "standard": 4}
ARCHITECTURE_WORDS = ("architecture", "tool", "register", "history", "truncat", "context window")


class FixerConfigError(ValueError):
    """A fixer option is missing or wrong; the message names the option and the fix."""


@dataclass
class FixerSpec:
    """What the sandbox runs for one fixer."""

    kind: FixerKind  # the fixer the options named, once checked
    argv: list[str]
    env: dict[str, str]
    allow: tuple[str, int] | None  # the one host:port the egress proxy forwards to
    tools: dict[str, Path] = field(default_factory=dict)  # host files put under /context/tools/


@dataclass
class FixerOptions:
    kind: str
    command: str | None = None
    model: str | None = None
    url: str | None = None
    budget_usd: float = 2.0  # claude-code: --max-budget-usd per iteration (GAIA's cap per scenario)
    max_steps: int = 30  # openai: model calls per iteration
    max_tokens: int = 200_000  # openai: tokens per iteration


def fixer_spec(options: FixerOptions, host_env: Mapping[str, str] | None = None) -> FixerSpec:
    """The argv/env/endpoint for `options`; raises FixerConfigError for a missing option."""
    env = os.environ if host_env is None else host_env
    allow, url = None, None
    if options.url:
        host, port, url = egress_target(options.url)
        allow = (host, port)
    if options.kind == "command":
        if not options.command or not options.command.strip():
            raise FixerConfigError("--fixer command needs --fixer-cmd CMD (run with sh -c in /workspace)")
        command, tools = _plug_in(options.command)
        extra = {"TRIALBOX_FIXER_URL": url} if url else {}
        return FixerSpec("command", ["sh", "-c", command], extra, allow, tools)
    if options.kind == "claude-code":
        key_name = next((k for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN") if env.get(k)), None)
        if key_name is None and not options.url:
            raise FixerConfigError("--fixer claude-code needs ANTHROPIC_API_KEY in the environment "
                                   "(or --fixer-url for a compatible endpoint)")
        flags = ["--dangerously-skip-permissions", "--output-format", "stream-json", "--verbose",
                 "--max-budget-usd", f"{options.budget_usd:g}"]
        if options.model:
            flags += ["--model", options.model]
        child = {"DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                 "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1"}
        if key_name:
            child[key_name] = env[key_name]
        if url:
            child["ANTHROPIC_BASE_URL"] = url
        else:
            allow = (ANTHROPIC_API, 443)
        argv = ["sh", "-c", f'exec claude -p "$(cat {PROMPT_PATH})" "$@"', "claude", *flags]
        return FixerSpec("claude-code", argv, child, allow)
    if options.kind == "openai":
        if not url or not options.model:
            raise FixerConfigError("--fixer openai needs --fixer-url (OpenAI-compatible base URL, "
                                   "e.g. http://127.0.0.1:8000/api/v1) and --fixer-model")
        child = {"TRIALBOX_FIXER_URL": url, "TRIALBOX_FIXER_MODEL": options.model,
                 "TRIALBOX_FIXER_MAX_STEPS": str(options.max_steps),
                 "TRIALBOX_FIXER_MAX_TOKENS": str(options.max_tokens),
                 "TRIALBOX_FIXER_PROMPT": PROMPT_PATH}
        key = env.get("TRIALBOX_FIXER_API_KEY") or env.get("OPENAI_API_KEY")
        if key:
            child["TRIALBOX_FIXER_API_KEY"] = key
        return FixerSpec("openai", ["python3", "/opt/trialbox/tool_loop.py"], child, allow)
    raise FixerConfigError(f"--fixer {options.kind!r}: choose command, claude-code or openai")


def _plug_in(command: str) -> tuple[str, dict[str, Path]]:
    """A command whose first word is a host file runs that file's copy under /context/tools;
    the rest of the command is kept as written (pipes, redirections, ``&&``)."""
    stream = io.StringIO(command.strip())  # ours, so the rest can be read after the first word
    lexer = shlex.shlex(stream, posix=True)
    lexer.whitespace_split = True
    try:
        first_word = lexer.get_token() or ""
    except ValueError as exc:
        raise FixerConfigError(f"--fixer-cmd {command!r}: {exc}") from None
    rest = stream.read()
    first = Path(first_word).expanduser()
    if not first_word or not first.is_file():
        return command, {}
    inside = shlex.quote(f"/context/{TOOLS_DIR}/{first.name}")
    runner = "python3 " if first.suffix == ".py" else "sh " if first.suffix == ".sh" else ""
    return f"{runner}{inside}{' ' + rest.strip() if rest.strip() else ''}", {first.name: first.resolve()}


# -- the prompt ---------------------------------------------------------------------------------


def _architecture(result: ScenarioResult) -> bool:
    if result.status is Status.BLOCKED_BY_ARCHITECTURE:
        return True
    text = " ".join(filter(None, [result.root_cause, *(c.type for c in result.failed_checks())])).lower()
    return any(word in text for word in ARCHITECTURE_WORDS)


def _cause(result: ScenarioResult) -> str:
    if result.root_cause:
        return result.root_cause.strip().lower()
    return ",".join(sorted({f"{c.type}:{c.diagnostic}" for c in result.failed_checks()}))


def priority_order(failing: list[ScenarioResult]) -> list[ScenarioResult]:
    """GAIA's fixer order: critical first, architecture before prompt, shared causes first."""
    shared: dict[str, int] = {}
    for result in failing:
        shared[_cause(result)] = shared.get(_cause(result), 0) + 1
    return sorted(failing, key=lambda r: (SEVERITY_RANK.get(r.severity, 4), not _architecture(r),
                                          -shared[_cause(r)], r.id))


class FailedCheck(TypedDict):
    """One failed check of a failing scenario, as ``/context/failing.json`` lists it."""

    type: str
    diagnostic: str


class FailingEntry(TypedDict):
    """One failing scenario in ``/context/failing.json`` (what the fixer reads first)."""

    id: str
    severity: str
    category: str
    status: str
    agent_id: str | None
    root_cause: str | None
    recommended_fix: str | None
    failed_checks: list[FailedCheck]
    trace: str  # the scenario's trace as the fix sandbox sees it


def failing_entries(failing: list[ScenarioResult]) -> list[FailingEntry]:
    """The failing scenarios as data (``/context/failing.json``), in priority order."""
    return [{
        "id": r.id, "severity": r.severity, "category": r.category, "status": r.status.value,
        "agent_id": r.agent_id, "root_cause": r.root_cause, "recommended_fix": r.recommended_fix,
        "failed_checks": [{"type": c.type, "diagnostic": c.diagnostic} for c in r.failed_checks()],
        "trace": f"/context/traces/{r.id}.json",
    } for r in priority_order(failing)]


def render_prompt(failing: list[ScenarioResult], scope: str, template: Path | None = None) -> str:
    """eval/prompts/fixer.md with the failing scenarios filled in."""
    text = (template or eval_root() / "prompts" / "fixer.md").read_text(encoding="utf-8")
    blocks = []
    for n, entry in enumerate(failing_entries(failing), 1):
        lines = [f"{n}. `{entry['id']}` — severity {entry['severity']}, {entry['status']}"
                 + (f", agent `{entry['agent_id']}`" if entry["agent_id"] else "")]
        lines.append(f"   - root_cause: {entry['root_cause'] or '(not judged)'}")
        lines.append(f"   - recommended_fix: {entry['recommended_fix'] or '(not judged)'}")
        for check in entry["failed_checks"]:
            lines.append(f"   - failed check {check['type']}: {check['diagnostic']}")
        lines.append(f"   - trace: {entry['trace']}")
        blocks.append("\n".join(lines))
    where = ("the agent directory" if scope == "agent" else
             "the agent directory, and GAIA's package source under `/workspace/gaia_src/gaia/`")
    return Template(text).safe_substitute(failing="\n".join(blocks) or "(none)", scope=where)


def failing_json(failing: list[ScenarioResult]) -> bytes:
    return json.dumps(failing_entries(failing), indent=2).encode()
