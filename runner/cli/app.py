"""The `trialbox` command. Thin on purpose: parse, call the modules that do the work, print.

Exit codes (README): 0 completed, 1 quality gate failed, 2 usage or configuration error,
3 infrastructure failure.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TextIO, TypeVar, cast

import typer
from rich.console import Console

from runner import __version__
from runner.cli.options import (
    AgentId,
    AgentModel,
    BackendName,
    Categories,
    DeviceName,
    ExcludeTags,
    LlmContainer,
    LlmUrl,
    ScenarioIds,
    Strict,
    Tags,
)
from runner.run.errors import EXIT_INFRA, EXIT_NOT_COMPARABLE, EXIT_USAGE, InfraError, UsageError
from runner.system.paths import eval_root

if TYPE_CHECKING:
    from runner.report import Scorecard
    from runner.run.settings import RunSettings
    from runner.stack.hardware import DeviceChoice

T = TypeVar("T")

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
corpus_app = typer.Typer(no_args_is_help=True, help="Build the evaluation corpus.")
app.add_typer(corpus_app, name="corpus")
node_app = typer.Typer(no_args_is_help=True,
                       help="This machine as a node of a Ray cluster (needs trialbox[cluster]).")
app.add_typer(node_app, name="node")
export_app = typer.Typer(no_args_is_help=True, help="Write a run in another tool's format.")
app.add_typer(export_app, name="export")
console = Console(highlight=False)

EVAL = eval_root()
SuitePaths = Annotated[list[Path] | None, typer.Argument(help="scenario files or folders [default: eval/scenarios]")]
Corpus = Annotated[Path | None, typer.Option(
    "--corpus", help="corpus root (holds manifest.json) [default: found beside the scenario tree, "
                     "as GAIA lays it out: <tree>/../corpus or the repository's eval/corpus]")]
JsonOutput = Annotated[bool, typer.Option("--json", help="print machine-readable JSON instead of text")]


def fail(message: str, code: int) -> NoReturn:
    console.print(f"[bold red]error:[/] {message}", soft_wrap=True)
    raise typer.Exit(code)


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


def say(line: str) -> None:
    # soft_wrap: a log (stdout not a terminal) gets whole lines, never a sentence cut at 80.
    console.print(line, markup=False, soft_wrap=True)


@app.command()
def version() -> None:
    """Print trialbox's version."""
    print(__version__)


@app.command()
def validate(paths: SuitePaths = None, corpus: Corpus = None, as_json: JsonOutput = False) -> None:
    """Check every scenario file and the corpus manifest; print each problem as file:line."""
    import json

    from runner.scenarios import load_suite

    chosen, corpus_root = suite_and_corpus(paths, corpus)
    suite = load_suite(chosen, corpus_root)
    if as_json:
        print(json.dumps({
            "corpus": str(corpus_root), "valid": [s.id for s in suite.scenarios],
            "errors": len(suite.errors), "warnings": len(suite.warnings),
            "problems": [{"level": p.level.value, "file": str(p.file), "line": p.line,
                          "field": p.field, "message": p.message, "fix": p.fix}
                         for p in suite.problems]}, indent=2))
    else:
        say(f"corpus: {corpus_root}")
        for problem in suite.problems:
            say(str(problem))
        say(f"{len(suite.scenarios)} scenario(s) valid, {len(suite.errors)} error(s), {len(suite.warnings)} warning(s)")
    if suite.errors:
        raise typer.Exit(EXIT_USAGE)


@app.command()
def selftest(
    paths: SuitePaths = None, corpus: Corpus = None, as_json: JsonOutput = False,
    live: Annotated[bool, typer.Option(
        "--live", help="then run the oracle and the adversary agents in real sandboxes (needs "
                       "the stack: `trialbox up`)")] = False,
    results: Annotated[Path, typer.Option(help="--live: where the two runs are written")] = Path("results"),
) -> None:
    """Prove the checks tell right from wrong: per scenario, a genuine answer built from the
    ground truth must pass every check and each wrong answer must fail one (no model, no
    Docker). Exit 0 when every decidable scenario is passable and discriminating, 1 naming
    file, turn and answer otherwise, 2 when a file cannot be loaded; judge-only scenarios are
    reported, not failed."""
    from runner.run.errors import EXIT_QUALITY
    from runner.scenarios import load_suite
    from runner.selftest import render, selftest_suite

    chosen, corpus_root = suite_and_corpus(paths, corpus)
    suite = load_suite(chosen, corpus_root)
    for problem in suite.errors:
        say(str(problem))
    if not suite.scenarios and suite.errors:
        fail("no scenario could be loaded; fix the errors above (trialbox validate lists them)",
             EXIT_USAGE)
    report = selftest_suite(suite.scenarios, suite.manifest)
    if as_json:
        print(report.model_dump_json(indent=2))
    else:
        for line in render(report):
            say(line)
    if live:
        judge_only = {item.id for item in report.scenarios if item.verdict.value == "judge_only"}
        if not _selftest_live(suite.scenarios, suite.manifest, chosen, corpus_root, results,
                              judge_only):
            raise typer.Exit(EXIT_QUALITY)
    if suite.errors:  # a file it could not read is not a scenario shown sound
        fail(f"{len(suite.errors)} error(s) above: those files were not self-tested; fix them "
             "(trialbox validate lists each)", EXIT_USAGE)
    if not report.sound:
        raise typer.Exit(EXIT_QUALITY)


def _selftest_live(scenarios: list[Any], manifest: Any, chosen: list[Path], corpus_root: Path,
                   results: Path, judge_only: set[str]) -> bool:
    """The oracle and the adversary (eval/agents/oracle, plans written to a temporary folder
    for these two runs only) over the suite, no judge; True when every scenario with checks
    was passed by the oracle and failed by the adversary."""
    import tempfile

    from runner.report import read_scorecard
    from runner.run.settings import RunSettings, new_run_id
    from runner.selftest import (
        ADVERSARY,
        ORACLE,
        live_lines,
        live_results,
        live_sound,
        write_agents,
    )

    container = _stack_llm_container("docker")
    if container is None:
        fail("--live needs the LLM server of the stack; start it with `trialbox up`", EXIT_INFRA)
    types = {s.agent_type for s in scenarios if s.agent_type}
    cards = {}
    with tempfile.TemporaryDirectory(prefix="trialbox-selftest-") as folder:
        agents = write_agents(scenarios, manifest, Path(folder))
        for agent in (ORACLE, ADVERSARY):
            settings = RunSettings(
                run_id=f"{new_run_id()}-selftest-{agent}", suite_paths=chosen,
                corpus_root=corpus_root, results_root=results, llm_container=container,
                agent_dirs=[agents], agent=agent, agent_map={t: agent for t in types},
                judge_provider="none", simulator_mode="scripted")
            code = execute(settings)
            if code not in (0, 1):
                raise typer.Exit(code)
            cards[agent] = read_scorecard(settings.run_dir / "scorecard.json")
    found = live_results(cards[ORACLE].scenarios, cards[ADVERSARY].scenarios, judge_only)
    for line in live_lines(found):
        say(line)
    return live_sound(found)


@app.command()
def run(
    ctx: typer.Context,
    paths: SuitePaths = None,
    corpus: Corpus = None,
    scenario: ScenarioIds = None,
    category: Categories = None,
    tag: Tags = None,
    exclude_tag: ExcludeTags = None,
    strict: Strict = False,
    backend: BackendName = "docker",
    device: DeviceName = "auto",
    llm_url: LlmUrl = "http://127.0.0.1:13305",
    llm_container: LlmContainer = None,
    agent_dir: Annotated[list[Path] | None, typer.Option(
        help="a folder of GAIA agents (<id>/agent.py), mounted read-only into every sandbox (repeatable)")] = None,
    agent: AgentId = None,
    agent_map: Annotated[list[str] | None, typer.Option(
        help="map GAIA agent types to agent ids: doc=ID,chat=ID (repeatable)")] = None,
    agent_model: AgentModel = None,
    gaia: Annotated[str | None, typer.Option(
        help="amd-gaia version, wheel or source folder for the Agent UI image [default: the pinned 0.25.1]")] = None,
    target_url: Annotated[str | None, typer.Option(
        help="attach to an Agent UI that is already running (its MCP bridge URL): no sandbox, no isolation")] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=16)] = 1,
    warm_pool: Annotated[bool, typer.Option(
        help="start the next sandboxes (up to concurrency + 1) while scenarios run")] = True,
    trials: Annotated[int, typer.Option(min=1, max=50, help="run each scenario K times")] = 1,
    rejudge: Annotated[int, typer.Option(min=1, max=20, help="judge each transcript K times")] = 1,
    timeout: Annotated[float | None, typer.Option(help="seconds per scenario, > 0 [default: GAIA's formula]")] = None,
    budget_usd: Annotated[float | None, typer.Option(help="judge spend allowed per scenario (USD, ≥ 0)")] = None,
    min_pass_rate: Annotated[float | None, typer.Option(
        help="exit 1 below this rate (0-1) of what was decided: the judged pass rate, or without "
             "a judge the checks pass rate")] = None,
    allow_incomplete: Annotated[bool, typer.Option(
        "--allow-incomplete/--require-complete",
        help="--min-pass-rate: leave out scenarios without a verdict (TIMEOUT, ERRORED, INFRA_ERROR, "
             "SKIPPED_*, ...) instead of counting them as not passed (--require-complete, the default)")] = False,
    derived_checks: Annotated[bool, typer.Option(
        help="derive exact checks from numeric or short expected answers")] = True,
    judge_provider: Annotated[str, typer.Option(help="auto | anthropic | openai | none")] = "auto",
    judge_model: Annotated[str | None, typer.Option()] = None,
    judge_url: Annotated[str | None, typer.Option(help="OpenAI-compatible judge base URL")] = None,
    simulator: Annotated[str, typer.Option(help="auto | local | scripted | anthropic | openai")] = "auto",
    simulator_model: Annotated[str | None, typer.Option()] = None,
    simulator_url: Annotated[str | None, typer.Option()] = None,
    results: Annotated[Path, typer.Option(help="results root")] = Path("results"),
    resume: Annotated[Path | None, typer.Option(help="continue RUN_DIR under its original settings")] = None,
    retry_errors: Annotated[bool, typer.Option(
        help="with --resume: also re-run infrastructure failures (INFRA_ERROR, TIMEOUT, SETUP_ERROR, ERRORED)")] = False,
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
    save_baseline: Annotated[Path | None, typer.Option(
        help="save the finished scorecard (+ meta.json) here as a baseline")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="progress on stderr; on stdout one JSON object: run folder, exit code, summary")] = False,
    cluster: Annotated[str | None, typer.Option(
        envvar="TRIALBOX_CLUSTER",
        help="Ray cluster address: each scenario runs on a node with a free slot (never saved)")] = None,
    on: Annotated[list[str] | None, typer.Option(
        "--on", help="with --cluster: only nodes matching KEY=VALUE (device, fingerprint, driver, node)")] = None,
    per_node: Annotated[bool, typer.Option(
        help="with --cluster: the whole selection once per matching node, plus the driver-build comparison")] = False,
) -> None:
    """Run scenarios against the GAIA Agent UI, judge them and write results/<run_id>/."""
    from runner.run.launch import resume_settings
    from runner.run.settings import Backend, RunSettings, Selection, new_run_id

    _check_numbers(timeout=timeout, budget_usd=budget_usd, min_pass_rate=min_pass_rate)
    _check_urls(("--judge-url", judge_url), ("--simulator-url", simulator_url),
                ("--llm-url", llm_url), ("--target-url", target_url), *_env_urls())
    if baseline is not None:  # an unreadable baseline is found before anything runs
        from runner.report import ScorecardError, read_any_scorecard

        try:
            read_any_scorecard(baseline)
        except (ScorecardError, FileNotFoundError, ValueError) as exc:
            fail(f"--baseline: {exc}", EXIT_USAGE)
        except RecursionError:
            fail(f"--baseline: {baseline}: JSON nested too deeply to be a scorecard", EXIT_USAGE)
    if resume is not None:
        settings = _or_fail(lambda: resume_settings(resume))
        _resume_with(ctx, settings, {
            "concurrency": concurrency, "warm_pool": warm_pool, "retry_errors": retry_errors,
            "min_pass_rate": min_pass_rate, "allow_incomplete": allow_incomplete,
            "baseline": baseline, "save_baseline": save_baseline})
        settings.allow_model_change = allow_model_change
        settings.allow_device_fallback = allow_device_fallback or settings.allow_device_fallback
    else:
        if retry_errors or allow_model_change:
            fail(f"{'--retry-errors' if retry_errors else '--allow-model-change'} only makes sense "
                 "with --resume RUN_DIR", EXIT_USAGE)
        choice = _device(device)
        if backend not in ("docker", "local"):
            fail(f"--backend {backend!r}: choose docker or local", EXIT_USAGE)
        from runner.run.launch import SESSION_DEVICE

        suite_paths, corpus_root = suite_and_corpus(paths, corpus)
        settings = RunSettings(
            run_id=new_run_id(), suite_paths=suite_paths, corpus_root=corpus_root,
            results_root=results,
            selection=Selection(ids=scenario or [], categories=category or [], tags=tag or [],
                                exclude_tags=exclude_tag or []),
            backend=Backend(backend), device=SESSION_DEVICE[choice.device], device_reason=choice.reason,
            llm_url=llm_url,
            llm_container=llm_container or (None if target_url else _stack_llm_container(backend)),
            concurrency=concurrency, warm_pool=warm_pool, trials=trials, rejudge=rejudge,
            timeout_s=timeout, budget_usd=budget_usd, min_pass_rate=min_pass_rate,
            allow_incomplete=allow_incomplete, judge_provider=judge_provider,
            judge_model=judge_model, judge_url=judge_url, simulator_mode=simulator,
            simulator_model=simulator_model, simulator_url=simulator_url, strict=strict,
            derived_checks=derived_checks, agent_dirs=agent_dir or [], agent=agent,
            agent_map=_agent_map(agent_map or []), agent_model=agent_model, gaia_spec=gaia,
            target_url=target_url, baseline=baseline, save_baseline=save_baseline,
            allow_device_fallback=allow_device_fallback, repeatable_decoding=repeatable_decoding,
        )
    if as_json:
        _progress_to_stderr()
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


def _resume_with(ctx: typer.Context, settings: RunSettings, given: dict[str, Any]) -> None:
    """--resume with other flags: those that change only how fast the rest runs or what is done
    with the results (settings.RESUME_MAY_CHANGE) are applied; any other is refused, all named
    in one line — a resumed run silently ignoring a flag would report what was not asked for."""
    from runner.run.settings import RESUME_MAY_CHANGE

    applied, refused = [], []
    for param in ctx.command.params:
        name = param.name
        source = ctx.get_parameter_source(name) if name else None
        # Only what was typed: an environment variable or a default is not a request to change.
        if name is None or name in _NOT_RUN_SETTINGS or source is None or source.name != "COMMANDLINE":
            continue
        flag = next((o for o in param.opts if o.startswith("--")), name.upper())
        if name in RESUME_MAY_CHANGE:
            setattr(settings, name, given[name])
            applied.append(f"{flag} {given[name]}")
        else:
            refused.append(flag)
    if refused:
        fail(f"--resume keeps the run's own settings and will not change {', '.join(refused)} — "
             "drop them, or start a new run", EXIT_USAGE)
    if applied:
        say(f"resume: applying {', '.join(applied)}")


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
    from runner.run.launch import exit_code

    try:
        selector = parse_on(on)
        if per_node:
            from runner.report import read_scorecard

            result = run_blocking(run_per_node(settings, address, selector, say, resume=resume))
            codes = [EXIT_INFRA] if result.left else []  # a node's run could not continue
            for node_run in result.runs:
                run_dir = settings.results_root / node_run.run_id
                codes.append(exit_code(read_scorecard(run_dir / "scorecard.json"), settings.min_pass_rate,
                                       settings.allow_incomplete))
                say(f"node {node_run.node.name}: {run_dir}")
            for report in result.comparisons:
                say(f"driver-build comparison: {report}")
            return max(codes, default=EXIT_USAGE)
        card = run_blocking(run_on_cluster(settings, address, selector, say, resume=resume))
    except ClusterError as exc:
        fail(str(exc), EXIT_USAGE)
    except UsageError as exc:
        fail(str(exc), EXIT_USAGE)
    except InfraError as exc:
        fail(str(exc), EXIT_INFRA)
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
    return _baseline_steps(settings, card, _report_and_gate(card, settings))


@node_app.command("join")
def node_join(
    address: Annotated[str, typer.Argument(help="the Ray head's address, HOST:PORT")],
    device: Annotated[str, typer.Option(help="auto | cpu | rocm | npu")] = "auto",
    slots: Annotated[int | None, typer.Option(min=1, max=16, help="sandboxes at once [default: by cores]")] = None,
    llm_container: Annotated[str | None, typer.Option(help="use this running LLM container")] = None,
    llm_url: Annotated[str | None, typer.Option(help="and reach it here")] = None,
    name: Annotated[str | None, typer.Option(help="node name [default: host name]")] = None,
    node_ip: Annotated[str | None, typer.Option(help="this machine's address as the cluster sees it")] = None,
) -> None:
    """Ensure the stack, then join the Ray cluster with resources that describe this machine."""
    from runner.cluster import NodeError, join

    try:
        join(address, device=device, slots=slots, llm_container=llm_container, llm_url=llm_url,
             name=name, node_ip=node_ip, say=say)
    except (NodeError, InfraError) as exc:
        fail(str(exc), EXIT_INFRA)


@node_app.command("leave")
def node_leave() -> None:
    """Stop this machine's Ray worker (the stack keeps running)."""
    from runner.cluster import leave

    if not leave(say=say):
        say("this machine is not a node of a cluster")


def _progress_to_stderr() -> None:
    """--json: stdout carries only the JSON result, so progress and the summary go to stderr."""
    global console
    console = Console(highlight=False, stderr=True)


def _print_run_json(settings: RunSettings, code: int) -> None:
    import json

    run_dir = settings.run_dir
    card = run_dir / "scorecard.json"
    summary = json.loads(card.read_text(encoding="utf-8"))["summary"] if card.is_file() else None
    print(json.dumps({"run_dir": str(run_dir), "exit_code": code, "summary": summary}, indent=2))


def _check_urls(*flags: tuple[str, str | None]) -> None:
    """A URL the user typed, checked before any client is built from it: `http://[::1`
    otherwise surfaces as a traceback deep in httpx, and `ftp://…` as one error per request."""
    from urllib.parse import urlsplit

    for flag, url in flags:
        if url is None:
            continue
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 — raises ValueError for a port that is not a number
        except ValueError as exc:
            fail(f"{flag} {url!r}: not a URL ({exc}); give e.g. http://127.0.0.1:8080", EXIT_USAGE)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            fail(f"{flag} {url!r}: give an http:// or https:// URL with a host, "
                 "e.g. http://127.0.0.1:8080", EXIT_USAGE)


def _env_urls() -> list[tuple[str, str | None]]:
    """The URLs the environment may set instead of a flag: checked the same way. An empty or
    blank variable is unset, as the judge and simulator configuration read it."""
    return [(name, os.environ.get(name, "").strip() or None)
            for name in ("TRIALBOX_JUDGE_URL", "TRIALBOX_SIMULATOR_URL")]


def _check_numbers(*, timeout: float | None, budget_usd: float | None, min_pass_rate: float | None) -> None:
    """Numbers typer cannot range-check for us (floats may be nan or inf)."""
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        fail(f"--timeout {timeout}: give a number of seconds greater than 0", EXIT_USAGE)
    if budget_usd is not None and not (math.isfinite(budget_usd) and budget_usd >= 0):
        fail(f"--budget-usd {budget_usd}: give a dollar amount of 0 or more", EXIT_USAGE)
    if min_pass_rate is not None and not (0.0 <= min_pass_rate <= 1.0):
        fail(f"--min-pass-rate {min_pass_rate}: give a rate between 0 and 1 (0.8 = 80%)", EXIT_USAGE)


def _agent_map(items: list[str]) -> dict[str, str]:
    """`doc=rag,chat=gaia` (repeatable) → {"doc": "rag", "chat": "gaia"}."""
    mapping: dict[str, str] = {}
    for item in items:
        for pair in filter(None, (part.strip() for part in item.split(","))):
            agent_type, sep, agent_id = pair.partition("=")
            if not sep or not agent_type.strip() or not agent_id.strip():
                fail(f"--agent-map {pair!r}: write TYPE=AGENT_ID, e.g. doc=gaia", EXIT_USAGE)
            mapping[agent_type.strip()] = agent_id.strip()
    return mapping


def execute(settings: RunSettings, resume: bool = False, extra: dict[str, Any] | None = None) -> int:
    """Run and print the summary; map every failure to its exit code with one clear message."""
    from docker.errors import DockerException

    from runner.run.launch import run_blocking

    try:
        card = run_blocking(settings, say, resume=resume, extra=extra,
                            # rich types Console.file as IO[str]; it is the terminal's text stream
                            progress_stream=cast(TextIO, console.file))
    except UsageError as exc:
        fail(str(exc), EXIT_USAGE)
    except InfraError as exc:
        fail(str(exc), EXIT_INFRA)
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
    code = _report_and_gate(card, settings)
    return _baseline_steps(settings, card, code)


def _report_and_gate(card: Scorecard, settings: RunSettings) -> int:
    """Print the summary and, when a --min-pass-rate applies, which rate decided the exit code."""
    from runner.run.launch import exit_code, quality_gate_line

    print_summary(card, settings.run_dir)
    if settings.min_pass_rate is not None:
        say(quality_gate_line(card, settings.min_pass_rate, settings.allow_incomplete))
    return exit_code(card, settings.min_pass_rate, settings.allow_incomplete)


def _baseline_steps(settings: RunSettings, card: Scorecard, code: int) -> int:
    """--save-baseline and --baseline after a run. A regression against the baseline is a
    failed quality gate (1) unless the run already failed harder."""
    from runner.report import ScorecardError, compare, read_any_scorecard, save_baseline

    if settings.save_baseline is not None:
        try:
            for path in save_baseline(card, settings.save_baseline):
                say(f"baseline saved: {path}")
        except (ScorecardError, OSError) as exc:
            say(f"warning: baseline not saved: {exc}")
    if settings.baseline is None:
        return code
    try:
        result = compare(read_any_scorecard(settings.baseline), card)
    except ScorecardError as exc:
        fail(str(exc), EXIT_USAGE)
    say(result.render())
    if code != 0:
        return code
    if result.exit_code == 3:  # compare's "models differ": its own outcome, not infrastructure
        say(f"--baseline {settings.baseline}: not comparable — the baseline was made with other "
            f"agent or judge models, so no verdict is drawn (exit {EXIT_NOT_COMPARABLE})")
        return EXIT_NOT_COMPARABLE
    return {0: 0, 1: 1}.get(result.exit_code, EXIT_USAGE)


def print_summary(card: Scorecard, run_dir: Path) -> None:
    summary = card.summary
    say("")
    say((run_dir / "summary.md").read_text(encoding="utf-8") if (run_dir / "summary.md").exists() else str(summary))
    say(f"results: {run_dir}/ (scorecard.json, summary.md, junit.xml, report.html, traces/, artifacts/)")


def _stack_llm_container(backend: str) -> str | None:
    if backend != "docker":
        return None
    from runner.bench.make_bench import find_llm_container

    return find_llm_container()


def _or_fail(make: Callable[[], T]) -> T:
    try:
        return make()
    except UsageError as exc:
        fail(str(exc), EXIT_USAGE)


@app.command()
def rescore(
    run_dir: Annotated[Path, typer.Argument(help="a finished or partial run folder")],
    judge_provider: Annotated[str, typer.Option(help="auto | anthropic | openai | none")] = "auto",
    judge_model: Annotated[str | None, typer.Option()] = None,
    judge_url: Annotated[str | None, typer.Option()] = None,
    results: Annotated[Path | None, typer.Option(help="results root [default: beside RUN_DIR]")] = None,
    rejudge: Annotated[int, typer.Option(
        min=1, max=20, help="judge each saved transcript K times and report judge agreement (κ)")] = 1,
) -> None:
    """Judge a run's saved transcripts again with another judge, into a new run folder."""
    import asyncio

    from runner.run.launch import rescore as replay
    from runner.run.launch import resume_settings
    from runner.run.settings import new_run_id

    _check_urls(("--judge-url", judge_url))
    original = _or_fail(lambda: resume_settings(run_dir))
    settings = original.model_copy(update={
        "run_id": new_run_id(), "results_root": results or run_dir.parent, "judge_provider": judge_provider,
        "judge_model": judge_model, "judge_url": judge_url, "simulator_mode": "scripted", "rejudge": rejudge,
    })
    try:
        card = asyncio.run(replay(run_dir, settings, say))
    except UsageError as exc:
        fail(str(exc), EXIT_USAGE)
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted[/]: partial rescore in {settings.run_dir}", soft_wrap=True)
        raise typer.Exit(EXIT_INFRA) from None
    # A rescore keeps the run's --min-pass-rate (run.json), so it says which rate decided too.
    raise typer.Exit(_report_and_gate(card, settings))


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
    except (InspectUnavailable, FileNotFoundError, ValueError) as exc:
        fail(escape(str(exc)), EXIT_USAGE)  # escape: rich would eat "[inspect]" as markup
    say(f"wrote {path} — open it with: inspect view --log-dir {path.parent}")


@app.command()
def calibrate(
    judge_provider: Annotated[str, typer.Option(help="anthropic | openai")] = "auto",
    judge_model: Annotated[str | None, typer.Option()] = None,
    judge_url: Annotated[str | None, typer.Option()] = None,
    deadline: Annotated[float, typer.Option(help="seconds")] = 120.0,
) -> None:
    """Run only the calibration gate: exit 0 calibrated, 1 failed, 2 configuration error."""
    import asyncio

    from runner.judge import JudgeCache, ProviderConfigError, from_env_and_flags, make_judge
    from runner.judge import calibrate as gate

    if not (math.isfinite(deadline) and deadline > 0):
        fail(f"--deadline {deadline}: give a number of seconds greater than 0", EXIT_USAGE)
    _check_urls(("--judge-url", judge_url), *_env_urls())
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
    except Exception as exc:  # noqa: BLE001 — an unreachable judge is a configuration error
        fail(f"calibration could not run: {type(exc).__name__}: {exc}", EXIT_USAGE)
    say(str(report))
    # The gate never reads the judge cache: what it vouches for is the server answering now.
    say(f"{report.requests} question(s) asked live (calibration never reads the judge cache)")
    raise typer.Exit(0 if report.passed else 1)


@app.command()
def compare(
    baseline: Annotated[Path, typer.Argument(help="scorecard (file or run folder), ours or GAIA's")],
    current: Annotated[Path, typer.Argument(help="scorecard (file or run folder), ours or GAIA's")],
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

    try:
        old, new = read_any_scorecard(baseline), read_any_scorecard(current)
        result = diff(old, new, require_complete=require_complete)
        driver = (driver_report(old, new, read_traces(baseline), read_traces(current),
                                warmup=warmup, allow_device_mismatch=allow_device_mismatch)
                  if report or html else None)
    except (ScorecardError, FileNotFoundError, ValueError) as exc:
        fail(str(exc), EXIT_USAGE)
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
        atomic_write(html, render_driver_html(driver))
        if not as_json:
            say(f"driver-build report: {html}")
    raise typer.Exit(result.exit_code)


@app.command()
def schema(dest: Annotated[Path, typer.Argument()] = Path("runner/report/schemas")) -> None:
    """Export the JSON Schemas of every file trialbox writes."""
    from runner.run.schemas import export_schemas

    for path in export_schemas(dest):
        say(str(path))


@corpus_app.command("build")
def corpus_build(corpus: Annotated[Path, typer.Option(help="corpus root (holds manifest.json)")]
                 = EVAL / "corpus") -> None:
    """Generate the PDF/XLSX/large documents and fetch the real-world documents."""
    from runner.corpus import build

    report = build(corpus)
    for line in report:
        say(str(line))
    raise typer.Exit(0 if report.ok else 1)


@app.command()
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


@app.command()
def images() -> None:
    """Build the appliance's images (no registry needed: local base image + wheelhouse)."""
    from runner.bench.make_bench import build_images, ensure_engine

    _infra(lambda: ensure_engine(say))
    _infra(lambda: build_images(console))


@app.command()
def up(device: Annotated[str, typer.Option(help="auto | cpu | rocm | npu")] = "auto") -> None:
    """Start the LLM server for the device and wait until it is healthy."""
    from runner.bench.make_bench import start_llm

    choice = _device(device)
    _infra(lambda: start_llm(console, choice))


@app.command()
def down(device: Annotated[str, typer.Option(help="auto | cpu | rocm | npu")] = "auto") -> None:
    """Stop the stack (model-cache volumes are kept)."""
    from runner.stack.compose import ComposeError
    from runner.stack.compose import down as stop

    try:
        stop(_device(device).device)
    except ComposeError as exc:
        fail(str(exc), EXIT_INFRA)
    say("stack stopped")


@app.command()
def clean(
    run_id: Annotated[str | None, typer.Option(help="only this run")] = None,
    everything: Annotated[bool, typer.Option("--all", help=(
        "also the shared LLM server (`trialbox up`'s stack) — refused while a run is alive"))] = False,
    results: Annotated[Path, typer.Option(help="where run folders are (a live run's lock is looked for)")] = Path("results"),
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


@app.command()
def bench(
    device: Annotated[str, typer.Option(help="auto | cpu | rocm | npu")] = "auto",
    scenario: Annotated[list[str] | None, typer.Option("--scenario", "-s")] = None,
    category: Annotated[list[str] | None, typer.Option()] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=16)] = 1,
    results: Annotated[Path, typer.Option()] = Path("results"),
    in_container: Annotated[bool, typer.Option(help="run the engine inside the pinned runner image")] = False,
    allow_device_fallback: Annotated[bool, typer.Option(
        help="run although the LLM server serves on another device than --device asked for")] = False,
) -> None:
    """Everything: engine → images → LLM server → run the default suite → summary."""
    from runner.bench.make_bench import (
        build_corpus,
        build_images,
        ensure_engine,
        selftest_line,
        start_llm,
    )
    from runner.run.launch import SESSION_DEVICE
    from runner.run.settings import RunSettings, Selection, new_run_id

    choice = _device(device)
    say(f"device: {choice.device} — {choice.reason}")
    for warning in choice.warnings:
        say(f"warning: {warning}")
    _infra(lambda: ensure_engine(say))
    images = _infra(lambda: build_images(console))
    _infra(lambda: build_corpus(EVAL / "corpus", say))
    container, url = _infra(lambda: start_llm(console, choice))
    if in_container:
        from runner.bench.make_bench import run_in_runner_container

        selection = [arg for sid in scenario or [] for arg in ("-s", sid)]
        selection += [arg for cat in category or [] for arg in ("--category", cat)]
        selection += ["--concurrency", str(concurrency)]
        selection += ["--allow-device-fallback"] if allow_device_fallback else []
        code = run_in_runner_container(choice.device, container, selection, results)
        say(selftest_line([EVAL / "scenarios"], EVAL / "corpus"))
        raise typer.Exit(code)
    settings = RunSettings(
        run_id=new_run_id(), suite_paths=[EVAL / "scenarios"], corpus_root=EVAL / "corpus",
        results_root=results, selection=Selection(ids=scenario or [], categories=category or []),
        device=SESSION_DEVICE[choice.device], device_reason=choice.reason, llm_url=url,
        llm_container=container, concurrency=concurrency, judge_provider="auto", simulator_mode="auto",
        allow_device_fallback=allow_device_fallback,
    )
    code = execute(settings, extra={"images": images})
    say(selftest_line(settings.suite_paths, settings.corpus_root))
    raise typer.Exit(code)


def _device(requested: str) -> DeviceChoice:
    from runner.stack.hardware import DeviceChoice, DeviceError, detect_device

    if os.environ.get("TRIALBOX_IN_CONTAINER") == "1":
        # The runner container has no /dev/kfd or /dev/accel: the controller on the host
        # already checked the device it passes down.
        match requested:
            case "cpu" | "rocm" | "npu":
                return DeviceChoice(device=requested, reason="chosen by the controller on the host")
    try:
        return detect_device(requested)
    except DeviceError as exc:
        fail(str(exc), EXIT_USAGE)


def _infra(step: Callable[[], T]) -> T:
    try:
        return step()
    except InfraError as exc:
        fail(str(exc), EXIT_INFRA)


def _register_tools() -> None:
    """The agent developer's loop lives in its own packages; the CLI only names the commands."""
    from runner.audit import audit_command
    from runner.capture import capture_command
    from runner.cli.fix import fix_command

    app.command("fix")(fix_command)
    app.command("capture")(capture_command)
    app.command("audit")(audit_command)


_register_tools()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
