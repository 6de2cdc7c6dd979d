"""`trialbox ab`: the same suite on two LLM server builds, interleaved in time by trialbox, and
the driver-build report over the two runs at the end."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, TextIO, cast

import typer

from runner.cli._shared import (
    check_numbers,
    console,
    exit_codes,
    fail,
    new_run_settings,
    say,
)
from runner.cli.options import RunOptions, with_run_options
from runner.run.errors import EXIT_INFRA, EXIT_USAGE

SpecText = Annotated[str | None, typer.Option(help=(
    "an LLM server build as key=value,…: image=TAG (llm-cpu or Lemonade image), "
    "server=llm-cpu|lemonade, backend=cpu|vulkan|rocm (Lemonade), cpus=N (the container's "
    "CPU limit), or url=http://… (a running server); args=… (llm-cpu's arguments) comes last "
    "and takes the rest of the spec, commas included"))]


@with_run_options
def ab(
    options: RunOptions,
    a: Annotated[str | None, typer.Option("--a", help="side A's build (see --b)")] = None,
    b: SpecText = None,
    trials: Annotated[int, typer.Option(min=1, max=50, help=(
        "run each scenario K times on each side"))] = 2,
    repeatable_decoding: Annotated[bool, typer.Option(help=(
        "the front door forces greedy decoding and one seed on every chat request, so a "
        "trial repeats the same conversation on both sides"))] = True,
    min_pass_rate: Annotated[float | None, typer.Option(help=(
        "exit 1 when either side's decided pass rate is below this (0-1)"))] = None,
    warmup: Annotated[int, typer.Option(min=0, help=(
        "discard the speed figures of each side's first N scenario runs"))] = 0,
    resume: Annotated[Path | None, typer.Option(help=(
        "continue an interrupted A/B: its folder (results/<ab_id>)"))] = None,
) -> None:
    """Compare two LLM server builds on one suite: A and B behind one front door, their work
    interleaved in balanced blocks (A B B A, B A A B, …) so a drift of the machine falls on
    both alike, then the driver-build report. Exit 0 unless a gate fails."""
    from runner.ab import new_plan, parse_spec, resumed_plan, run_ab
    from runner.run.launch import run_to_end

    check_numbers(timeout=options.timeout, min_pass_rate=min_pass_rate)
    if options.llm_server or options.llm_container or options.llm_url != RunOptions.llm_url:
        fail("trialbox ab starts its own two servers from --a and --b; leave out --llm-server, "
             "--llm-url and --llm-container (a running server is url=… in a spec)", EXIT_USAGE)
    if options.backend != "docker":
        fail("trialbox ab needs the docker backend: each sandbox its own address at the front "
             "door, so every request is told apart and forced (drop --backend local)", EXIT_USAGE)
    with exit_codes():
        if resume is not None:
            if a or b:
                fail("--resume keeps the A/B's own builds; leave out --a and --b", EXIT_USAGE)
            settings, plan = resumed_plan(resume)
            folder = resume
        else:
            if not a or not b:
                fail("give both builds: --a SPEC --b SPEC (e.g. --a image=trialbox/llm-cpu:dev "
                     "--b image=trialbox/llm-cpu:dev,cpus=1)", EXIT_USAGE)
            spec_a, spec_b = parse_spec(a, "A"), parse_spec(b, "B")
            settings = new_run_settings(options, agent_dirs=[], trials=trials,
                                        min_pass_rate=min_pass_rate,
                                        repeatable_decoding=repeatable_decoding)
            folder, plan = new_plan(settings, spec_a, spec_b, say)
    try:
        with exit_codes():
            result = run_to_end(run_ab(settings, folder, plan, say,
                                       progress_stream=cast(TextIO, console.file)))
    except KeyboardInterrupt:
        say(f"interrupted: what finished is in {folder}; continue with "
            f"`trialbox ab --resume {folder}`")
        raise typer.Exit(EXIT_INFRA) from None
    raise typer.Exit(_report(result, settings.min_pass_rate, settings.allow_incomplete, warmup))


def _report(result: object, min_pass_rate: float | None, allow_incomplete: bool,
            warmup: int) -> int:
    """The driver-build report over the two sides, and the exit code of the worse side."""
    from runner.ab import AbResult
    from runner.report import driver_report, read_traces, render_driver_md
    from runner.run.gate import exit_code, quality_gate_line

    assert isinstance(result, AbResult)
    a_dir, b_dir = result.run_dir("A"), result.run_dir("B")
    try:
        report = driver_report(result.cards["A"], result.cards["B"], read_traces(a_dir),
                               read_traces(b_dir), warmup=warmup)
    except ValueError as exc:
        fail(f"the driver-build report could not be drawn: {exc}", EXIT_USAGE)
    say(render_driver_md(report))
    codes = []
    for side in ("A", "B"):
        card = result.cards[side]
        if min_pass_rate is not None:
            say(f"{side}: {quality_gate_line(card, min_pass_rate, allow_incomplete)}")
        codes.append(exit_code(card, min_pass_rate, allow_incomplete))
    say(f"A: {a_dir}\nB: {b_dir}\nschedule: {result.folder / 'ab.json'}; again with "
        f"`trialbox compare {a_dir} {b_dir} --report`")
    return max(codes)
