"""Command-line options shared by `trialbox run` and `trialbox fix`: one declaration each, so
the two commands select scenarios and reach the stack with the same words and defaults."""

from __future__ import annotations

from typing import Annotated

import typer

ScenarioIds = Annotated[list[str] | None, typer.Option("--scenario", "-s", help="scenario id (repeatable)")]
Categories = Annotated[list[str] | None, typer.Option(help="category (repeatable)")]
Tags = Annotated[list[str] | None, typer.Option(help="tag (repeatable)")]
ExcludeTags = Annotated[list[str] | None, typer.Option(help="skip scenarios with this tag")]
Strict = Annotated[bool, typer.Option(help="any rejected scenario file stops the run before it starts")]
BackendName = Annotated[str, typer.Option(help="docker (containers) or local (host processes)")]
DeviceName = Annotated[str, typer.Option(help="auto | cpu | rocm | npu")]
LlmUrl = Annotated[str, typer.Option(help="the LLM server as the engine reaches it", envvar="TRIALBOX_LLM_URL")]
LlmContainer = Annotated[str | None, typer.Option(
    help="docker backend: the LLM container [default: the stack's]")]
AgentId = Annotated[str | None, typer.Option(help="agent id for scenarios without agent_type [default: gaia]")]
AgentModel = Annotated[str | None, typer.Option(help="the chat model the Agent UI asks the LLM server for")]
