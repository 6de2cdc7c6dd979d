"""Command-line options shared by several commands: one declaration each, so `trialbox run` and
`trialbox fix` select scenarios, reach the stack and judge with the same words and defaults.

`run` and `fix` share a whole block of options (`RunOptions`); `with_run_options` puts that
block into a command's signature, where typer reads it, and hands the command one object.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any

import typer

SuitePaths = Annotated[list[Path] | None, typer.Argument(
    help="scenario files or folders [default: eval/scenarios]", show_default=False)]
Corpus = Annotated[Path | None, typer.Option(
    "--corpus", help="corpus root (holds manifest.json) [default: found beside the scenario tree, "
                     "as GAIA lays it out: <tree>/../corpus or the repository's eval/corpus]")]
JsonOutput = Annotated[bool, typer.Option("--json", help="print machine-readable JSON instead of text")]
DeviceName = Annotated[str, typer.Option(help="auto | cpu | rocm | npu | vulkan")]
def _llm_server(value: str | None) -> str | None:
    """A server name trialbox can start, refused while parsing (exit 2) otherwise."""
    from runner.stack.compose import LLM_SERVERS

    if value is not None and value not in LLM_SERVERS:
        raise typer.BadParameter(f"{value!r} is not a server; use one of: {', '.join(LLM_SERVERS)}")
    return value


LlmServerName = Annotated[str | None, typer.Option(
    "--llm-server", callback=_llm_server,
    help="llm-cpu | lemonade: the LLM server trialbox starts (on the CPU either; "
    "rocm, npu and vulkan are Lemonade's) [default: llm-cpu on the CPU]")]
Results = Annotated[Path, typer.Option(help="results root")]
JudgeProvider = Annotated[str, typer.Option(help="auto | anthropic | openai | none")]
JudgeModel = Annotated[str | None, typer.Option()]
JudgeUrl = Annotated[str | None, typer.Option(help="OpenAI-compatible judge base URL")]


@dataclass(frozen=True)
class RunOptions:
    """What `run` and `fix` both ask: the scenarios, the stack, the agent, the judge and the
    user simulator. Field names are the options' names (`--exclude-tag` is `exclude_tag`)."""

    paths: SuitePaths = None
    corpus: Corpus = None
    scenario: Annotated[list[str] | None, typer.Option(
        "--scenario", "-s", help="scenario id (repeatable)")] = None
    category: Annotated[list[str] | None, typer.Option(help="category (repeatable)")] = None
    lane: Annotated[str | None, typer.Option(
        help="GAIA's CI lane: the categories eval/ci_lanes.json beside the tree gives it")] = None
    tag: Annotated[list[str] | None, typer.Option(help="tag (repeatable)")] = None
    exclude_tag: Annotated[list[str] | None, typer.Option(help="skip scenarios with this tag")] = None
    strict: Annotated[bool, typer.Option(
        help="any rejected scenario file stops the run before it starts")] = False
    backend: Annotated[str, typer.Option(
        help="docker (containers) or local (host processes)")] = "docker"
    device: DeviceName = "auto"
    llm_server: LlmServerName = None
    llm_url: Annotated[str, typer.Option(
        help="the LLM server as the engine reaches it",
        envvar="TRIALBOX_LLM_URL")] = "http://127.0.0.1:13305"
    llm_container: Annotated[str | None, typer.Option(
        help="docker backend: the LLM container [default: the stack's]")] = None
    agent: Annotated[str | None, typer.Option(
        help="agent id for scenarios without agent_type [default: gaia]")] = None
    agent_map: Annotated[list[str] | None, typer.Option(
        help="map GAIA agent types to agent ids: doc=ID,chat=ID (repeatable)")] = None
    agent_model: Annotated[str | None, typer.Option(
        help="the chat model the Agent UI asks the LLM server for")] = None
    gaia: Annotated[str | None, typer.Option(
        help="amd-gaia version, wheel or source folder for the Agent UI image "
             "[default: the pinned 0.25.1]")] = None
    concurrency: Annotated[int, typer.Option(min=1, max=16)] = 1
    timeout: Annotated[float | None, typer.Option(
        help="seconds per scenario, > 0 [default: GAIA's formula]")] = None
    derived_checks: Annotated[bool, typer.Option(
        help="derive exact checks from numeric or short expected answers")] = True
    judge_provider: JudgeProvider = "auto"
    judge_model: JudgeModel = None
    judge_url: JudgeUrl = None
    simulator: Annotated[str, typer.Option(
        help="auto | local | scripted | anthropic | openai")] = "auto"
    simulator_model: Annotated[str | None, typer.Option()] = None
    simulator_url: Annotated[str | None, typer.Option()] = None
    results: Results = Path("results")


def spliced(command: Callable[..., None], holder_type: type,
            parameters: list[inspect.Parameter],
            build: Callable[[dict[str, Any]], Any]) -> Callable[..., None]:
    """The command with `parameters` as its own options, in place of its one parameter
    annotated `holder_type`; typer sees every option, the command gets `build` of their values
    as that one object (every parameter keyword-only, as typer passes them)."""
    signature = inspect.signature(command, eval_str=True)
    holder = next(p.name for p in signature.parameters.values() if p.annotation is holder_type)
    own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in signature.parameters.values()]
    at = [p.name for p in own].index(holder)
    names = [p.name for p in parameters]

    def parsed(**given: Any) -> None:
        built = build({name: given.pop(name) for name in names})
        command(**given, **{holder: built})

    parsed.__name__, parsed.__doc__ = command.__name__, command.__doc__
    parsed.__module__, parsed.__qualname__ = command.__module__, command.__qualname__
    parsed.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*own[:at], *parameters, *own[at + 1:]])
    return parsed


def with_run_options(command: Callable[..., None]) -> Callable[..., None]:
    """The command with `RunOptions`' fields as its own options, in place of its one parameter
    annotated `RunOptions`; typer sees every option, the command gets them as one object."""
    hints = typing.get_type_hints(RunOptions, include_extras=True)
    shared = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                annotation=hints[f.name]) for f in fields(RunOptions)]
    return spliced(command, RunOptions, shared, lambda values: RunOptions(**values))
