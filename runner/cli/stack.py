"""The stack's commands: `doctor`, `images`, `up`, `down`, `clean`, and `bench` (all of them,
then a run of the default suite)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runner.cli._shared import EVAL, choose_device, console, fail, infra, say
from runner.cli.options import DeviceName, JsonOutput, LlmServerName
from runner.run.errors import EXIT_INFRA, EXIT_USAGE


def doctor(as_json: JsonOutput = False) -> None:
    """Check engine, compose, devices, images, LLM health and judge: each OK or a fix."""
    from runner.stack.doctor import format_checks, healthy, run_checks

    checks = run_checks()
    if as_json:
        import json

        print(json.dumps({"healthy": healthy(checks), "checks": [
            {"name": c.name, "level": getattr(c.level, "value", str(c.level)), "detail": c.detail,
             "fix": c.fix} for c in checks]}, indent=2))
    else:
        say(format_checks(checks))
    raise typer.Exit(0 if healthy(checks) else EXIT_INFRA)


def images() -> None:
    """Build the appliance's images (no registry needed: local base image + wheelhouse)."""
    from runner.run.stack_up import build_images, ensure_engine

    infra(lambda: ensure_engine(say))
    infra(lambda: build_images(console))


def up(device: DeviceName = "auto", llm_server: LlmServerName = None) -> None:
    """Start the LLM server for the device and wait until it is healthy."""
    from runner.run.stack_up import start_llm

    choice = choose_device(device)
    infra(lambda: start_llm(console, choice, llm_server))


def down(device: DeviceName = "auto", llm_server: LlmServerName = None) -> None:
    """Stop the stack (model-cache volumes are kept)."""
    from runner.stack.compose import ComposeError
    from runner.stack.compose import down as stop

    try:
        stop(choose_device(device).device, server=llm_server)
    except ComposeError as exc:
        fail(str(exc), EXIT_INFRA)
    say("stack stopped")


def clean(
    run_id: Annotated[str | None, typer.Option(help="only this run")] = None,
    everything: Annotated[bool, typer.Option("--all", help=(
        "also the shared LLM server (`trialbox up`'s stack) — refused while a run is alive"))] = False,
    results: Annotated[Path, typer.Option(
        help="where run folders are (a live run's lock is looked for)")] = Path("results"),
) -> None:
    """Remove every run's labelled containers, networks and volumes (or one run's); the shared
    stack stays unless --all (or `trialbox down`)."""
    from runner.run.cleanup import cleanup, live_runs, owned_runs

    if run_id is not None and not run_id.strip():
        fail("--run-id is empty: give a run id (results/<run_id>), or leave the flag out to "
             "clean every trialbox run", EXIT_USAGE)
    if everything and run_id is not None:
        fail("--all and --run-id exclude each other: --run-id cleans one run, --all every run "
             "and the shared stack", EXIT_USAGE)
    if run_id is not None and run_id in owned_runs(results):
        fail(f"run {run_id} is alive (its folder {results / run_id} is locked by its owner) — "
             "stop that run first; it removes its own sandboxes when it ends", EXIT_USAGE)
    try:
        alive = live_runs(results_root=results) if everything else []
        # A run whose owner is alive (its folder's lock is held) keeps its sandboxes.
        owned = owned_runs(results) if run_id is None else frozenset()
        report = None if alive else cleanup(run_id, include_stack=everything, keep_runs=owned)
    except Exception as exc:  # noqa: BLE001 — docker unreachable and friends: one line, exit 3
        fail(f"cleanup failed: {type(exc).__name__}: {exc} — is the Docker engine running "
             "(scripts/ensure-docker)?", EXIT_INFRA)
    if report is None:
        fail(f"clean --all: run(s) {', '.join(alive)} are alive and use the shared LLM server "
             "— nothing removed; wait for them to end, or run `trialbox clean` (keeps the stack)",
             EXIT_USAGE)
    say(f"removed {report.removed} labelled object(s)"
        + (f"; kept {len(report.kept)}: the shared stack (`trialbox down` or `trialbox clean "
           "--all` removes it)" + (f" and live run(s) {', '.join(sorted(owned))}" if owned else "")
           if report.kept else ""))


def bench(
    device: DeviceName = "auto",
    llm_server: LlmServerName = None,
    scenario: Annotated[list[str] | None, typer.Option("--scenario", "-s")] = None,
    category: Annotated[list[str] | None, typer.Option()] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=16)] = 1,
    results: Annotated[Path, typer.Option()] = Path("results"),
    in_container: Annotated[bool, typer.Option(
        help="run the engine inside the pinned runner image")] = False,
    allow_device_fallback: Annotated[bool, typer.Option(
        help="run although the LLM server serves on another device than --device asked for")] = False,
) -> None:
    """Everything: engine → images → LLM server → run the default suite → summary."""
    from runner.bench.make_bench import build_corpus, selftest_line
    from runner.cli.run import execute
    from runner.run.llm_server import SESSION_DEVICE
    from runner.run.settings import RunSettings, Selection, new_run_id
    from runner.run.stack_up import build_images, ensure_engine, start_llm

    choice = choose_device(device)
    say(f"device: {choice.device} — {choice.reason}")
    for warning in choice.warnings:
        say(f"warning: {warning}")
    infra(lambda: ensure_engine(say))
    built = infra(lambda: build_images(console))
    infra(lambda: build_corpus(EVAL / "corpus", say))
    container, url = infra(lambda: start_llm(console, choice, llm_server))
    if in_container:
        from runner.bench.make_bench import run_in_runner_container

        selection = [arg for sid in scenario or [] for arg in ("-s", sid)]
        selection += [arg for cat in category or [] for arg in ("--category", cat)]
        selection += ["--concurrency", str(concurrency)]
        selection += ["--allow-device-fallback"] if allow_device_fallback else []
        code = run_in_runner_container(choice.device, container, selection, results,
                                       server=llm_server)
        say(selftest_line([EVAL / "scenarios"], EVAL / "corpus"))
        raise typer.Exit(code)
    settings = RunSettings(
        run_id=new_run_id(), suite_paths=[EVAL / "scenarios"], corpus_root=EVAL / "corpus",
        results_root=results, selection=Selection(ids=scenario or [], categories=category or []),
        device=SESSION_DEVICE[choice.device], stack_device=choice.device, device_reason=choice.reason, llm_url=url,
        llm_container=container, concurrency=concurrency, judge_provider="auto", simulator_mode="auto",
        allow_device_fallback=allow_device_fallback,
    )
    code = execute(settings, extra={"images": built})
    say(selftest_line(settings.suite_paths, settings.corpus_root))
    raise typer.Exit(code)
