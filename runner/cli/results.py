"""The commands that read finished runs: `rescore`, `export inspect`, `calibrate` (the judge),
`compare` two scorecards, and `schema` (the files' JSON Schemas)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from runner.cli._shared import (
    check_urls,
    command_group,
    console,
    env_urls,
    exit_codes,
    fail,
    or_fail,
    say,
    write_exit_code,
)
from runner.cli.options import JsonOutput, JudgeModel, JudgeProvider, JudgeUrl
from runner.run.errors import EXIT_INFRA, EXIT_USAGE
from runner.system.writes import WriteRefused

export_app = command_group("Write a run in another tool's format.")
#: calibrate's --deadline ceiling: a gate of a dozen short questions that has not finished in an
#: hour never will (`--deadline 1e30` waited for ever on a judge that never answered).
MAX_DEADLINE_S = 3600.0
ScorecardPath = Annotated[Path, typer.Argument(help="scorecard (file or run folder), ours or GAIA's")]


def rescore(
    run_dir: Annotated[Path, typer.Argument(help="a finished or partial run folder")],
    judge_provider: JudgeProvider = "auto",
    judge_model: JudgeModel = None,
    judge_url: JudgeUrl = None,
    results: Annotated[Path | None, typer.Option(help="results root [default: beside RUN_DIR]")] = None,
    rejudge: Annotated[int, typer.Option(
        min=1, max=20, help="judge each saved transcript K times and report judge agreement (κ)")] = 1,
) -> None:
    """Judge a run's saved transcripts again with another judge, into a new run folder."""
    import asyncio

    from runner.run.finish import report_and_gate
    from runner.run.launch import rescore as replay
    from runner.run.resume import resume_settings
    from runner.run.settings import new_run_id

    check_urls(("--judge-url", judge_url))
    if judge_provider == "none" and (judge_url or judge_model):
        fail("--judge-provider none judges nothing, so --judge-url/--judge-model would be "
             "ignored; drop them or choose a judge", EXIT_USAGE)
    original = or_fail(lambda: resume_settings(run_dir))
    settings = original.model_copy(update={
        "run_id": new_run_id(), "results_root": results or run_dir.parent, "judge_provider": judge_provider,
        "judge_model": judge_model, "judge_url": judge_url, "simulator_mode": "scripted", "rejudge": rejudge,
    })
    try:
        with exit_codes():
            card = asyncio.run(replay(run_dir, settings, say))
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted[/]: partial rescore in {settings.run_dir}", soft_wrap=True)
        raise typer.Exit(EXIT_INFRA) from None
    # A rescore keeps the run's --min-pass-rate (run.json), so it says which rate decided too.
    raise typer.Exit(report_and_gate(card, settings, say))


@export_app.command("inspect")
def export_inspect(
    run_dir: Annotated[Path, typer.Argument(help="a run folder (results/<run_id>)")],
    out: Annotated[Path | None, typer.Option(
        "--out", help="folder for <run_id>.eval [default: RUN_DIR/inspect.eval]")] = None,
) -> None:
    """Write the run as an inspect_ai eval log, for `inspect view` (needs trialbox[inspect])."""
    from rich.markup import escape

    from runner.report import InspectUnavailable, export_run

    try:
        path = export_run(run_dir, out)
    except WriteRefused as exc:
        fail(escape(str(exc)), write_exit_code(exc))
    except (InspectUnavailable, FileNotFoundError, ValueError) as exc:
        fail(escape(str(exc)), EXIT_USAGE)  # escape: rich would eat "[inspect]" as markup
    say(f"wrote {path} — open it with: inspect view --log-dir {path.parent}")


def calibrate(
    judge_provider: Annotated[str, typer.Option(help="anthropic | openai")] = "auto",
    judge_model: JudgeModel = None,
    judge_url: JudgeUrl = None,
    deadline: Annotated[float, typer.Option(help="seconds")] = 120.0,
) -> None:
    """Run only the calibration gate: exit 0 calibrated, 1 failed, 2 configuration error (no
    judge at the address), 3 the judge's server refused us, failed or sent no answer (no
    verdict on the model)."""
    import asyncio

    from runner.judge import (
        JudgeCache,
        JudgeServerError,
        JudgeUnavailable,
        JudgeUnreachable,
        ProviderConfigError,
        from_env_and_flags,
        make_judge,
    )
    from runner.judge import calibrate as gate

    if not (math.isfinite(deadline) and 0 < deadline <= MAX_DEADLINE_S):
        fail(f"--deadline {deadline}: give a number of seconds above 0 and at most "
             f"{MAX_DEADLINE_S:g}", EXIT_USAGE)
    check_urls(("--judge-url", judge_url), *env_urls())
    try:
        choices = from_env_and_flags(judge=None if judge_provider == "auto" else judge_provider,
                                     judge_model=judge_model, judge_url=judge_url)
        judge = make_judge(choices.judge, JudgeCache(choices.judge.cache_dir))
    except ProviderConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    if judge is None:
        fail(f"no judge to calibrate — {choices.judge_reason}", EXIT_USAGE)
    say(f"judge: {choices.judge_reason}")
    try:
        report = asyncio.run(gate(judge, deadline))
    except JudgeUnreachable as exc:  # nothing at that address: the flags, not the server
        fail(f"calibration could not run: {exc}", EXIT_USAGE)
    except (JudgeUnavailable, JudgeServerError) as exc:  # the server, not the model: no verdict
        fail(f"calibration could not run: {exc}", EXIT_INFRA)
    except Exception as exc:  # noqa: BLE001 — an unreachable judge is a configuration error
        fail(f"calibration could not run: {type(exc).__name__}: {exc}", EXIT_USAGE)
    say(str(report))
    # The gate never reads the judge cache: what it vouches for is the server answering now.
    say(f"{report.requests} question(s) asked live (calibration never reads the judge cache)")
    raise typer.Exit(0 if report.passed else 1)


def compare(
    baseline: ScorecardPath,
    current: ScorecardPath,
    report: Annotated[bool, typer.Option(
        help="add the driver-build report: speed deltas paired by scenario with cluster-bootstrap "
             "intervals, quality with McNemar's exact test, Benjamini–Hochberg over both")] = False,
    html: Annotated[Path | None, typer.Option(help="write the driver-build report as HTML here")] = None,
    warmup: Annotated[int, typer.Option(
        min=0, help="driver-build report: discard the speed figures of each run's first N "
                    "scenario runs (recorded in the report)")] = 0,
    allow_device_mismatch: Annotated[bool, typer.Option(
        help="driver-build report: compare even when a run served on another device than it "
             "asked for")] = False,
    require_complete: Annotated[bool, typer.Option(
        help="a scenario of the baseline that is missing or unmeasured is a regression")] = False,
    aa: Annotated[list[Path] | None, typer.Option(
        "--aa", help="driver-build report: an A/A pair (the same build run twice on this "
                     "machine), given twice; its intervals bound the drift a back-to-back "
                     "A/B's findings must exceed")] = None,
    as_json: JsonOutput = False,
) -> None:
    """Compare two scorecards (ours or GAIA's, either side).

    Exit 0 no regression, 1 regression, 2 unreadable input or usage, 3 the agent or judge
    models differ. (GAIA's compare exits 2 on a regression; trialbox keeps 2 for bad input.)
    """
    import json

    from runner.report import (
        ScorecardError,
        atomic_write,
        driver_report,
        read_any_scorecard,
        read_traces,
        render_driver_html,
        render_driver_md,
    )
    from runner.report import compare as diff
    from runner.system.writes import check_destination

    if html is not None:  # refused before any result is printed: "exit 0" then exit 2 misleads
        with exit_codes():
            check_destination(html)
    if aa and len(aa) != 2:
        fail(f"--aa: {len(aa)} scorecard(s) given; an A/A pair is two runs of the same build "
             "(--aa FIRST --aa SECOND)", EXIT_USAGE)
    if aa and not (report or html):
        fail("--aa bounds the driver-build report's drift: add --report or --html", EXIT_USAGE)
    try:
        old, new = read_any_scorecard(baseline), read_any_scorecard(current)
        pair = (read_any_scorecard(aa[0]), read_any_scorecard(aa[1])) if aa else None
        result = diff(old, new, require_complete=require_complete)
        driver = (driver_report(old, new, read_traces(baseline), read_traces(current),
                                warmup=warmup, allow_device_mismatch=allow_device_mismatch,
                                aa=pair)
                  if report or html else None)
    except (ScorecardError, FileNotFoundError, ValueError) as exc:
        fail(str(exc), EXIT_USAGE)
    # Written before the verdict is printed: a disk that fills under the report must not
    # follow "no regression (exit 0)" with an error and exit 3, which reads as two answers.
    if driver is not None and html is not None:
        with exit_codes():
            atomic_write(html, render_driver_html(driver))
    if as_json:
        payload = json.loads(result.model_dump_json())
        if driver is not None:
            payload["driver_report"] = json.loads(driver.model_dump_json())
        print(json.dumps(payload, indent=2))
    else:
        say(result.render())
        if driver is not None and report:
            say(render_driver_md(driver))
        if driver is not None and html is not None:
            say(f"driver-build report: {html}")
    raise typer.Exit(result.exit_code)


def schema(dest: Annotated[Path, typer.Argument()] = Path("runner/report/schemas")) -> None:
    """Export the JSON Schemas of every file trialbox writes."""
    from runner.run.schemas import export_schemas

    with exit_codes():
        written = export_schemas(dest)
    for path in written:
        say(str(path))
