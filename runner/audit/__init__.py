"""`trialbox audit`: which scenarios GAIA's architecture will block, predicted without an LLM.

GAIA's `gaia eval agent --audit-only` reads the Agent UI's history and truncation constants
from `gaia/ui/_chat_helpers.py` with `ast` and reports what they make impossible (history pairs
below 5, messages cut under 1000 characters, tool results missing from history). We read the
same files the same way — never importing GAIA, so no GAIA code runs — and judge each scenario
against the limits actually found, because GAIA's own audit names one fixed scenario and, on an
installed package, finds no source at all.

Two history policies exist across GAIA versions, and the audit uses whichever the source has:
- pair/char constants (`_MAX_HISTORY_PAIRS` or `_RELAY_CONTEXT_PAIRS`, `_MAX_MSG_CHARS` or
  `_MAX_CHARS`): the last N pairs are kept, each message cut to M characters;
- a token budget (0.25.1, `gaia/agents/base/history.py`): whole earlier turns replayed newest
  first within `min(ctx // 2, ctx - overhead - reply_reserve - margin)` tokens; a turn larger
  than the whole budget is never replayed.
Token counts here are estimates (4 characters a token), stated as such in every reason.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer
from pydantic import BaseModel, Field

from runner.audit._image import gaia_package_from_image
from runner.audit._limits import (
    CHAR_CONSTANTS,
    GAIA_MIN_MSG_CHARS,
    GAIA_MIN_PAIRS,
    PAIR_CONSTANTS,
    ArchitectureLimits,
    AuditError,
    Recommendation,
    budget_shape,
    find_gaia_package,
    module_ints,
    read_limits,
    recommendations,
)
from runner.audit._rules import (
    RECALL_CATEGORIES,
    WHOLE_DOCUMENT_TOOLS,
    Finding,
    ScenarioAudit,
    audit_scenario,
    estimate_tokens,
)
from runner.records.status import Status
from runner.run.errors import EXIT_USAGE
from runner.scenarios import load_suite
from runner.system.paths import eval_root

__all__ = [
    "CHAR_CONSTANTS",
    "GAIA_MIN_MSG_CHARS",
    "GAIA_MIN_PAIRS",
    "PAIR_CONSTANTS",
    "RECALL_CATEGORIES",
    "WHOLE_DOCUMENT_TOOLS",
    "ArchitectureLimits",
    "AuditError",
    "AuditReport",
    "Finding",
    "Recommendation",
    "ScenarioAudit",
    "audit",
    "audit_command",
    "audit_scenario",
    "budget_shape",
    "estimate_tokens",
    "find_gaia_package",
    "gaia_package_from_image",
    "module_ints",
    "read_limits",
    "recommendations",
]


class AuditReport(BaseModel):
    """Everything `trialbox audit --json` prints."""

    limits: ArchitectureLimits = Field(description="What the GAIA source allows.")
    scenarios: list[ScenarioAudit] = Field(description="One verdict per loaded scenario, in "
                                                       "the suite's order.")
    recommendations: list[Recommendation] = Field(default_factory=list, description=(
        "Changes to GAIA's source that would lift the limits found."))
    not_loaded: list[str] = Field(default_factory=list, description=(
        "Files with errors (scenario files that did not load, the manifest): not audited; "
        "`trialbox validate` names each error. The command exits 2 when any."))

    @property
    def blocked(self) -> list[ScenarioAudit]:
        return [s for s in self.scenarios if s.status == Status.BLOCKED_BY_ARCHITECTURE.value]


def audit(paths: list[Path], corpus_root: Path, gaia_source: Path | None = None,
          device: str = "gpu", gaia_image: str | None = None) -> AuditReport:
    """Load the scenarios (the rejected ones are not audited) and judge each one, against
    `gaia_image`'s GAIA package when given, else `gaia_source` (default: .venv-gaia's).
    AuditError when the paths hold no scenario file."""
    suite = load_suite(paths, corpus_root)  # first: an empty tree needs no GAIA to refuse
    empty = suite.nothing_found(paths)
    if empty is not None and not suite.errors:
        raise AuditError(empty)
    if gaia_image is not None:
        with tempfile.TemporaryDirectory(prefix="trialbox-audit-") as folder:
            package, inside = gaia_package_from_image(gaia_image, Path(folder))
            limits = read_limits(package, device)
        limits.source = f"{gaia_image}:{inside}"
    else:
        limits = read_limits(find_gaia_package(gaia_source), device)
    return AuditReport(limits=limits, scenarios=[audit_scenario(s, limits, corpus_root)
                                                 for s in suite.scenarios],
                       recommendations=recommendations(limits),
                       not_loaded=sorted({str(problem.file) for problem in suite.errors}))


# --- command -----------------------------------------------------------------------------

def audit_command(
    paths: Annotated[list[Path] | None, typer.Argument(
        help="scenario files or folders [default: eval/scenarios]")] = None,
    gaia_source: Annotated[Path | None, typer.Option(
        "--gaia-source", help="the GAIA package to read (site-packages/gaia or a GAIA "
                              "checkout) [default: .venv-gaia's]")] = None,
    gaia_image: Annotated[str | None, typer.Option(
        "--gaia-image", help="read the GAIA package inside this Agent UI image instead, e.g. "
                             "trialbox/agent-ui:dev (the container is created, never started)")] = None,
    corpus: Annotated[Path | None, typer.Option(
        "--corpus", help="corpus root, to size the documents [default: beside the tree]")] = None,
    device: Annotated[str, typer.Option(help="gpu | cpu | npu: which context window GAIA "
                                             "assumes")] = "gpu",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """List the scenarios GAIA's architecture will block (BLOCKED_BY_ARCHITECTURE), and why,
    from the GAIA source alone: no LLM, no sandbox."""
    from runner.scenarios import CorpusNotFound, find_corpus

    chosen = paths or [eval_root() / "scenarios"]
    try:
        if gaia_image is not None and gaia_source is not None:
            raise AuditError("give --gaia-source or --gaia-image, not both")
        if device not in ("gpu", "cpu", "npu"):
            raise AuditError(f"--device {device!r}: choose gpu, cpu or npu")
        corpus_root = corpus if corpus is not None else find_corpus(chosen)
        missing = [str(p) for p in chosen if not p.exists()]
        if missing:
            raise AuditError(f"{', '.join(missing)}: no such file or folder; give scenario "
                             "files or folders")
        report = audit(chosen, corpus_root, gaia_source, device, gaia_image)
    except (AuditError, CorpusNotFound) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        _print_report(report)
    if report.not_loaded:  # "0 of 0 scenario(s)" over a broken tree is no clean bill
        shown = ", ".join(report.not_loaded[:5]) + (" …" if len(report.not_loaded) > 5 else "")
        typer.echo(f"error: {len(report.not_loaded)} file(s) have errors and were not audited: "
                   f"{shown}; `trialbox validate` names each error", err=True)
        raise typer.Exit(EXIT_USAGE)


def _print_report(report: AuditReport) -> None:
    limits = report.limits
    typer.echo(f"GAIA {limits.gaia_version or '(version unknown)'} at {limits.source}")
    pairs = limits.history_pairs if limits.history_pairs is not None else "no pair limit"
    chars = limits.max_msg_chars if limits.max_msg_chars is not None else "no character cap"
    budget = (f"{limits.history_budget} tokens of a {limits.context_window}-token window"
              if limits.history_budget is not None else "none found")
    typer.echo(f"  history pairs: {pairs}; message cap: {chars}; history budget: {budget}; "
               f"tool results in history: {'yes' if limits.tool_results_in_history else 'no'}")
    for item in report.scenarios:
        if item.findings:
            typer.echo(f"{item.status:24} {item.id}")
            for finding in item.findings:
                mark = "" if finding.blocked else "(risk) "
                typer.echo(f"    {mark}{finding.rule}: {finding.reason}")
    for advice in report.recommendations:
        typer.echo(f"recommended ({advice.impact}): {advice.file}: {advice.description}")
    typer.echo(f"{len(report.blocked)} of {len(report.scenarios)} scenario(s) "
               "BLOCKED_BY_ARCHITECTURE")
