"""`trialbox node join` and `node leave`: this machine as a node of a Ray cluster."""

from __future__ import annotations

from typing import Annotated

import typer

from runner.cli._shared import command_group, fail, say
from runner.cli.options import DeviceName, LlmServerName
from runner.run.errors import EXIT_INFRA, EXIT_USAGE, InfraError, UsageError

node_app = command_group("This machine as a Ray cluster node (needs trialbox[cluster]).")


@node_app.command("join")
def node_join(
    address: Annotated[str, typer.Argument(help="the Ray head's address, HOST:PORT")],
    device: DeviceName = "auto",
    llm_server: LlmServerName = None,
    slots: Annotated[int | None, typer.Option(
        min=1, max=16, help="sandboxes at once [default: by cores]")] = None,
    llm_container: Annotated[str | None, typer.Option(help="use this running LLM container")] = None,
    llm_url: Annotated[str | None, typer.Option(help="and reach it here")] = None,
    name: Annotated[str | None, typer.Option(help="node name [default: host name]")] = None,
    node_ip: Annotated[str | None, typer.Option(
        help="this machine's address as the cluster sees it")] = None,
) -> None:
    """Ensure the stack, then join the Ray cluster with resources that describe this machine."""
    from runner.cluster import NodeError, join

    try:
        join(address, device=device, slots=slots, llm_container=llm_container, llm_url=llm_url,
             name=name, node_ip=node_ip, say=say, llm_server=llm_server)
    except (NodeError, InfraError) as exc:
        fail(str(exc), EXIT_INFRA)
    except UsageError as exc:  # a server the device cannot have
        fail(str(exc), EXIT_USAGE)


@node_app.command("leave")
def node_leave() -> None:
    """Stop this machine's Ray worker (the stack keeps running)."""
    from runner.cluster import leave

    if not leave(say=say):
        say("this machine is not a node of a cluster")
