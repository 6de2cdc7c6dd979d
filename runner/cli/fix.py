"""`trialbox fix`: parse the fixer's options, check its image, then run → fix → re-run → compare.

Exit codes as every trialbox command: 0 the loop reached the target pass rate (or nothing
fails), 1 it ended below the target, 2 usage or configuration error, 3 infrastructure failure.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from runner.cli._shared import check_numbers, exit_codes, fail, new_run_settings, or_fail, say
from runner.cli.options import RunOptions, with_run_options
from runner.run.errors import EXIT_INFRA, EXIT_OK, EXIT_QUALITY, EXIT_USAGE

if TYPE_CHECKING:  # for the annotations only: the functions import their machinery when called
    from runner.fix import FixerOptions, FixerSpec, Scope
    from runner.run.settings import RunSettings


@with_run_options
def fix_command(
    options: RunOptions,
    agent_dir: Annotated[Path | None, typer.Option(
        help="the folder of GAIA agents (<id>/agent.py) to run and to patch — only ever read "
             "[default with --from: the run's one --agent-dir]")] = None,
    from_run: Annotated[Path | None, typer.Option(
        "--from", help="start from this finished run (RUN_DIR) instead of phase A")] = None,
    scope: Annotated[str, typer.Option(
        help="agent: the agent directory; gaia: also GAIA's package source")] = "agent",
    fixer: Annotated[str, typer.Option(help="command | claude-code | openai")] = "command",
    fixer_cmd: Annotated[str | None, typer.Option(
        help="--fixer command: run with sh -c in /workspace; a host file as first word is "
             "copied in")] = None,
    fixer_model: Annotated[str | None, typer.Option(
        help="the fixer's model (openai: required; claude-code: --model)")] = None,
    fixer_url: Annotated[str | None, typer.Option(
        help="the fixer's model endpoint: the only host:port the fix sandbox reaches "
             "(http://llm:13305/api/v1 = the stack's own LLM server)")] = None,
    max_iterations: Annotated[int, typer.Option(
        min=1, max=20, help="fix → re-run iterations at most")] = 3,
    target_pass_rate: Annotated[float, typer.Option(
        help="stop when this rate (0-1) is reached")] = 0.90,
    fixer_timeout: Annotated[float, typer.Option(help="seconds one fixer run may take")] = 1800.0,
    fixer_budget_usd: Annotated[float, typer.Option(help="claude-code: dollars per iteration")] = 2.0,
    fixer_max_steps: Annotated[int, typer.Option(
        min=1, max=500, help="openai: model calls per iteration")] = 30,
) -> None:
    """Repair failing scenarios in an isolated fix sandbox: run → fix → re-run → compare; the
    agent directory is never written, the result is a patch under results/<run>/fix/."""
    from runner.fix import FixerConfigError, FixerOptions, fixer_spec
    from runner.run.resume import resume_settings

    if not (0.0 <= target_pass_rate <= 1.0):
        fail(f"--target-pass-rate {target_pass_rate}: give a rate between 0 and 1 (0.9 = 90%)", EXIT_USAGE)
    if not (math.isfinite(fixer_timeout) and fixer_timeout > 0):
        fail(f"--fixer-timeout {fixer_timeout}: give a number of seconds greater than 0", EXIT_USAGE)
    if not (math.isfinite(fixer_budget_usd) and fixer_budget_usd > 0):
        fail(f"--fixer-budget-usd {fixer_budget_usd}: give a dollar amount greater than 0", EXIT_USAGE)
    chosen_scope: Scope
    match scope:
        case "agent" | "gaia":
            chosen_scope = scope
        case _:
            fail(f"--scope {scope!r}: choose agent or gaia", EXIT_USAGE)
    fixer_options = FixerOptions(kind=fixer, command=fixer_cmd, model=fixer_model, url=fixer_url,
                                 budget_usd=fixer_budget_usd, max_steps=fixer_max_steps)
    try:
        spec = fixer_spec(fixer_options)
    except (FixerConfigError, ValueError, RuntimeError) as exc:
        fail(str(exc), EXIT_USAGE)
    if from_run is not None:
        settings = or_fail(lambda: resume_settings(from_run))
        if agent_dir is None:
            if len(settings.agent_dirs) != 1:
                fail(f"--from {from_run}: the run had {len(settings.agent_dirs)} --agent-dir folder(s); "
                     "name the one to patch with --agent-dir DIR", EXIT_USAGE)
            agent_dir = settings.agent_dirs[0]
        settings.agent_dirs = [agent_dir]
    else:
        if agent_dir is None:
            fail("--agent-dir DIR is required: the folder of GAIA agents (<id>/agent.py) to run and patch", EXIT_USAGE)
        check_numbers(timeout=options.timeout)
        settings = new_run_settings(options, agent_dirs=[agent_dir])
    if not agent_dir.is_dir():
        fail(f"--agent-dir {agent_dir}: no such folder (give the folder holding <id>/agent.py)", EXIT_USAGE)
    if chosen_scope == "gaia" and (agent_dir / "gaia_src").exists():
        fail(f"--scope gaia: {agent_dir}/gaia_src exists, but that is where GAIA's source goes in "
             "/workspace; rename that folder or use --scope agent", EXIT_USAGE)
    _preflight(fixer)
    with exit_codes():
        code = run_fix(settings, agent_dir, chosen_scope, fixer_options, spec, max_iterations,
                       target_pass_rate, fixer_timeout, from_run, say)
    raise typer.Exit(code)


def _preflight(fixer: str) -> None:
    """The fixer image (with Claude Code for claude-code) must exist before phase A spends time."""
    from runner.fix import FIXER_IMAGE
    from runner.stack.fixer_image import image_has_claude
    from runner.stack.images import ImageBuildError, image_exists

    try:
        if not image_exists(FIXER_IMAGE):
            fail(f"image {FIXER_IMAGE} is missing — build it with `trialbox images`", EXIT_INFRA)
        if fixer == "claude-code" and image_has_claude(FIXER_IMAGE) is None:
            fail(f"{FIXER_IMAGE} was built without Claude Code — rebuild it with "
                 "`TRIALBOX_FIXER_CLAUDE=1 trialbox images`", EXIT_USAGE)
    except ImageBuildError as exc:
        fail(str(exc), EXIT_INFRA)


def run_fix(settings: RunSettings, agent_dir: Path, scope: Scope, options: FixerOptions, spec: FixerSpec,
            max_iterations: int, target_pass_rate: float, fixer_timeout: float, from_run: Path | None,
            say: Callable[[str], None]) -> int:
    """Phase A (unless --from), then the loop; returns the exit code."""
    from runner.fix import FixLoop, FixPlan, FixSandbox, check_imports, gaia_source
    from runner.run.backend import agent_ui_image
    from runner.run.launch import run_blocking
    from runner.sandbox.docker import AGENT_UI_IMAGE

    started = time.perf_counter()
    if from_run is None:
        say(f"phase A: running the selection with {agent_dir}")
        run_blocking(settings, say)
        run_dir = settings.run_dir
    else:
        run_dir = from_run
    phase_a = time.perf_counter() - started
    # The GAIA the sandboxes ran (--gaia SPEC builds its own image; up to date after phase A).
    image = agent_ui_image(settings, say)[0] or AGENT_UI_IMAGE
    # The run's own id: `trialbox clean --run-id <run>` sweeps the fix sandboxes and their rules too.
    label = run_dir.resolve().name
    plan = FixPlan(agent_dir=agent_dir, scope=scope, fixer=options, max_iterations=max_iterations,
                   target_pass_rate=target_pass_rate, fixer_timeout_s=fixer_timeout, gaia_image=image)
    loop = FixLoop(plan, settings, run_dir, say,
                   run_phase=lambda s: run_blocking(s, say),
                   sandbox=FixSandbox(label, llm_container=settings.llm_container),
                   import_check=lambda tree, files: check_imports(tree, files, image, label),
                   gaia_tree=lambda dest: gaia_source(image, dest, label), spec=spec)
    report = loop.run(phase_a_s=phase_a)
    say((run_dir / "fix" / "summary.md").read_text(encoding="utf-8"))
    say(f"fix results: {run_dir / 'fix'}/ (summary.md, fix.json, final.patch, iter-N/)")
    best = next((it for it in report.iterations if it.iteration == report.best_iteration), None)
    final = best.pass_rate if best is not None else report.baseline_pass_rate
    reached = final is not None and final >= target_pass_rate
    return EXIT_OK if reached or report.stop_reason == "nothing fails" else EXIT_QUALITY
