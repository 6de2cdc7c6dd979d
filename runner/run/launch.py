"""Turn run settings into a running engine and a closed scorecard (run, rescore), and run it
to its end in one call (run_blocking: SIGTERM treated like Ctrl-C).

What is checked before the first sandbox starts is runner/run/prepare.py's; the exit code a
scorecard comes to is runner/run/gate.py's."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TextIO, TypeVar

from runner import __version__
from runner.conversation.agents import AgentRegistry
from runner.report import (
    RESCORED_FROM,
    RunConfig,
    RunWriter,
    Scorecard,
    ScorecardError,
    Trace,
    declared_order,
    read_trace,
    served_model_of,
)
from runner.run.backend import agent_ui_image, make_backend, unattributed_speed
from runner.run.conversations import LiveConversations, ReplayedConversations
from runner.run.decoding import decoding_label, with_decoding
from runner.run.engine import Engine
from runner.run.errors import InfraError, UsageError, first_line
from runner.run.llm_server import (
    check_served_device,
    llm_health_probe,
    llm_identity,
    reference_decode,
    served_capabilities,
    served_chat_model,
    served_on,
    server_build,
)
from runner.run.lock import is_owned, owning
from runner.run.prepare import (
    REJECTED_WARNING,
    agent_registry,
    check_results_root,
    prepare_judge,
    selected_scenarios,
)
from runner.run.resume import check_served_model, flag_damaged_artifacts, say_kept_foreign
from runner.run.settings import Backend, RunSettings
from runner.sandbox import SandboxBackend, SandboxError
from runner.scenarios import Manifest, Scenario

T = TypeVar("T")


def run_config(settings: RunSettings, extra: dict[str, Any] | None = None) -> RunConfig:
    """What the scorecard records about the run's set-up (its `config`)."""
    from runner.stack.hardware import hardware_fingerprint

    identity = llm_identity(settings.llm_url)
    device_truth = served_on(settings)
    # A rescore replays saved turns: no agent talks to the server, so its speed says nothing.
    replay = RESCORED_FROM in (extra or {})
    return RunConfig(
        judge_provider=None if settings.judge_provider == "none" else settings.judge_provider,
        judge_model=settings.judge_model,
        judge_url=settings.judge_url,
        simulator_mode=settings.simulator_mode,
        simulator_model=settings.simulator_model,
        device=settings.device,
        device_reason=settings.device_reason,
        served_on=device_truth.served_on,
        served_on_evidence=device_truth.evidence,
        device_fallback=device_truth.fell_back and settings.allow_device_fallback,
        backend=settings.backend.value,
        trialbox_version=__version__,
        images=(extra or {}).get("images", {}),
        agent_model=settings.agent_model or served_chat_model(identity),
        served_model=served_model_of(identity),
        derived_checks=settings.derived_checks,
        llm_server=identity,
        llm_server_build=server_build(settings.llm_container),
        reference_decode=None if replay else reference_decode(settings.llm_url,
                                                              served_chat_model(identity)),
        hardware=hardware_fingerprint().model_dump(mode="json"),
        concurrency=settings.concurrency,
        trials=settings.trials,
        rejudge=settings.rejudge,
        forced_tool=identity.get("forced_tool") if isinstance(identity, dict) else None,
        scenario_filter=settings.selection.ids,
        extra={k: v for k, v in (extra or {}).items() if k != "images"},
    )


def open_writer(settings: RunSettings, scenarios: Sequence[Scenario], resume: bool,
                extra: dict[str, Any] | None = None) -> RunWriter:
    """The run folder's writer, listing results in the order `scenarios` declares them."""
    run_dir = settings.run_dir
    order = declared_order([scenario.id for scenario in scenarios])
    if resume and (run_dir / "scorecard.json").exists():
        try:
            return RunWriter.resume(run_dir, order=order)
        except ValueError as exc:  # cut short (disk full, killed mid-write) or not ours
            raise UsageError(f"cannot resume: {first_line(exc)} — start a new run, "
                             "or restore the scorecard") from None
    settings.save(run_dir)
    return RunWriter(run_dir, run_id=settings.run_id, config=run_config(settings, extra), order=order)


async def run(settings: RunSettings, say: Callable[[str], None], resume: bool = False,
              extra: dict[str, Any] | None = None, progress_stream: TextIO | None = None,
              only: frozenset[str] | None = None, again: frozenset[str] = frozenset()
              ) -> Scorecard:
    """Everything from settings to a closed scorecard. Raises UsageError/InfraError early.
    `only`: run just these result keys now (one block of `trialbox ab`); the rest of the plan
    stays unrecorded for a later call. `again`: keys a resume runs again although recorded."""
    if resume and is_owned(settings.run_dir):
        with owning(settings.run_dir):  # raises the one-line refusal naming the live owner
            pass
    scenarios, manifest, rejected = selected_scenarios(settings, say)
    check_results_root(settings)
    if not settings.target_url:
        check_served_device(settings, say)  # before any sandbox: exit 3 on a silent fallback
    say(f"run {settings.run_id}: {len(scenarios)} scenario(s) × {settings.trials} trial(s), "
        f"backend {settings.backend.value}, device {settings.device} ({settings.device_reason or 'as requested'}), "
        f"concurrency {settings.concurrency}"
        + (", repeatable decoding (greedy, one seed: for speed comparisons)"
           if settings.repeatable_decoding else ""))
    agents = agent_registry(settings, scenarios)
    if settings.target_url:
        if settings.concurrency > 1:  # a flag is never dropped silently
            say(f"concurrency 1, not {settings.concurrency}: an attached Agent UI is one UI, and "
                "it answers one request at a time")
        settings.concurrency = 1  # GAIA's UI answers one request at a time: parallel gains nothing
        say(f"warning: attached to the Agent UI at {settings.target_url}: no sandbox, so no "
            "isolation and no clean RAG cache or chat history between scenarios")
    if (unattributed := unattributed_speed(settings)) is not None:
        say(unattributed)
    judge, simulator = await prepare_judge(settings, say)
    image, image_info = agent_ui_image(settings, say)
    try:
        backend = with_decoding(settings, make_backend(settings, image))
    except SandboxError as exc:
        raise InfraError(str(exc)) from exc
    extra = {**(extra or {}), **image_info, "agents": agents.describe(),
             "decoding": decoding_label(settings)}
    # One owner per run folder from here on: a second run or resume of a live run stops here,
    # before its sweep could remove the live run's sandboxes; a dead owner's lock is free.
    with owning(settings.run_dir):
        return await _run_owned(settings, say, resume, scenarios, manifest, rejected, agents,
                                judge, simulator, backend, extra, progress_stream, only, again)


async def _run_owned(settings: RunSettings, say: Callable[[str], None], resume: bool,
                     scenarios: list[Scenario], manifest: Manifest | None, rejected: list[str],
                     agents: AgentRegistry, judge: Any, simulator: Any, backend: SandboxBackend,
                     extra: dict[str, Any], progress_stream: TextIO | None,
                     only: frozenset[str] | None = None, again: frozenset[str] = frozenset()
                     ) -> Scorecard:
    if resume and settings.backend is Backend.DOCKER:
        _sweep(settings.run_id, say, "left over from the interrupted run", settings.llm_container)
    writer = open_writer(settings, scenarios, resume, extra)
    if resume:
        check_served_model(settings, writer, say)
        say_kept_foreign(writer, scenarios, say)
        flag_damaged_artifacts(writer, say)
    for problem in rejected:
        if REJECTED_WARNING + problem not in writer.warnings:
            writer.warn(REJECTED_WARNING + problem)
    say(f"results: {settings.run_dir}")
    conversations = LiveConversations(settings, backend, simulator, manifest=manifest,
                                      capabilities=served_capabilities(settings.llm_url),
                                      agents=agents)
    engine = Engine(settings, scenarios, conversations, judge, writer, say=say,
                    progress_stream=progress_stream,
                    llm_health=lambda: llm_health_probe(settings.llm_url), only=only,
                    again=again)
    conversations.activity = engine.show_activity  # a long index shows on the run line
    try:
        return await engine.run()
    finally:
        if settings.backend is Backend.DOCKER:
            # Whatever a cancelled or crashed sandbox start left behind goes by label.
            _sweep(settings.run_id, say, "left behind by this run", settings.llm_container)


def _sweep(run_id: str, say: Callable[[str], None], why: str, llm_container: str | None = None) -> None:
    """Remove what run `run_id` left in Docker (by label); a failure is said, never raised."""
    from runner.run.cleanup import cleanup

    try:
        report = cleanup(run_id)
        if llm_container:
            import docker

            from runner.sandbox.docker import repair_llm_networks

            # A stopped LLM container keeps references to removed networks: `docker start`
            # would fail on them.
            repair_llm_networks(docker.from_env(), llm_container)
    except Exception as exc:  # noqa: BLE001 — cleanup must never hide the run's own outcome
        say(f"warning: could not sweep run {run_id}'s Docker objects: {exc}")
        return
    if report.removed:
        say(f"removed {report.removed} Docker object(s) {why} (label trialbox.run={run_id})")


async def rescore(original: Path, settings: RunSettings, say: Callable[[str], None]) -> Scorecard:
    """Judge the saved transcripts of `original` again (with `settings`' judge) into a new run
    folder, without touching the agent: no sandbox is opened."""
    saved = saved_traces(original)
    chosen, manifest, _ = selected_scenarios(settings)
    scenarios = [s for s in chosen if any(k.split("__trial")[0] == s.id for k in saved)]
    known = {s.id for s in scenarios}
    orphans = sorted(k for k in saved if k.split("__trial")[0] not in known)
    if orphans:
        # Said, not dropped silently: "79 announced, 78 rescored" hid one.
        say(f"{len(orphans)} trace(s) have no scenario in the suite and are not rescored: "
            + ", ".join(orphans[:10]) + (" …" if len(orphans) > 10 else ""))
        saved = {k: t for k, t in saved.items() if k not in orphans}
    if not saved:
        raise UsageError(f"{original}/traces holds no trace of a scenario in the suite to rescore")
    say(f"rescoring {len(saved)} trace(s) of {original.name} into run {settings.run_id}")
    judge, _ = await prepare_judge(settings, say)
    writer = open_writer(settings, scenarios, resume=False, extra={RESCORED_FROM: original.name})
    engine = Engine(settings, scenarios, ReplayedConversations(saved, manifest), judge, writer, say=say)
    return await engine.run()


def saved_traces(run_dir: Path) -> dict[str, Trace]:
    """The run's traces by result key, each read by the one trace loader; a trace that cannot
    be read, or whose row names another file than its own, is a UsageError (exit 2)."""
    saved = {}
    for path in sorted((run_dir / "traces").glob("*.json")):
        try:
            trace = read_trace(path)
        except ScorecardError as exc:
            raise UsageError(str(exc)) from None
        if f"{trace.result.key}.json" != path.name:
            # A row id like ../../x would name files outside the new run folder.
            raise UsageError(f"{path}: result.id: does not match the trace's file name; "
                             "delete the trace or re-run its scenario")
        saved[trace.result.key] = trace
    if not saved:
        raise UsageError(f"{run_dir}/traces holds no trace to rescore")
    return saved


def run_to_end(work: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to its end in a new event loop. SIGTERM is treated like Ctrl-C: the work is
    cancelled (sandboxes torn down, unfinished scenarios recorded NOT_RUN) and KeyboardInterrupt
    is raised to the caller. The cluster's runs end the same way."""
    async def main() -> T:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
        try:
            return await work
        except asyncio.CancelledError:
            raise KeyboardInterrupt from None
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    return asyncio.run(main())


def run_blocking(settings: RunSettings, say: Callable[[str], None], resume: bool = False,
                 extra: dict[str, Any] | None = None, progress_stream: TextIO | None = None) -> Scorecard:
    """The run to its end (run_to_end: SIGTERM treated like Ctrl-C)."""
    return run_to_end(run(settings, say, resume, extra, progress_stream))
