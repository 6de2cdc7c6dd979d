"""What a run checks and resolves before its first sandbox: the selected scenarios, the
agent ids, the judge and simulator (the judge calibrated), a writable results folder.

Bad input stops the run here with one clear message and nothing started (UsageError: exit 2,
InfraError: exit 3)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from runner.conversation.agents import AgentError, AgentRegistry
from runner.conversation.simulate import make_simulator
from runner.judge import (
    CalibrationFailed,
    JudgeError,
    JudgeServerError,
    JudgeUnavailable,
    ProviderConfigError,
    from_env_and_flags,
    open_judge,
)
from runner.run.errors import InfraError, UsageError
from runner.run.settings import RunSettings
from runner.scenarios import (
    LANES_FILE,
    LanesError,
    Manifest,
    Scenario,
    SelectionError,
    find_lanes,
    lane_categories,
    load_lanes,
    load_suite,
    rejected_in_selection,
    select,
    unclaimed,
)
from runner.system.urls import shown_url

REJECTED_WARNING = "rejected scenario file, not run: "


def selected_scenarios(settings: RunSettings, say: Callable[[str], None] | None = None
                       ) -> tuple[list[Scenario], Manifest | None, list[str]]:
    """Load the suite and apply the selection; also return the problems of selected files that
    could not be loaded. Selection comes first: a broken file blocks only itself (the run goes
    on without it and exits 2), unless --strict; problems of the tree as a whole (the
    manifest) block every run."""
    suite = load_suite(settings.suite_paths, settings.corpus_root)
    sel = settings.selection
    if sel.lane is not None:
        sel = sel.model_copy(update={"categories": _lane(settings, suite.scenarios, say)})
    rejected = rejected_in_selection(suite, ids=sel.ids, categories=sel.categories, tags=sel.tags,
                                     exclude_tags=sel.exclude_tags)
    # A tree error (the manifest) stops everything; the file problems are listed with it so
    # one pass fixes the whole tree.
    blocking = suite.tree_errors + rejected if suite.tree_errors or settings.strict else []
    if blocking:
        listing = "\n".join(str(problem) for problem in blocking)
        raise UsageError(f"{len(blocking)} problem(s) in the scenarios — fix them first:\n{listing}")
    rejected_names = {name for file in suite.rejected for name in file.names}
    try:
        chosen = select(suite.scenarios, ids=[i for i in sel.ids if i not in rejected_names],
                        categories=sel.categories, tags=sel.tags, exclude_tags=sel.exclude_tags)
    except SelectionError as exc:
        raise UsageError(str(exc)) from exc
    if sel.ids and not [i for i in sel.ids if i not in rejected_names]:
        chosen = []
    if rejected:
        files = sorted({str(problem.file) for problem in rejected})
        message = (f"{len(files)} selected scenario file(s) rejected and not run (the run exits 2; "
                   f"--strict stops before anything runs): " + ", ".join(files))
        if say is not None:
            say(message)
            for problem in rejected:
                say(f"  {problem}")
    if not chosen:
        raise UsageError("the selection matched no runnable scenario — widen --scenario/--category/--tag"
                         + (" or fix the rejected files above" if rejected else ""))
    _check_not_measured(settings, suite.scenarios)
    return chosen, suite.manifest, [str(problem) for problem in rejected]


def _lane(settings: RunSettings, scenarios: Sequence[Scenario],
          say: Callable[[str], None] | None) -> list[str]:
    """--lane NAME: its categories that the tree has (a lane may name categories of a newer
    tree); the ones it lacks, and the tree's categories no lane measures, are said."""
    lane = settings.selection.lane or ""
    path = find_lanes(settings.suite_paths)
    if path is None:
        raise UsageError(f"--lane {lane}: no {LANES_FILE} beside the scenarios folder of "
                         f"{', '.join(map(str, settings.suite_paths))} (GAIA keeps it at "
                         "eval/ci_lanes.json) — choose with --category instead")
    try:
        lanes = load_lanes(path)
        wanted = lane_categories(lanes, lane, path)
    except LanesError as exc:
        raise UsageError(str(exc)) from exc
    present = sorted({s.category or "uncategorized" for s in scenarios})
    chosen = [category for category in wanted if category in present]
    absent = [category for category in wanted if category not in present]
    if not chosen:
        raise UsageError(f"--lane {lane}: none of its categories ({', '.join(wanted)}) is in the "
                         "tree given")
    if say is not None:
        say(f"lane {lane} ({path}): {', '.join(chosen)}"
            + (f"; not in this tree: {', '.join(absent)}" if absent else ""))
        orphans = unclaimed(lanes, present)
        if orphans:
            say(f"warning: {path}: no lane runs {', '.join(orphans)} and none excludes them — "
                "no CI lane measures those categories")
    return chosen


def _check_not_measured(settings: RunSettings, scenarios: Sequence[Scenario]) -> None:
    """Every --not-measured name is a scenario id or category of the suite or the baseline:
    a misspelt excuse would excuse nothing, silently, and the gate would fail for the wrong
    reason (or, worse, a user would think it excused what it did not)."""
    if not settings.not_measured:
        return
    known = {s.id for s in scenarios} | {s.category or "uncategorized" for s in scenarios}
    if settings.baseline is not None:
        from runner.report import read_any_scorecard

        rows = read_any_scorecard(settings.baseline).scenarios
        known |= {row.id for row in rows} | {row.category for row in rows}
    unknown = sorted(set(settings.not_measured) - known)
    if unknown:
        categories = sorted({s.category or "uncategorized" for s in scenarios})
        raise UsageError(f"--not-measured {', '.join(unknown)}: no scenario id or category of the "
                         "suite or the baseline has that name — fix the spelling (categories: "
                         f"{', '.join(categories)})")


def agent_registry(settings: RunSettings, scenarios: list[Scenario]) -> AgentRegistry:
    """The agent ids the sandboxes will have; an unknown agent type stops the run before
    anything starts, naming the ids that exist."""
    try:
        registry = AgentRegistry(settings.agent_dirs, agent=settings.agent,
                                 agent_map=settings.agent_map)
    except AgentError as exc:
        raise UsageError(str(exc)) from exc
    problems = registry.problems(scenarios)
    if problems:
        raise UsageError(f"{len(problems)} scenario(s) name an agent type no agent has:\n"
                         + "\n".join(problems))
    return registry


def resolve_providers(settings: RunSettings) -> Any:
    """Judge and simulator resolved from `auto` (flags, then environment), written back into
    `settings`. A cluster run calls this before it ships its settings to the nodes: a node must
    get `local`, never `auto`, which only the controller's environment can resolve."""
    try:
        choices = from_env_and_flags(
            judge=settings.judge_provider if settings.judge_provider != "auto" else None,
            judge_model=settings.judge_model,
            judge_url=settings.judge_url,
            simulator=settings.simulator_mode if settings.simulator_mode != "auto" else None,
            simulator_model=settings.simulator_model,
            simulator_url=settings.simulator_url,
            llm_url=f"{settings.llm_url}/api/v1",
        )
    except ProviderConfigError as exc:
        raise UsageError(str(exc)) from exc
    settings.judge_provider = choices.judge.provider
    settings.judge_model = choices.judge.model
    settings.judge_url = choices.judge.url
    settings.simulator_mode = choices.simulator.provider
    settings.simulator_model = choices.simulator.model
    settings.simulator_url = choices.simulator.url
    return choices


async def prepare_judge(settings: RunSettings, say: Callable[[str], None]) -> tuple[Any, Any]:
    """Resolve judge + simulator (printing each choice and why) and calibrate the judge."""
    choices = resolve_providers(settings)
    try:
        simulator = make_simulator(choices.simulator)
    except ProviderConfigError as exc:
        raise UsageError(str(exc)) from exc
    for line in choices.header_lines():
        say(line)
    if choices.judge.provider == "none":
        return None, simulator
    say("calibrating the judge before any scenario runs ...")
    try:
        gated = await open_judge(choices.judge)
    except JudgeUnavailable as exc:  # refused key or an outage: the machine's, not the model's
        raise InfraError(f"the judge is unavailable, so nothing was run: {exc}") from None
    except CalibrationFailed as exc:
        raise UsageError(f"the judge failed calibration, so nothing was run:\n{exc}") from exc
    except JudgeServerError as exc:  # reached, its server failed: infrastructure
        raise InfraError(f"the judge's server failed during calibration, so nothing was run: "
                         f"{exc}") from None
    except (httpx.HTTPError, JudgeError) as exc:
        where = shown_url(settings.judge_url) if settings.judge_url else "the configured URL"
        raise UsageError(f"the judge at {where} cannot be reached ({exc}); "
                         "check --judge-url or run with --judge-provider none") from exc
    assert gated is not None
    asked = "" if gated.report.requests is None else f", {gated.report.requests} question(s) asked live"
    say(f"judge calibrated: {gated.report.elapsed_s:.1f} s, every example right{asked}")
    return gated, simulator


def check_results_root(settings: RunSettings) -> None:
    """The results folder must be a writable folder before anything starts: a run that cannot
    record its results is an infrastructure problem (exit 3), found up front, not after the
    first scenario ran."""
    root = settings.results_root
    if root.exists() and not root.is_dir():
        raise InfraError(f"results folder {root} is a file — pass --results DIR (a folder)")
    existing = next((p for p in (settings.run_dir, *settings.run_dir.parents) if p.exists()), Path("."))
    try:
        # Probe the nearest existing folder: nothing of this run is created before it starts.
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise InfraError(f"cannot write results into {settings.run_dir}: {exc.strerror or exc} — "
                         "pass --results DIR on a writable disk with free space") from None

