"""The live layer's agents: the oracle and the adversary, and what their runs prove.

Both are one real GAIA agent (eval/agents/oracle/agent.py) mounted with `--agent-dir`; what
each says comes from a plan.json written beside it, for the self-test run only — the ground
truth is never in a normal run's sandbox. The oracle makes the calls the turn's tool checks ask
for (and, where the turn has documents and no limit on calls, a `query_documents` with the
user's message: the real RAG path; a search, an index and a query for a file the user only
describes or a staged fixture it names) and answers with the genuine answer only when the text
its tools returned holds its needles (runner/selftest/_needles.py: else "not answerable from the
corpus"; a failed tool is named as its answer, never talked past). The adversary makes the calls
only where the turn checks its answer, and answers with the first wrong answer that applies
(20 % off, another fact, a hedged list, "I don't know", the talking ones, empty); with
`--every-kind` one adversary per kind says only that kind, the other turns answering as the
oracle, so each kind is caught, or not, on the turns that said it.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from runner.records.outcomes import CheckResult
from runner.records.transcript import ToolCall
from runner.report import ScenarioResult
from runner.scenarios import (
    STAGING_DIR,
    CorpusDocument,
    Manifest,
    MaxToolCalls,
    Scenario,
    ToolNotCalled,
    ToolsExact,
    Turn,
)
from runner.selftest._decide import decides
from runner.selftest._genuine import UNKNOWN, genuine_calls, ground_truth_answer
from runner.selftest._needles import needles as find_needles
from runner.selftest._needles import readable_text
from runner.selftest._report import caught_lines
from runner.selftest._wrong import wrong_answers
from runner.system.paths import eval_root
from runner.verdict import is_undecided, planned_checks

__all__ = ["ADVERSARY", "ORACLE", "LiveResult", "PlanTurn", "agent_source", "kind_agent_id",
           "kinds_tried", "live_kind_table", "live_lines", "live_results", "live_sound",
           "remove_agents", "staged_files_named", "unproven_lines", "write_agents"]

ORACLE, ADVERSARY = "oracle", "adversary"
#: GAIA's tool the oracle searches its session's indexed chunks with for a missing needle.
SEARCH_TOOL = "search_indexed_chunks"
#: How the oracle's answer says it has none (eval/agents/oracle/agent.py writes the same words).
NOT_ANSWERABLE = "Not answerable from the corpus:"
TOOL_FAILED = "A tool failed:"


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
    may_search: bool = Field(default=True, description=(
        "the oracle may make calls beyond the plan's (a search of the index for a missing "
        "needle): false where the turn limits or fixes its calls"))
    needles: list[str] = Field(default_factory=list, description=(
        "the answer as its documents write it (runner/selftest/_needles.py): the oracle gives "
        "the answer only when the text its tools returned holds each of them, after one "
        "search of the index for any missing (unless the turn limits its calls), and says "
        "'not answerable from the corpus' otherwise; empty: nothing to look for"))
    unproven: str | None = Field(default=None, description=(
        "why a turn whose answer comes from its documents has no needles: the answer is "
        "worked out from them, not written in them, or they are not plain text"))


class Plan(BaseModel):
    """plan.json beside the agent."""

    turns: list[PlanTurn] = Field(description="every turn of every scenario in the run")


def agent_source() -> Path:
    return eval_root() / "agents" / ORACLE / "agent.py"


def _filled(call: ToolCall, message: str, documents: list[str],
            searched: str | None = None) -> PlanCall:
    """The call with the arguments a real tool needs and the check did not pin: a search
    looks for the document the ground truth names (else the first setup document); a file
    argument left open is filled in the sandbox from what an earlier call of the turn found."""
    arguments = dict(call.arguments)
    first = documents[0] if documents else None
    if call.name in ("query_documents", "query_specific_file"):
        arguments.setdefault("query", message)
    if call.name in ("query_specific_file", "index_document", "analyze_data_file") and first:
        arguments.setdefault("file_path", first)
    if call.name == "search_file":
        # Any file of the types asked for ("*", GAIA's glob) when nothing names the file.
        arguments.setdefault("file_pattern", Path(searched).stem if searched
                             else Path(first).name if first else "*")
    return PlanCall(name=call.name, arguments=arguments)


def staged_files_named(message: str, scenario: Scenario, fixtures_root: Path | None) -> list[str]:
    """The staged fixture files a user message names by their path in the sandbox
    (``~/gaia-eval/<folder>/<file>``, spaces and all), in the order they appear in it."""
    if fixtures_root is None:
        return []
    found = []
    for folder in scenario.fixtures:
        source = fixtures_root / folder
        if not source.is_dir():
            continue
        for path in sorted(p for p in source.rglob("*") if p.is_file()):
            inside = f"~/{STAGING_DIR / folder / path.relative_to(source).as_posix()}"
            if inside in message:
                found.append((message.index(inside), inside))
    return [inside for _, inside in sorted(found)]


def _reading(files: list[str], message: str) -> list[ToolCall]:
    """GAIA's own way to read a named file: index it, then ask it the user's question."""
    return [call for path in files for call in (
        ToolCall(name="index_document", arguments={"file_path": path}),
        ToolCall(name="query_specific_file", arguments={"file_path": path, "query": message}))]


def _plan(scenarios: Iterable[Scenario], manifest: Manifest | None, play: str = ORACLE,
          fixtures_root: Path | None = None, texts: dict[Path, str | None] | None = None) -> Plan:
    """The plan of one agent: ``play`` is ORACLE (the ground truth), ADVERSARY (each turn's
    first wrong answer) or a kind of wrong answer (its family, e.g. "negation"): each turn that
    has one of that kind says it, every other turn answers as the oracle would, so a failed
    check on that turn is that kind caught. ``texts``: the documents read so far (each is read
    once for all the plans of one self-test)."""
    texts = {} if texts is None else texts
    turns = []
    for scenario in scenarios:
        documents = [str(doc.relative_path) for doc in scenario.setup_documents]
        for turn in scenario.turns:
            message = turn.user_message or turn.objective
            planned = planned_checks(turn)
            truth = ground_truth_answer(turn, manifest) or ""
            answer, kind = truth or UNKNOWN, "genuine"
            calls = genuine_calls(planned, scenario)
            limited = any(isinstance(item.check, ToolsExact | MaxToolCalls)
                          for item in planned)
            staged = staged_files_named(message, scenario, fixtures_root)
            if not calls and not limited:
                calls = (_reading(staged, message) if staged
                         else [ToolCall(name="query_documents")] if documents else [])
            reads = bool(calls)  # the oracle's turn reads something: its answer can be proven
            if play != ORACLE:
                wrong = wrong_answers(turn, truth, planned, scenario, manifest)
                if play != ADVERSARY:
                    wrong = [item for item in wrong if item.family == play][:1]
                if wrong or play == ADVERSARY:
                    # It calls the tools only where the turn checks its answer: the wrong
                    # answer, not a missing call, is what a check must catch.
                    checks_answer = any(decides(item) and item.check.type.startswith("answer")
                                        for item in planned)
                    calls = calls if checks_answer else []
                if wrong:
                    kind, answer = wrong[0].kind, wrong[0].text
            needles: list[str] = []
            unproven: str | None = None
            if kind == "genuine" and reads and truth and truth != UNKNOWN:
                needles, unproven = _needles_of(
                    truth, turn, _sources(scenario, turn, manifest, staged, fixtures_root), texts)
            document = _ground_truth_document(turn, manifest)
            turns.append(PlanTurn(scenario=scenario.id, turn=turn.turn, user_message=message,
                                  documents=[Path(doc).name for doc in documents],
                                  calls=[_filled(call, message, documents,
                                                 document.filename if document else None)
                                         for call in calls],
                                  answer=answer, kind=kind, needles=needles, unproven=unproven,
                                  may_search=_may_search(planned, len(calls) + len(needles))))
    return Plan(turns=turns)


def _needles_of(truth: str, turn: Turn, sources: list[Path], texts: dict[Path, str | None]
                ) -> tuple[list[str], str | None]:
    """The needles of a genuine answer in the files it comes from, or why there are none —
    where the turn reads documents (or staged files) at all."""
    if not sources:
        return [], None
    read = [texts[path] if path in texts else texts.setdefault(path, readable_text(path))
            for path in sources]
    needles, how = find_needles(truth, [text for text in read if text is not None])
    unproven = _unproven(how, turn, plain_text=None not in read)
    return (needles if unproven is None else []), unproven


def _may_search(planned: list[Any], calls: int) -> bool:
    """The turn's checks leave room for the oracle's searches of the index: no fixed
    trajectory, no guard against the search tool, `calls` within every call limit."""
    for item in planned:
        check = item.check
        if isinstance(check, ToolsExact):
            return False
        if isinstance(check, ToolNotCalled) and check.tool == SEARCH_TOOL:
            return False
        if isinstance(check, MaxToolCalls) and check.tool in (None, SEARCH_TOOL) \
                and calls > check.max:
            return False
    return True


def _unproven(how: str, turn: Turn, plain_text: bool) -> str | None:
    """Why the oracle cannot look for the answer in its retrieval (None: it can). An answer
    none of whose parts the documents write is looked for all the same — so that it comes
    out not answerable — only where the ground truth says which document holds it (`doc_id`)
    and names no manifest fact (a fact the corpus gate recomputes, such as a total, is
    worked out, not written)."""
    truth = turn.ground_truth
    if how == "written":
        return None
    if not plain_text:
        return "its documents are not plain text"
    if how == "absent" and truth is not None and truth.doc_id and not truth.fact_id:
        return None
    if how == "absent" and (truth is None or not truth.doc_id):
        return "not written in its documents, and its ground truth names no document"
    return "worked out from its documents, not written in them"


def _corpus_root(manifest: Manifest | None) -> Path | None:
    return manifest.source_file.parent if manifest and manifest.source_file else None


def _ground_truth_document(turn: Turn, manifest: Manifest | None) -> CorpusDocument | None:
    """The manifest's document the turn's ground truth names (doc_id), if any."""
    doc_id = turn.ground_truth.doc_id if turn.ground_truth else None
    return manifest.document(doc_id) if manifest and doc_id else None


def _sources(scenario: Scenario, turn: Turn, manifest: Manifest | None, staged: list[str],
             fixtures_root: Path | None) -> list[Path]:
    """The files the turn's answer comes from: its setup documents, the document its ground
    truth names, the staged files its message names."""
    root = _corpus_root(manifest)
    paths = [root / doc.relative_path for doc in scenario.setup_documents] if root else []
    document = _ground_truth_document(turn, manifest)
    located = document.locate(root) if document and root else None
    if located is not None:
        paths.append(located)
    if fixtures_root is not None:
        prefix = f"~/{STAGING_DIR}/"
        paths += [fixtures_root / name.removeprefix(prefix) for name in staged]
    return list(dict.fromkeys(paths))


def kinds_tried(scenarios: Iterable[Scenario], manifest: Manifest | None
                ) -> dict[str, dict[str, list[int]]]:
    """Per kind of wrong answer (its family), the scenarios and turns that have one, kinds in
    the order first met: what `--every-kind` plays, one adversary run per kind."""
    tried: dict[str, dict[str, list[int]]] = {}
    for scenario in scenarios:
        for turn in scenario.turns:
            planned = planned_checks(turn)
            truth = ground_truth_answer(turn, manifest) or ""
            for family in dict.fromkeys(item.family for item in wrong_answers(
                    turn, truth, planned, scenario, manifest)):
                tried.setdefault(family, {}).setdefault(scenario.id, []).append(turn.turn)
    return tried


def kind_agent_id(family: str) -> str:
    """The agent id of the adversary that plays one kind: ``adversary_negation``."""
    return f"{ADVERSARY}_{re.sub(r'[^a-z0-9]+', '_', family.casefold()).strip('_')}"


def write_agents(scenarios: list[Scenario], manifest: Manifest | None, dest: Path,
                 fixtures_root: Path | None = None, every_kind: bool = False) -> Path:
    """`dest/oracle/` and `dest/adversary/`, each agent.py and its plan.json; returns `dest`
    (the folder to pass as --agent-dir). With ``fixtures_root`` (the run's fixture tree), a
    turn that names a staged file is answered by reading that file in the sandbox. With
    ``every_kind``, also one adversary per kind of wrong answer (`kind_agent_id`)."""
    source = agent_source().read_text(encoding="utf-8")
    texts: dict[Path, str | None] = {}  # every document read once, for all the plans
    plays = {ORACLE: ORACLE, ADVERSARY: ADVERSARY}
    if every_kind:
        plays |= {kind_agent_id(family): family for family in kinds_tried(scenarios, manifest)}
    for agent_id, play in plays.items():
        folder = dest / agent_id
        folder.mkdir(parents=True, exist_ok=True)
        text = source if play == ORACLE else source.replace(
            'AGENT_ID = "oracle"', f'AGENT_ID = "{agent_id}"').replace(
            'AGENT_NAME = "Oracle (trialbox self-test)"',
            f'AGENT_NAME = "Adversary (trialbox self-test: {play})"')
        (folder / "agent.py").write_text(text, encoding="utf-8")
        plan = _plan(scenarios, manifest, play, fixtures_root, texts)
        (folder / "plan.json").write_text(plan.model_dump_json(indent=1), encoding="utf-8")
        # The sandbox's Agent UI runs as its own user: the folders must be readable by it (a
        # temporary folder is created 0700).
        for path in (folder / "agent.py", folder / "plan.json"):
            path.chmod(0o644)
        folder.chmod(0o755)
    dest.chmod(0o755)
    return dest


def unproven_lines(dest: Path) -> list[str]:
    """How many of the oracle's answers its retrieval could not be checked for, by why
    (read from the plan `write_agents` wrote in `dest`)."""
    plan = Plan.model_validate_json((dest / ORACLE / "plan.json").read_text(encoding="utf-8"))
    why = Counter(turn.unproven for turn in plan.turns if turn.unproven)
    if not why:
        return []
    parts = "; ".join(f"{reason}: {count}" for reason, count in why.items())
    return [f"live: {sum(why.values())} turn(s) answered without proof through retrieval ({parts})"]


def remove_agents(dest: Path) -> None:
    for folder in dest.iterdir():
        if folder.name in (ORACLE, ADVERSARY) or folder.name.startswith(f"{ADVERSARY}_"):
            shutil.rmtree(folder, ignore_errors=True)




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
    not_answerable: list[str] = Field(default_factory=list, description=(
        "turns whose answer the oracle's retrieval did not bring back (`turn 2: the text its "
        "tools returned does not hold the answer`): the fact is not in the corpus "
        "as indexed, or not where a search for the user's message finds it"))
    tool_failures: list[str] = Field(default_factory=list, description=(
        "turns where one of the oracle's tool calls failed (the tool and its error)"))
    kinds_caught: dict[str, bool] = Field(default_factory=dict, description=(
        "--every-kind: per kind of wrong answer tried on the scenario, whether each turn that "
        "said it failed one of its checks in that kind's run"))


def _all_checks(result: ScenarioResult) -> list[CheckResult]:
    return [check for turn in result.turns for check in turn.checks] + list(result.checks)


def _failed(check: CheckResult) -> bool:
    """A check that failed; an undecided one goes to the judge and catches nothing."""
    return not check.passed and not is_undecided(check)


def _caught_on_turns(result: ScenarioResult | None, turns: Collection[int]) -> bool:
    """Each of ``turns`` failed one of its own checks in ``result`` (a run of one kind)."""
    if result is None:
        return False
    checks = _all_checks(result)
    return all(any(_failed(check) for check in checks if check.turn == turn) for turn in turns)


def live_results(oracle: Iterable[ScenarioResult], adversary: Iterable[ScenarioResult],
                 judge_only: Collection[str] = (),
                 by_kind: Mapping[str, Iterable[ScenarioResult]] | None = None,
                 tried: Mapping[str, Mapping[str, Collection[int]]] | None = None,
                 ) -> list[LiveResult]:
    """Per scenario of the oracle's run: passable (every check passed — a scenario that did
    not run has no check results and is not passable) and discriminating (the adversary's run
    of it failed a check). `judge_only`: the ids the pure layer found no deciding check in —
    a guard such as tool_not_called passes for the adversary too, as it should. `by_kind`
    (`--every-kind`): each kind's adversary run, read against `tried` (`kinds_tried`): the
    kind is caught where every turn that said it failed one of its checks."""
    theirs = {result.id: result for result in adversary}
    kind_runs = {kind: {result.id: result for result in results}
                 for kind, results in (by_kind or {}).items()}
    found = []
    for result in oracle:
        checks = _all_checks(result)
        wrong = theirs.get(result.id)
        caught = wrong is not None and any(_failed(check) for check in _all_checks(wrong))
        said = [(turn.turn, turn.answer) for turn in result.turns]
        kinds = {kind: _caught_on_turns(runs.get(result.id), (tried or {})[kind][result.id])
                 for kind, runs in kind_runs.items() if result.id in (tried or {}).get(kind, {})}
        found.append(LiveResult(
            id=result.id, checks=len(checks), oracle_status=str(result.status.value),
            judge_only=result.id in judge_only or not checks,
            passable=bool(checks) and all(check.passed for check in checks),
            discriminating=caught,
            failed_for_oracle=[f"turn {c.turn}: {c.type}: {c.diagnostic}" for c in checks
                               if not c.passed],
            not_answerable=[f"turn {n}: {text.removeprefix(NOT_ANSWERABLE).strip()}"
                            for n, text in said if text.startswith(NOT_ANSWERABLE)],
            tool_failures=[f"turn {n}: {text.removeprefix(TOOL_FAILED).strip()}"
                           for n, text in said if text.startswith(TOOL_FAILED)],
            kinds_caught=kinds))
    return found


def live_lines(results: list[LiveResult]) -> list[str]:
    """One line per scenario, then the counts."""
    lines = []
    for item in results:
        if item.judge_only:
            lines.append(f"judge_only                  {item.id} (oracle run: {item.oracle_status})")
            continue
        lines.append(f"{verdict_of(item):28}{item.id}")
        lines += [f"  not answerable from the corpus: {why}" for why in item.not_answerable]
        lines += [f"  oracle's tool failed: {why}" for why in item.tool_failures]
        lines += [f"  oracle failed {failure}" for failure in item.failed_for_oracle]
        lines += [f"  the adversary's '{kind}' answer passed every check of its turn"
                  for kind, caught in item.kinds_caught.items() if not caught]
    decided = [item for item in results if not item.judge_only]
    unanswerable = sum(bool(item.not_answerable) for item in results)
    lines.append(f"live: {len(decided)} of {len(results)} scenarios decidable; oracle passed "
                 f"{sum(item.passable for item in decided)}, adversary caught "
                 f"{sum(item.discriminating for item in decided)}"
                 + (f"; {unanswerable} not answerable from the corpus" if unanswerable else ""))
    return lines + live_kind_table(decided)


def live_kind_table(results: Iterable[LiveResult]) -> list[str]:
    """--every-kind: per kind of wrong answer, in how many of the scenarios it was tried on
    the live run caught it (the offline table's columns, from real sandboxes)."""
    table: dict[str, tuple[int, int]] = {}
    for item in results:
        for kind, was_caught in item.kinds_caught.items():
            done, of = table.get(kind, (0, 0))
            table[kind] = (done + was_caught, of + 1)
    return caught_lines(table, "live wrong answer")


def verdict_of(item: LiveResult) -> str:
    """The scenario's live verdict; a retrieval that could not bring the answer back is named
    as such, before what it did to the checks."""
    if item.not_answerable:
        return "not_answerable_from_corpus"
    if item.tool_failures:
        return "oracle_tool_failed"
    if item.passable:
        return ("passable_and_discriminating" if _discriminating(item)
                else "not_discriminating")
    return "not_passable"


def _discriminating(item: LiveResult) -> bool:
    return item.discriminating and all(item.kinds_caught.values())


def live_sound(results: list[LiveResult]) -> bool:
    return all(item.passable and _discriminating(item) for item in results
               if not item.judge_only) \
        and not any(item.not_answerable or item.tool_failures for item in results)
