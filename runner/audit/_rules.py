"""Per-scenario verdicts: which limit blocks a scenario (BLOCKED_BY_ARCHITECTURE) and why.

Token counts are estimates (4 characters a token), stated as such in every reason.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from runner.audit._limits import GAIA_MIN_MSG_CHARS, ArchitectureLimits
from runner.records.status import Status
from runner.scenarios import Scenario, ToolCalled, Turn

CHARS_PER_TOKEN = 4
WHOLE_DOCUMENT_TOOLS = frozenset({"dump_document", "summarize_document", "read_document",
                                  "read_file"})
"""Tools whose result is a whole document's text (GAIA's DOCUMENT_TOOLS minus the
retrieval ones, which return a few chunks)."""
RECALL_CATEGORIES = frozenset({"context_retention", "memory"})
"""Categories whose later turns depend on what earlier turns found."""


class Finding(BaseModel):
    """One reason a scenario will be blocked (or is at risk)."""

    rule: str = Field(description="Which limit: history_pairs, message_chars, "
                                  "tool_results_in_history, history_budget, document_context.")
    blocked: bool = Field(description="True: BLOCKED_BY_ARCHITECTURE; False: a risk only.")
    reason: str = Field(description="Why, with the limit and the scenario's own numbers.")
    turn: int | None = Field(default=None, description="The turn affected, when one is.")


class ScenarioAudit(BaseModel):
    """The verdict for one scenario."""

    id: str = Field(description="Scenario id.")
    file: str | None = Field(default=None, description="The file it came from.")
    status: str = Field(description="BLOCKED_BY_ARCHITECTURE, or OK when nothing blocks it.")
    findings: list[Finding] = Field(default_factory=list, description=(
        "Every limit that applies, blocking or a risk only."))


def audit_scenario(scenario: Scenario, limits: ArchitectureLimits,
                   corpus_root: Path | None = None) -> ScenarioAudit:
    """Every rule that applies to one scenario; BLOCKED when any blocking finding exists."""
    findings = (_pair_rules(scenario, limits) + _char_rules(scenario, limits)
                + _tool_result_rules(scenario, limits) + _budget_rules(scenario, limits)
                + _document_rules(scenario, limits, corpus_root))
    blocked = any(finding.blocked for finding in findings)
    source = scenario.source_file
    return ScenarioAudit(id=scenario.id, file=str(source) if source else None, findings=findings,
                         status=Status.BLOCKED_BY_ARCHITECTURE.value if blocked else "OK")


def _pair_rules(scenario: Scenario, limits: ArchitectureLimits) -> list[Finding]:
    pairs, turns = limits.history_pairs, len(scenario.turns)
    if pairs is None or turns - 1 <= pairs:
        return []
    first_lost = turns - pairs - 1
    return [Finding(rule="history_pairs", blocked=True, turn=turns, reason=(
        f"{turns} turns, but the agent keeps only the last {pairs} user/assistant pairs: by turn "
        f"{turns} turns 1–{first_lost} are out of its view"))]


def _char_rules(scenario: Scenario, limits: ArchitectureLimits) -> list[Finding]:
    cap = limits.max_msg_chars
    if cap is None or len(scenario.turns) < 2:
        return []
    findings = [Finding(rule="message_chars", blocked=True, turn=turn.turn, reason=(
        f"turn {turn.turn}'s message is {len(turn.user_message)} characters; history keeps "
        f"{cap}, so later turns see it cut")) for turn in scenario.turns[:-1]
        if turn.user_message and len(turn.user_message) > cap]
    if cap < GAIA_MIN_MSG_CHARS:
        findings.append(Finding(rule="message_chars", blocked=True, reason=(
            f"history messages are cut to {cap} characters (< {GAIA_MIN_MSG_CHARS}, GAIA's "
            "threshold): facts and file paths from earlier replies are lost across turns")))
    return findings


def _tool_result_rules(scenario: Scenario, limits: ArchitectureLimits) -> list[Finding]:
    if limits.tool_results_in_history or len(scenario.turns) < 2:
        return []
    recall = scenario.category in RECALL_CATEGORIES
    return [Finding(rule="tool_results_in_history", blocked=recall, reason=(
        "earlier turns' tool results are not replayed to the model"
        + (f", and a {scenario.category} scenario asks later turns about them" if recall else
           "; a later turn that needs them must call the tool again")))]


def _budget_rules(scenario: Scenario, limits: ArchitectureLimits) -> list[Finding]:
    budget = limits.history_budget
    if budget is None:
        return []
    findings = []
    for turn in scenario.turns[:-1]:
        tokens = estimate_tokens(turn.user_message or "")
        if tokens > budget:
            findings.append(Finding(rule="history_budget", blocked=True, turn=turn.turn, reason=(
                f"turn {turn.turn}'s message is ~{tokens} tokens (estimated), more than the "
                f"whole history budget of {budget}: GAIA never replays a turn that large, so "
                "later turns cannot see it")))
    known = sum(estimate_tokens((t.user_message or "") + _expected_text(t))
                for t in scenario.turns[:-1])
    if known > budget:
        findings.append(Finding(rule="history_budget", blocked=True, turn=len(scenario.turns),
                                reason=(
            f"the earlier turns' own text is ~{known} tokens (estimated, replies not counted), "
            f"over the history budget of {budget}: the oldest turns are evicted before the last")))
    return findings


def _document_rules(scenario: Scenario, limits: ArchitectureLimits,
                    corpus_root: Path | None) -> list[Finding]:
    budget = limits.history_budget
    if budget is None or corpus_root is None or len(scenario.turns) < 2:
        return []
    tokens = sum(_file_chars(corpus_root / doc.relative_path) for doc in scenario.setup_documents)
    tokens //= CHARS_PER_TOKEN
    findings = []
    for turn in scenario.turns[:-1]:
        whole = sorted(WHOLE_DOCUMENT_TOOLS & _tools_of(turn))
        if whole and tokens > budget:
            findings.append(Finding(rule="document_context", blocked=True, turn=turn.turn, reason=(
                f"turn {turn.turn} reads whole documents ({', '.join(whole)}) of ~{tokens} tokens "
                f"(estimated), more than the history budget of {budget}: what it read cannot "
                "stay in view for the turns after it")))
    if not findings and limits.context_window and tokens > limits.context_window:
        findings.append(Finding(rule="document_context", blocked=False, reason=(
            f"the documents are ~{tokens} tokens (estimated), more than the model's "
            f"{limits.context_window}-token window: only retrieved chunks can be seen")))
    return findings


def estimate_tokens(text: str) -> int:
    return len(text) // CHARS_PER_TOKEN


def _expected_text(turn: Turn) -> str:
    truth = turn.ground_truth
    if truth is None or truth.expected_answer is None:
        return ""
    answer = truth.expected_answer
    return " ".join(answer) if isinstance(answer, list) else str(answer)


def _tools_of(turn: Turn) -> set[str]:
    """The tools a turn must call: GAIA's expected_tools and our tool_called checks."""
    names = set(turn.expected_tools or [])
    names.update(check.tool for check in turn.checks if isinstance(check, ToolCalled))
    return names


def _file_chars(path: Path) -> int:
    try:
        return path.stat().st_size if path.is_file() else 0
    except OSError:
        return 0
