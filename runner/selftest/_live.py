"""The live layer's agents: the oracle and the adversary, and what their runs prove.

Both are one real GAIA agent (eval/agents/oracle/agent.py) mounted with `--agent-dir`; what
each says comes from a plan.json written beside it, for the self-test run only — the ground
truth is never in a normal run's sandbox. The oracle makes the calls the turn's tool checks ask
for (and, where the turn has documents and no limit on calls, a `query_documents` with the
user's message: the real RAG path) and answers with the genuine answer; the adversary makes the
calls only where the turn checks its answer, and answers with the first wrong answer that
applies (20 % off, another fact, a hedged list, "I don't know", empty).
"""

from __future__ import annotations

import shutil
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from runner.records.outcomes import CheckResult
from runner.records.transcript import ToolCall
from runner.report import ScenarioResult
from runner.scenarios import Manifest, MaxToolCalls, Scenario, ToolsExact
from runner.selftest._decide import decides
from runner.selftest._genuine import UNKNOWN, genuine_calls, ground_truth_answer
from runner.selftest._wrong import wrong_answers
from runner.system.paths import eval_root
from runner.verdict import planned_checks

__all__ = ["ADVERSARY", "ORACLE", "LiveResult", "PlanTurn", "agent_source", "live_lines",
           "live_results", "live_sound", "remove_agents", "write_agents"]

ORACLE, ADVERSARY = "oracle", "adversary"


class PlanCall(BaseModel):
    """One tool call the agent makes."""

    name: str = Field(description="the tool's name")
    arguments: dict[str, Any] = Field(default_factory=dict, description=(
        "its arguments; a file_path/path is corpus-relative and resolved in the sandbox by "
        "file name"))


class PlanTurn(BaseModel):
    """What the agent does when it receives `user_message`."""

    scenario: str = Field(description="the scenario id (for a reader; the agent keys on the "
                                      "message and the session's documents)")
    turn: int = Field(description="the turn number")
    user_message: str = Field(description="the message the scripted simulator sends")
    documents: list[str] = Field(description="file names of the scenario's setup documents")
    calls: list[PlanCall] = Field(description="the tool calls to make, in order")
    answer: str = Field(description="the final answer to give")
    kind: str = Field(description="'genuine', or which wrong answer")


class Plan(BaseModel):
    """plan.json beside the agent."""

    turns: list[PlanTurn] = Field(description="every turn of every scenario in the run")


def agent_source() -> Path:
    return eval_root() / "agents" / ORACLE / "agent.py"


def _filled(call: ToolCall, message: str, documents: list[str]) -> PlanCall:
    """The call with the arguments a real tool needs and the check did not pin."""
    arguments = dict(call.arguments)
    first = documents[0] if documents else None
    if call.name in ("query_documents", "query_specific_file"):
        arguments.setdefault("query", message)
    if call.name in ("query_specific_file", "index_document") and first:
        arguments.setdefault("file_path", first)
    if call.name == "search_file" and first:
        arguments.setdefault("file_pattern", Path(first).name)
    return PlanCall(name=call.name, arguments=arguments)


def _plan(scenarios: Iterable[Scenario], manifest: Manifest | None, oracle: bool) -> Plan:
    turns = []
    for scenario in scenarios:
        documents = [str(doc.relative_path) for doc in scenario.setup_documents]
        for turn in scenario.turns:
            message = turn.user_message or turn.objective
            planned = planned_checks(turn)
            truth = ground_truth_answer(turn, manifest) or ""
            answer = truth or UNKNOWN
            calls = genuine_calls(planned, scenario)
            limited = any(isinstance(item.check, ToolsExact | MaxToolCalls)
                          for item in planned)
            if not calls and documents and not limited:
                calls = [ToolCall(name="query_documents")]
            kind = "genuine"
            if not oracle:
                wrong = wrong_answers(turn, truth, planned, scenario, manifest)
                checks_answer = any(decides(item) and item.check.type.startswith("answer")
                                    for item in planned)
                calls = calls if checks_answer else []
                if wrong:
                    kind, answer = wrong[0].kind, wrong[0].text
            turns.append(PlanTurn(scenario=scenario.id, turn=turn.turn, user_message=message,
                                  documents=[Path(doc).name for doc in documents],
                                  calls=[_filled(call, message, documents) for call in calls],
                                  answer=answer, kind=kind))
    return Plan(turns=turns)


def write_agents(scenarios: list[Scenario], manifest: Manifest | None, dest: Path) -> Path:
    """`dest/oracle/` and `dest/adversary/`, each agent.py and its plan.json; returns `dest`
    (the folder to pass as --agent-dir)."""
    source = agent_source().read_text(encoding="utf-8")
    for agent_id, oracle in ((ORACLE, True), (ADVERSARY, False)):
        folder = dest / agent_id
        folder.mkdir(parents=True, exist_ok=True)
        text = source if oracle else source.replace(
            'AGENT_ID = "oracle"', 'AGENT_ID = "adversary"').replace(
            'AGENT_NAME = "Oracle (trialbox self-test)"',
            'AGENT_NAME = "Adversary (trialbox self-test)"')
        (folder / "agent.py").write_text(text, encoding="utf-8")
        plan = _plan(scenarios, manifest, oracle)
        (folder / "plan.json").write_text(plan.model_dump_json(indent=1), encoding="utf-8")
        # The sandbox's Agent UI runs as its own user: the folders must be readable by it (a
        # temporary folder is created 0700).
        for path in (folder / "agent.py", folder / "plan.json"):
            path.chmod(0o644)
        folder.chmod(0o755)
    dest.chmod(0o755)
    return dest


def remove_agents(dest: Path) -> None:
    for agent_id in (ORACLE, ADVERSARY):
        shutil.rmtree(dest / agent_id, ignore_errors=True)




class LiveResult(BaseModel):
    """One scenario of `trialbox selftest --live`."""

    id: str = Field(description="the scenario id")
    checks: int = Field(description="checks decided in the oracle's run")
    judge_only: bool = Field(description=(
        "no check can decide it (the pure layer's verdict: guards only, or no check)"))
    oracle_status: str = Field(description="the oracle run's status for the scenario")
    passable: bool = Field(description="the oracle's run passed every check")
    discriminating: bool = Field(description="the adversary's run failed at least one check")
    failed_for_oracle: list[str] = Field(default_factory=list, description=(
        "diagnostics of the checks the oracle failed"))


def _all_checks(result: ScenarioResult) -> list[CheckResult]:
    return [check for turn in result.turns for check in turn.checks] + list(result.checks)


def live_results(oracle: Iterable[ScenarioResult], adversary: Iterable[ScenarioResult],
                 judge_only: Collection[str] = ()) -> list[LiveResult]:
    """Per scenario of the oracle's run: passable (every check passed — a scenario that did
    not run has no check results and is not passable) and discriminating (the adversary's run
    of it failed a check). `judge_only`: the ids the pure layer found no deciding check in —
    a guard such as tool_not_called passes for the adversary too, as it should."""
    theirs = {result.id: result for result in adversary}
    found = []
    for result in oracle:
        checks = _all_checks(result)
        wrong = theirs.get(result.id)
        caught = wrong is not None and any(not check.passed for check in _all_checks(wrong))
        found.append(LiveResult(
            id=result.id, checks=len(checks), oracle_status=str(result.status.value),
            judge_only=result.id in judge_only or not checks,
            passable=bool(checks) and all(check.passed for check in checks),
            discriminating=caught,
            failed_for_oracle=[f"turn {c.turn}: {c.type}: {c.diagnostic}" for c in checks
                               if not c.passed]))
    return found


def live_lines(results: list[LiveResult]) -> list[str]:
    """One line per scenario, then the counts."""
    lines = []
    for item in results:
        if item.judge_only:
            lines.append(f"judge_only                  {item.id} (oracle run: {item.oracle_status})")
            continue
        verdict = ("passable_and_discriminating" if item.passable and item.discriminating
                   else "not_passable" if not item.passable else "not_discriminating")
        lines.append(f"{verdict:28}{item.id}")
        lines += [f"  oracle failed {failure}" for failure in item.failed_for_oracle]
    decided = [item for item in results if not item.judge_only]
    lines.append(f"live: {len(decided)} of {len(results)} scenarios decidable; oracle passed "
                 f"{sum(item.passable for item in decided)}, adversary caught "
                 f"{sum(item.discriminating for item in decided)}")
    return lines


def live_sound(results: list[LiveResult]) -> bool:
    return all(item.passable and item.discriminating for item in results if not item.judge_only)
