"""`trialbox ab`: the same suite on two LLM server builds, interleaved in time by trialbox, and
the driver-build report over the two runs at the end."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO, cast

import typer

from runner.cli._shared import (
    check_baseline,
    check_numbers,
    console,
    exit_codes,
    fail,
    fixtures_root,
    new_run_settings,
    not_measured_reasons,
    resume_with,
    say,
)
from runner.cli.options import RunOptions, spliced, with_run_options
from runner.cli.run import run as run_command
from runner.run.errors import EXIT_INFRA, EXIT_USAGE

if TYPE_CHECKING:
    from runner.run.settings import RunSettings


@dataclass(frozen=True)
class FromRun:
    """The options `ab` shares with `run`, as `run` declares them (runner/cli/run.py: the same
    words, defaults and help; `with_run_flags` takes each declaration from run's signature).
    Each applies to both sides; the gates and --baseline are held against each side's
    scorecard at the end."""

    fixtures: Path | None
    rejudge: int
    budget_usd: float | None
    allow_incomplete: bool
    retry_errors: bool
    baseline: Path | None
    integrity: bool
    not_measured: list[str] | None


def with_run_flags(command: Callable[..., None]) -> Callable[..., None]:
    """The command with `run`'s own declarations of FromRun's fields as its options, in place
    of its one parameter annotated `FromRun`; the command gets them as one object."""
    declared = inspect.signature(run_command).parameters
    taken = [declared[f.name].replace(kind=inspect.Parameter.KEYWORD_ONLY)
             for f in fields(FromRun)]
    return spliced(command, FromRun, taken, lambda values: FromRun(**values))


SpecText = Annotated[str | None, typer.Option(help=(
    "an LLM server build as key=value,…: image=TAG (llm-cpu or Lemonade image), "
    "server=llm-cpu|lemonade, backend=cpu|vulkan|rocm (Lemonade), cpus=N (the container's "
    "CPU limit), or url=http://… (a running server); args=… (llm-cpu's arguments) comes last "
    "and takes the rest of the spec, commas included"))]


@with_run_options
@with_run_flags
def ab(
    ctx: typer.Context,
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
    sessions: Annotated[int | None, typer.Option(min=2, max=16, help=(
        "for a build that needs a reboot (a kernel driver): run the A/B as N sessions (4, 8, "
        "12, 16; or 2), one side each in A B B A, B A A B order, --trials K each; this command "
        "runs session 1, and after each switch `--resume results/<ab_id> --session K` the "
        "next"))] = None,
    session: Annotated[int | None, typer.Option(min=1, max=16, help=(
        "with --resume, on an A/B in sessions: the session to run now (they run in order)"))
    ] = None,
    *,
    shared: FromRun,  # run's own options, declared by run (with_run_flags)
) -> None:
    """Compare two LLM server builds on one suite: A and B behind one front door, their work
    interleaved in balanced blocks (A B B A, B A A B, …) so a drift of the machine falls on
    both alike, then the driver-build report. Exit 0 unless a gate fails."""
    from runner.ab import (
        new_plan,
        parse_spec,
        reopen_failed,
        resumed_plan,
        run_ab,
        session_to_run,
    )
    from runner.run.launch import run_to_end

    check_numbers(timeout=options.timeout, budget_usd=shared.budget_usd,
                  min_pass_rate=min_pass_rate)
    excused = not_measured_reasons(shared.not_measured or [], shared.integrity)
    if shared.baseline is not None:
        check_baseline(shared.baseline)
    if options.llm_server or options.llm_container or options.llm_url != RunOptions.llm_url:
        fail("trialbox ab starts its own two servers from --a and --b; leave out --llm-server, "
             "--llm-url and --llm-container (a running server is url=… in a spec)", EXIT_USAGE)
    if options.backend != "docker":
        fail("trialbox ab needs the docker backend: each sandbox its own address at the front "
             "door, so every request is told apart and forced (drop --backend local)", EXIT_USAGE)
    with exit_codes():
        if resume is not None:
            if a or b or sessions:
                fail("--resume keeps the A/B's own builds and sessions; leave out --a, --b and "
                     "--sessions", EXIT_USAGE)
            settings, plan = resumed_plan(resume)
            if session is not None or plan.sessions is not None:
                session = session_to_run(plan, session)
            resume_with(ctx, settings, {
                "concurrency": options.concurrency, "retry_errors": shared.retry_errors,
                "min_pass_rate": min_pass_rate, "allow_incomplete": shared.allow_incomplete,
                "baseline": shared.baseline, "integrity": shared.integrity,
                "not_measured": excused}, _NOT_SETTINGS, "A/B")
            # In sessions a finished session is not run again: the build it ran on may be
            # gone with the boot; --retry-errors applies to the session being resumed.
            if settings.retry_errors and plan.sessions is None and (
                    reopened := reopen_failed(resume, plan)):
                say(f"--retry-errors: {len(reopened)} finished block(s) run again, each pair "
                    "with an infrastructure failure on one side, its failed units on both sides "
                    "side by side: " + " ".join(str(b.index + 1) for b in reopened))
            folder = resume
        else:
            if shared.retry_errors:
                fail("--retry-errors re-runs an interrupted A/B's infrastructure failures: give "
                     "it with --resume results/<ab_id>", EXIT_USAGE)
            if not a or not b:
                fail("give both builds: --a SPEC --b SPEC (e.g. --a image=trialbox/llm-cpu:dev "
                     "--b image=trialbox/llm-cpu:dev,cpus=1)", EXIT_USAGE)
            if session is not None:
                fail("--session K continues an A/B in sessions: give it with --resume "
                     "results/<ab_id> (a new one, --sessions N, runs session 1)", EXIT_USAGE)
            if sessions is not None and sessions != 2 and sessions % 4:
                fail(f"--sessions {sessions}: give 4, 8, 12 or 16 (A B B A, B A A B, …: each "
                     "side as often early as late), or 2 (A, B: no side runs twice, so every "
                     "speed finding stays marked)", EXIT_USAGE)
            spec_a, spec_b = parse_spec(a, "A"), parse_spec(b, "B")
            settings = new_run_settings(
                # In sessions each side runs --trials K in each of its sessions.
                options, agent_dirs=[], trials=trials * (sessions // 2 if sessions else 1),
                rejudge=shared.rejudge,
                budget_usd=shared.budget_usd, min_pass_rate=min_pass_rate,
                allow_incomplete=shared.allow_incomplete, baseline=shared.baseline,
                integrity=shared.integrity, not_measured=excused,
                repeatable_decoding=repeatable_decoding)
            settings.fixtures_root = fixtures_root(shared.fixtures, settings.suite_paths)
            folder, plan = new_plan(settings, spec_a, spec_b, say, sessions)
            session = 1 if sessions else None
    try:
        with exit_codes():
            result = run_to_end(run_ab(settings, folder, plan, say, session=session,
                                       progress_stream=cast(TextIO, console.file)))
    except KeyboardInterrupt:
        again = f" --session {session}" if session is not None else ""
        say(f"interrupted: what finished is in {folder}; continue with "
            f"`trialbox ab --resume {folder}{again}`")
        raise typer.Exit(EXIT_INFRA) from None
    if result is None:  # a session of several: the next one runs after the switch
        raise typer.Exit(0)
    with exit_codes():
        code = _report(result, settings, warmup)
    raise typer.Exit(code)


#: ab's options that are no setting of the A/B: the builds and sessions (refused beside --resume
#: on their own), the folder, the session to run, and the report's warm-up.
_NOT_SETTINGS = frozenset({"a", "b", "resume", "warmup", "sessions", "session"})


def _report(result: object, settings: RunSettings, warmup: int) -> int:
    """The driver-build report over the two sides, then each side's gates as `run` holds them
    (--min-pass-rate, --integrity, --baseline), each line naming its side: the worse exit code."""
    from runner.ab import AbResult
    from runner.report import driver_report, read_traces, render_driver_md
    from runner.run.finish import baseline_steps, hold_gates

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

        def said(text: str, side: str = side) -> None:
            for line in text.splitlines():
                say(f"{side}: {line}")

        codes.append(baseline_steps(settings, card, hold_gates(card, settings, said), said))
    say(f"A: {a_dir}\nB: {b_dir}\nschedule: {result.folder / 'ab.json'}; again with "
        f"`trialbox compare {a_dir} {b_dir} --report`")
    return max(codes)
