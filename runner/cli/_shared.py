"""What every command group shares: the console, `say` and `fail`, the checks of typed input, and
a new run's settings built from the options `run` and `fix` share."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer
from rich.console import Console

from runner.cli.options import RunOptions
from runner.run.errors import EXIT_INFRA, EXIT_USAGE, InfraError, UsageError
from runner.system.paths import eval_root
from runner.system.writes import WriteRefused

if TYPE_CHECKING:
    from runner.run.settings import RunSettings
    from runner.stack.hardware import DeviceChoice

T = TypeVar("T")

EVAL = eval_root()
console = Console(highlight=False)


def command_group(help: str, **settings: Any) -> typer.Typer:
    """A typer app (the top one or a group) whose help is plain text: click wraps it to the
    terminal and never cuts an option's name, and brackets ([cluster], [default: …]) stay."""
    return typer.Typer(no_args_is_help=True, rich_markup_mode=None, help=help, **settings)


def fail(message: str, code: int) -> NoReturn:
    """Print the message as an error and end the command with the exit code."""
    console.print(f"[bold red]error:[/] {message}", soft_wrap=True)
    raise typer.Exit(code)


def say(line: str) -> None:
    """Print one line as it is (no markup)."""
    # soft_wrap: a log (stdout not a terminal) gets whole lines, never a sentence cut at 80.
    console.print(line, markup=False, soft_wrap=True)


def progress_to_stderr() -> None:
    """--json: stdout carries only the JSON result, so progress and the summary go to stderr."""
    console.stderr = True


@contextmanager
def exit_codes() -> Iterator[None]:
    """A refusal (UsageError) ends the command with exit 2, an infrastructure failure
    (InfraError) with exit 3, a write refused (WriteRefused) with either; each prints its
    message."""
    try:
        yield
    except UsageError as exc:
        fail(str(exc), EXIT_USAGE)
    except InfraError as exc:
        fail(str(exc), EXIT_INFRA)
    except WriteRefused as exc:
        fail(str(exc), write_exit_code(exc))


def write_exit_code(exc: WriteRefused) -> int:
    """A full or failing disk is the machine's (exit 3); a place that cannot take the file is
    the user's choice (exit 2)."""
    return EXIT_INFRA if exc.infrastructure else EXIT_USAGE


def or_fail(make: Callable[[], T]) -> T:
    """What make returns; a UsageError ends the command with exit 2."""
    try:
        return make()
    except UsageError as exc:
        fail(str(exc), EXIT_USAGE)


def infra(step: Callable[[], T]) -> T:
    """What step returns; an InfraError ends the command with exit 3, a UsageError (a choice
    the step refuses, e.g. a server the device cannot have) with exit 2."""
    try:
        return step()
    except InfraError as exc:
        fail(str(exc), EXIT_INFRA)
    except UsageError as exc:
        fail(str(exc), EXIT_USAGE)


def suite_and_corpus(paths: list[Path] | None, corpus: Path | None) -> tuple[list[Path], Path]:
    """The scenario paths (default: our suite) and their corpus: --corpus wins, else the corpus
    GAIA's layout puts beside the tree."""
    from runner.scenarios import CorpusNotFound, find_corpus

    chosen = paths or [EVAL / "scenarios"]
    if corpus is not None:
        return chosen, corpus
    try:
        return chosen, find_corpus(chosen)
    except CorpusNotFound as exc:
        fail(str(exc), EXIT_USAGE)


def check_urls(*flags: tuple[str, str | None]) -> None:
    """A URL the user typed, checked before any client is built from it: `http://[::1`
    otherwise surfaces as a traceback deep in httpx, and `ftp://…` as one error per request."""
    from urllib.parse import urlsplit

    from runner.system.urls import shown_url

    for flag, url in flags:
        if url is None:
            continue
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 — raises ValueError for a port that is not a number
        except ValueError as exc:
            fail(f"{flag} {shown_url(url)!r}: not a URL ({exc}); give e.g. http://127.0.0.1:8080",
                 EXIT_USAGE)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            fail(f"{flag} {shown_url(url)!r}: give an http:// or https:// URL with a host, "
                 "e.g. http://127.0.0.1:8080", EXIT_USAGE)


def env_urls() -> list[tuple[str, str | None]]:
    """The URLs the environment may set instead of a flag: checked the same way. An empty or
    blank variable is unset, as the judge and simulator configuration read it."""
    return [(name, os.environ.get(name, "").strip() or None)
            for name in ("TRIALBOX_JUDGE_URL", "TRIALBOX_SIMULATOR_URL")]


def check_numbers(*, timeout: float | None, budget_usd: float | None = None,
                  min_pass_rate: float | None = None) -> None:
    """Numbers typer cannot range-check for us (floats may be nan or inf)."""
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        fail(f"--timeout {timeout}: give a number of seconds greater than 0", EXIT_USAGE)
    if budget_usd is not None and not (math.isfinite(budget_usd) and budget_usd >= 0):
        fail(f"--budget-usd {budget_usd}: give a dollar amount of 0 or more", EXIT_USAGE)
    if min_pass_rate is not None and not (0.0 <= min_pass_rate <= 1.0):
        fail(f"--min-pass-rate {min_pass_rate}: give a rate between 0 and 1 (0.8 = 80%)", EXIT_USAGE)


def agent_map(items: list[str]) -> dict[str, str]:
    """`doc=rag,chat=gaia` (repeatable) → {"doc": "rag", "chat": "gaia"}."""
    mapping: dict[str, str] = {}
    for item in items:
        for pair in filter(None, (part.strip() for part in item.split(","))):
            agent_type, sep, agent_id = pair.partition("=")
            if not sep or not agent_type.strip() or not agent_id.strip():
                fail(f"--agent-map {pair!r}: write TYPE=AGENT_ID, e.g. doc=gaia", EXIT_USAGE)
            mapping[agent_type.strip()] = agent_id.strip()
    return mapping


def choose_device(requested: str) -> DeviceChoice:
    """The device to serve on (`auto` detects it); one this machine lacks ends with exit 3, a
    name that is no device with exit 2."""
    from runner.stack.hardware import DeviceAbsent, DeviceChoice, DeviceError, detect_device

    if os.environ.get("TRIALBOX_IN_CONTAINER") == "1":
        # The runner container has no /dev/kfd or /dev/accel: the controller on the host
        # already checked the device it passes down.
        match requested:
            case "cpu" | "rocm" | "npu" | "vulkan":
                return DeviceChoice(device=requested, reason="chosen by the controller on the host")
    try:
        return detect_device(requested)
    except DeviceAbsent as exc:  # a real device this machine lacks: exit 3
        fail(str(exc), EXIT_INFRA)
    except DeviceError as exc:  # a name that is no device: exit 2
        fail(str(exc), EXIT_USAGE)


def stack_llm_container(backend: str) -> str | None:
    """The docker backend's LLM container: the one `trialbox up` started, if any."""
    if backend != "docker":
        return None
    from runner.stack import find_llm_container

    return find_llm_container()


def stack_server(options: RunOptions, choice: DeviceChoice) -> tuple[str, str]:
    """`--llm-server`: the stack's LLM service started (or kept) with that server, as
    (container, URL); refused beside --llm-url/--llm-container (a server trialbox does not start
    is not its to choose). Either backend reaches it: sandboxes through the front door, local
    processes on its loopback port."""
    from runner.run.stack_up import start_llm

    if options.llm_container or options.llm_url != RunOptions.llm_url:
        fail("--llm-server starts the stack's own LLM server; leave out --llm-url and "
             "--llm-container (they name a server trialbox did not start), or --llm-server",
             EXIT_USAGE)
    return infra(lambda: start_llm(console, choice, options.llm_server))


def new_run_settings(options: RunOptions, *, agent_dirs: list[Path], target_url: str | None = None,
                     **only_run: Any) -> RunSettings:
    """A new run (fresh id) from the options `run` and `fix` share; `run`'s own settings
    (trials, baseline, …) come as keywords."""
    from runner.run.llm_server import SESSION_DEVICE
    from runner.run.settings import Backend, RunSettings, Selection, new_run_id

    if options.backend not in ("docker", "local"):
        fail(f"--backend {options.backend!r}: choose docker or local", EXIT_USAGE)
    if options.lane and options.category:
        fail("--lane and --category both choose the categories to run: give one", EXIT_USAGE)
    choice = choose_device(options.device)
    suite_paths, corpus_root = suite_and_corpus(options.paths, options.corpus)
    llm_url, llm_container = options.llm_url, options.llm_container
    if options.llm_server is not None:  # trialbox starts (or keeps) that server as the stack's
        llm_container, llm_url = stack_server(options, choice)
    return RunSettings(
        run_id=new_run_id(), suite_paths=suite_paths, corpus_root=corpus_root,
        results_root=options.results,
        selection=Selection(ids=options.scenario or [], categories=options.category or [],
                            lane=options.lane,
                            tags=options.tag or [], exclude_tags=options.exclude_tag or []),
        backend=Backend(options.backend), device=SESSION_DEVICE[choice.device], stack_device=choice.device,
        device_reason=choice.reason, llm_url=llm_url,
        llm_container=llm_container
        or (None if target_url else stack_llm_container(options.backend)),
        concurrency=options.concurrency, timeout_s=options.timeout,
        judge_provider=options.judge_provider, judge_model=options.judge_model,
        judge_url=options.judge_url, simulator_mode=options.simulator,
        simulator_model=options.simulator_model, simulator_url=options.simulator_url,
        strict=options.strict, derived_checks=options.derived_checks, agent_dirs=agent_dirs,
        agent=options.agent, agent_map=agent_map(options.agent_map or []),
        agent_model=options.agent_model, gaia_spec=options.gaia, target_url=target_url,
        **only_run)


def resume_with(ctx: typer.Context, settings: RunSettings, given: dict[str, Any],
                not_settings: frozenset[str], what: str) -> None:
    """--resume with other flags (`run`'s and `ab`'s): those that change only how fast the rest
    runs or what is done with the results (settings.RESUME_MAY_CHANGE) are applied from
    `given`; any other typed flag but `not_settings` is refused, all named in one line — a
    resumed `what` ("run", "A/B") silently ignoring a flag would report what was not asked."""
    from runner.run.settings import RESUME_MAY_CHANGE

    applied, refused = [], []
    for param in ctx.command.params:
        name = param.name
        source = ctx.get_parameter_source(name) if name else None
        # Only what was typed: an environment variable or a default is not a request to change.
        if name is None or name in not_settings or source is None or source.name != "COMMANDLINE":
            continue
        flag = next((o for o in param.opts if o.startswith("--")), name.upper())
        if name in RESUME_MAY_CHANGE and name in given:
            setattr(settings, name, given[name])
            applied.append(f"{flag} {given[name]}")
        else:
            refused.append(flag)
    if refused:
        fail(f"--resume keeps the {what}'s own settings and will not change "
             f"{', '.join(refused)} — drop them, or start a new {what}", EXIT_USAGE)
    if applied:
        say(f"resume: applying {', '.join(applied)}")


def check_baseline(path: Path) -> None:
    """--baseline read before anything runs (`run`, `ab`): an unreadable one is exit 2."""
    from runner.report import ScorecardError, read_any_scorecard

    try:
        read_any_scorecard(path)
    except (ScorecardError, FileNotFoundError, ValueError) as exc:
        fail(f"--baseline: {exc}", EXIT_USAGE)
    except RecursionError:
        fail(f"--baseline: {path}: JSON nested too deeply to be a scorecard", EXIT_USAGE)


def not_measured_reasons(given: list[str], integrity: bool) -> dict[str, str]:
    """--not-measured ID=REASON, each with its reason (an excuse without one explains nothing)."""
    if given and not integrity:
        fail("--not-measured excuses rows from the integrity gate: add --integrity", EXIT_USAGE)
    excused = {}
    for item in given:
        name, _, reason = item.partition("=")
        if not name.strip() or not reason.strip():
            fail(f"--not-measured {item!r}: give ID=REASON, a scenario id or category and why "
                 "this machine cannot measure it (--not-measured vision=no display here)", EXIT_USAGE)
        excused[name.strip()] = reason.strip()
    return excused


def fixtures_root(given: Path | None, suite_paths: list[Path]) -> Path | None:
    """--fixtures (a folder, else exit 2), or the GAIA checkout's fixture tree beside the suite."""
    from runner.scenarios import default_fixtures_root

    if given is None:
        return default_fixtures_root(suite_paths)
    if not given.is_dir():
        fail(f"--fixtures {given}: not a folder — pass the fixture tree (GAIA's tests/fixtures/gaia)",
             EXIT_USAGE)
    return given.resolve()
