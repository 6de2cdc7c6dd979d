"""`trialbox run` (new, resumed, or on a cluster): parse the options, start the run, map its
failures to exit codes and print; `execute` does the same for `selftest --live` and `bench`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO, cast

import typer

from runner.cli._shared import (
    check_baseline,
    check_numbers,
    check_urls,
    console,
    env_urls,
    exit_codes,
    fail,
    fixtures_root,
    new_run_settings,
    not_measured_reasons,
    or_fail,
    progress_to_stderr,
    resume_with,
    say,
)
from runner.cli.options import RunOptions, with_run_options
from runner.run.errors import EXIT_INFRA, EXIT_USAGE

if TYPE_CHECKING:
    from runner.run.settings import RunSettings


@with_run_options
def run(
    ctx: typer.Context,
    options: RunOptions,
    agent_dir: Annotated[list[Path] | None, typer.Option(
        help="a folder of GAIA agents (<id>/agent.py), mounted read-only into every sandbox "
             "(repeatable)")] = None,
    target_url: Annotated[str | None, typer.Option(
        help="attach to an Agent UI that is already running (its MCP bridge URL): no sandbox, "
             "no isolation")] = None,
    fixtures: Annotated[Path | None, typer.Option(
        help="the fixture tree whose folders scenarios stage at ~/gaia-eval/<folder>/ (GAIA's "
             "FIXTURE-SYNC comments, setup.notes) [default: tests/fixtures/gaia of the "
             "scenarios' repository, when there is one]")] = None,
    warm_pool: Annotated[bool, typer.Option(
        help="start the next sandboxes (up to concurrency + 1) while scenarios run")] = True,
    trials: Annotated[int, typer.Option(min=1, max=50, help="run each scenario K times")] = 1,
    rejudge: Annotated[int, typer.Option(min=1, max=20, help="judge each transcript K times")] = 1,
    budget_usd: Annotated[float | None, typer.Option(
        help="judge spend allowed per scenario (USD, ≥ 0)")] = None,
    min_pass_rate: Annotated[float | None, typer.Option(
        help="exit 1 below this rate (0-1) of what was decided: the judged pass rate, or without "
             "a judge the checks pass rate")] = None,
    allow_incomplete: Annotated[bool, typer.Option(
        "--allow-incomplete/--require-complete",
        help="--min-pass-rate: leave out scenarios without a verdict (TIMEOUT, ERRORED, "
             "INFRA_ERROR, SKIPPED_*, ...) instead of counting them as not passed "
             "(--require-complete, the default)")] = False,
    resume: Annotated[Path | None, typer.Option(
        help="continue RUN_DIR under its original settings")] = None,
    retry_errors: Annotated[bool, typer.Option(
        help="with --resume: also re-run infrastructure failures (INFRA_ERROR, TIMEOUT, "
             "SETUP_ERROR, ERRORED)")] = False,
    allow_model_change: Annotated[bool, typer.Option(
        help="with --resume: go on although the LLM server now serves another model")] = False,
    allow_device_fallback: Annotated[bool, typer.Option(
        help="run although the LLM server serves on another device than --device asked for "
        "(the headline says so); without it such a run stops before any scenario, exit 3")] = False,
    repeatable_decoding: Annotated[bool, typer.Option(
        help="for speed comparisons: the LLM's front door forces greedy decoding and a fixed seed "
        "on each sandbox's chat requests, so trials repeat the same conversation (quality "
        "verdicts are then not the agent's sampled behaviour); docker backend only")] = False,
    baseline: Annotated[Path | None, typer.Option(
        help="compare against this scorecard (ours or GAIA's) when the run ends")] = None,
    integrity: Annotated[bool, typer.Option(
        help="GAIA main's integrity gate: exit 1 when a --baseline scenario has no row or any "
             "row has no measurement (TIMEOUT, ERRORED, SKIPPED_*, BLOCKED, ...)")] = False,
    not_measured: Annotated[list[str] | None, typer.Option(
        "--not-measured", help="with --integrity: ID=REASON — a scenario id or category this "
                               "machine cannot measure; its rows are reported with the reason, "
                               "not counted (repeatable)")] = None,
    save_baseline: Annotated[Path | None, typer.Option(
        help="save the finished scorecard (+ meta.json) here as a baseline")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="progress on stderr; on stdout one JSON object: run folder, exit code, "
                       "summary")] = False,
    cluster: Annotated[str | None, typer.Option(
        envvar="TRIALBOX_CLUSTER",
        help="Ray cluster address: each scenario runs on a node with a free slot (never saved)")] = None,
    on: Annotated[list[str] | None, typer.Option(
        "--on", help="with --cluster: only nodes matching KEY=VALUE (device, fingerprint, driver, "
                     "node)")] = None,
    per_node: Annotated[bool, typer.Option(
        help="with --cluster: the whole selection once per matching node, plus the driver-build "
             "comparison")] = False,
) -> None:
    """Run scenarios against the GAIA Agent UI, judge them and write results/<run_id>/."""
    from runner.run.resume import resume_settings

    check_numbers(timeout=options.timeout, budget_usd=budget_usd, min_pass_rate=min_pass_rate)
    excused = not_measured_reasons(not_measured or [], integrity)
    check_urls(("--judge-url", options.judge_url), ("--simulator-url", options.simulator_url),
               ("--llm-url", options.llm_url), ("--target-url", target_url), *env_urls())
    if baseline is not None:
        check_baseline(baseline)
    if resume is not None:
        settings = or_fail(lambda: resume_settings(resume))
        resume_with(ctx, settings, {
            "concurrency": options.concurrency, "warm_pool": warm_pool,
            "retry_errors": retry_errors, "min_pass_rate": min_pass_rate,
            "allow_incomplete": allow_incomplete, "baseline": baseline,
            "save_baseline": save_baseline, "integrity": integrity, "not_measured": excused},
            _NOT_RUN_SETTINGS, "run")
        settings.allow_model_change = allow_model_change
        settings.allow_device_fallback = allow_device_fallback or settings.allow_device_fallback
    else:
        if retry_errors or allow_model_change:
            fail(f"{'--retry-errors' if retry_errors else '--allow-model-change'} only makes sense "
                 "with --resume RUN_DIR", EXIT_USAGE)
        settings = new_run_settings(
            options, agent_dirs=agent_dir or [], target_url=target_url, warm_pool=warm_pool,
            trials=trials, rejudge=rejudge, budget_usd=budget_usd, min_pass_rate=min_pass_rate,
            allow_incomplete=allow_incomplete, baseline=baseline, save_baseline=save_baseline,
            allow_device_fallback=allow_device_fallback, repeatable_decoding=repeatable_decoding,
            integrity=integrity, not_measured=excused)
        settings.fixtures_root = fixtures_root(fixtures, settings.suite_paths)
    if as_json:
        progress_to_stderr()
    if cluster:
        raise typer.Exit(_run_on_cluster(settings, cluster, on or [], per_node, resume is not None))
    if on or per_node:
        fail("--on and --per-node need --cluster ADDRESS (or TRIALBOX_CLUSTER)", EXIT_USAGE)
    code = execute(settings, resume=resume is not None)
    if as_json:
        _print_run_json(settings, code)
    raise typer.Exit(code)


#: Options of `run` that are not settings of the run (how this invocation reports, where it runs).
_NOT_RUN_SETTINGS = frozenset({"resume", "as_json", "cluster", "on", "per_node", "allow_model_change",
                               "allow_device_fallback"})


def execute(settings: RunSettings, resume: bool = False, extra: dict[str, Any] | None = None) -> int:
    """Run and print the summary; map every failure to its exit code with one clear message."""
    from docker.errors import DockerException

    from runner.run.finish import finish
    from runner.run.launch import run_blocking

    try:
        with exit_codes():
            card = run_blocking(settings, say, resume=resume, extra=extra,
                                # rich types Console.file as IO[str]; it is the terminal's text stream
                                progress_stream=cast(TextIO, console.file))
    except KeyboardInterrupt:
        run_dir = settings.run_dir
        console.print(f"[yellow]interrupted[/]: partial scorecard in {run_dir}; continue with "
                      f"`trialbox run --resume {run_dir}`", soft_wrap=True)
        return EXIT_INFRA
    except DockerException as exc:  # the engine went away (e.g. during --resume's sweep)
        fail(f"the Docker engine could not be reached ({type(exc).__name__}: "
             f"{str(exc).splitlines()[0] if str(exc) else exc}) — start it "
             "(scripts/ensure-docker), then run again", EXIT_INFRA)
    except OSError as exc:
        # Disk full, folder removed mid-run: every result finished before is already on disk
        # (each trace is written the moment its scenario ends).
        run_dir = settings.run_dir
        fail(f"results could not be written ({exc.strerror or exc}); what finished is in "
             f"{run_dir} — free space, then `trialbox run --resume {run_dir}`", EXIT_INFRA)
    with exit_codes():
        return finish(card, settings, say)


def _run_on_cluster(settings: RunSettings, address: str, on: list[str], per_node: bool,
                    resume: bool) -> int:
    """`run --cluster`: the same plan, each job placed on a node (runner/cluster)."""
    try:
        from runner.cluster import (
            ClusterError,
            parse_on,
            run_blocking,
            run_on_cluster,
            run_per_node,
        )
    except ModuleNotFoundError as exc:
        if exc.name != "ray":
            raise
        fail(str(exc), EXIT_USAGE)
    from runner.run.finish import finish
    from runner.run.gate import exit_code

    try:
        with exit_codes():
            selector = parse_on(on)
            if per_node:
                from runner.report import read_scorecard

                result = run_blocking(run_per_node(settings, address, selector, say, resume=resume))
                codes = [EXIT_INFRA] if result.left else []  # a node's run could not continue
                for node_run in result.runs:
                    run_dir = settings.results_root / node_run.run_id
                    codes.append(exit_code(read_scorecard(run_dir / "scorecard.json"),
                                           settings.min_pass_rate, settings.allow_incomplete))
                    say(f"node {node_run.node.name}: {run_dir}")
                for report in result.comparisons:
                    say(f"driver-build comparison: {report}")
                return max(codes, default=EXIT_USAGE)
            card = run_blocking(run_on_cluster(settings, address, selector, say, resume=resume))
    except ClusterError as exc:
        fail(str(exc), EXIT_USAGE)
    except KeyboardInterrupt:
        run_dir, again = settings.run_dir, " --per-node" if per_node else ""
        say(f"interrupted: partial scorecard in {run_dir}; continue with `trialbox run --resume "
            f"{run_dir} --cluster ADDRESS{again}` (or TRIALBOX_CLUSTER)")
        return EXIT_INFRA
    except OSError as exc:  # as execute: what finished is on disk already
        run_dir, again = settings.run_dir, " --per-node" if per_node else ""
        fail(f"results could not be written ({exc.strerror or exc}); what finished is in "
             f"{run_dir} — free space, then `trialbox run --resume {run_dir} --cluster ADDRESS{again}`",
             EXIT_INFRA)
    with exit_codes():
        return finish(card, settings, say)


def _print_run_json(settings: RunSettings, code: int) -> None:
    """--json: the run folder, the exit code and the summary as one JSON object on stdout."""
    import json

    run_dir = settings.run_dir
    card = run_dir / "scorecard.json"
    summary = json.loads(card.read_text(encoding="utf-8"))["summary"] if card.is_file() else None
    print(json.dumps({"run_dir": str(run_dir), "exit_code": code, "summary": summary}, indent=2))
