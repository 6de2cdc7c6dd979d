"""The `trialbox` typer app: its help, and every command group named on it (`main` runs it)."""

from __future__ import annotations

from runner import __version__
from runner.audit import audit_command
from runner.capture import capture_command
from runner.cli._shared import command_group
from runner.cli.ab import ab
from runner.cli.fix import fix_command
from runner.cli.node import node_app
from runner.cli.results import calibrate, compare, export_app, rescore, schema
from runner.cli.run import run
from runner.cli.stack import bench, clean, doctor, down, images, up
from runner.cli.suite import corpus_app, selftest, validate

app = command_group(
    "trialbox tests an AI agent: it runs scenarios against the GAIA Agent UI, each in its own "
    "sandbox, judges the answers and writes a scorecard. It also builds its images, starts the "
    "LLM server, compares runs and repairs failing agents.\n\n"
    "Exit codes: 0 completed, 1 quality gate failed, 2 usage or configuration error, "
    "3 infrastructure failure.",
    add_completion=False)


@app.command()
def version() -> None:
    """Print trialbox's version."""
    print(__version__)


# In the order `trialbox --help` lists them. The agent developer's loop (fix, capture, audit)
# lives in its own packages; the CLI only names the commands.
for command in (validate, selftest, run, ab, rescore, calibrate, compare, schema, doctor, images, up,
                down, clean, bench):
    app.command()(command)
app.command("fix")(fix_command)
app.command("capture")(capture_command)
app.command("audit")(audit_command)
app.add_typer(corpus_app, name="corpus")
app.add_typer(node_app, name="node")
app.add_typer(export_app, name="export")


def main() -> None:
    """The console script: run the command the arguments name."""
    app()


if __name__ == "__main__":
    main()
