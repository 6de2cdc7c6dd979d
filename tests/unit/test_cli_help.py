"""Every command's `--help` reads whole at a standard 80-column terminal: each option's name is
shown uncut, and text in brackets (`trialbox[cluster]`, `[default: …]`) is shown as written,
not eaten as markup. The commands are found by walking the app's click tree, so a new command
is checked without being listed here; a planted app shows the check can fail."""

from __future__ import annotations

import re
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner

from runner.cli.app import app

BRACKETS = re.compile(r"\[[^\[\]]+\]")
#: typer builds its commands with the click it carries inside (typer._click), so the tree is
#: read by its attributes, not by click's classes.
Command = Any


def commands(group: Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Command]]:
    """The command and every sub-command below it, each with the words that call it."""
    found = [(path, group)]
    for name, command in sorted(getattr(group, "commands", {}).items()):
        found += commands(command, (*path, name))
    return found


def help_at_80(typer_app: typer.Typer, path: tuple[str, ...]) -> str:
    outcome = CliRunner().invoke(typer_app, [*path, "--help"], env={"COLUMNS": "80"},
                                 terminal_width=80)
    assert outcome.exit_code == 0, outcome.output
    return outcome.output


def unreadable(typer_app: typer.Typer, path: tuple[str, ...], command: Command) -> list[str]:
    """What `--help` of this command fails to show: option names cut or missing, bracket text
    of a help line lost."""
    shown = help_at_80(typer_app, path)
    flat = "".join(shown.split())  # wrapping may break a line anywhere, even inside a bracket
    problems = []
    for param in command.params:
        if param.param_type_name == "option" and not param.hidden:
            for name in (*param.opts, *param.secondary_opts):
                if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", shown):
                    problems.append(f"{' '.join(path)}: option {name} not shown whole")
    texts = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
    for text in texts:
        for bracket in BRACKETS.findall(text):
            if "".join(bracket.split()) not in flat:
                problems.append(f"{' '.join(path) or 'trialbox'}: {bracket!r} lost from the help")
    return problems


def everything_unreadable(typer_app: typer.Typer) -> list[str]:
    root = typer.main.get_command(typer_app)
    return [problem for path, command in commands(root)
            for problem in unreadable(typer_app, path, command)]


def test_every_command_shows_every_option_name_and_bracket_whole_at_80_columns() -> None:
    root = typer.main.get_command(app)
    walked = {" ".join(path) for path, _ in commands(root)}
    assert {"run", "fix", "node join", "export inspect", "corpus build"} <= walked
    assert everything_unreadable(app) == []


def test_the_top_level_help_says_what_trialbox_is_for() -> None:
    shown = " ".join(help_at_80(app, ()).split())
    assert "Thin on purpose" not in shown
    assert "runs scenarios against the GAIA Agent UI" in shown
    assert "Exit codes: 0 completed" in shown


def test_node_help_names_the_extra_it_needs_in_brackets() -> None:
    shown = " ".join(help_at_80(app, ()).split()) + " ".join(help_at_80(app, ("node",)).split())
    assert "needs trialbox[cluster]" in shown


def _planted() -> typer.Typer:
    """The fault this test guards against: rich help panels at 80 columns, a long option name
    beside a long help line, and a bracket the markup eats."""
    planted = typer.Typer(rich_markup_mode="rich")

    @planted.command()
    def fix(
        target_pass_rate_for_the_loop: Annotated[float, typer.Option(
            help="stop when this rate (0-1) is reached, after as many iterations as allowed")] = 0.9,
        fixer_budget_usd_per_iteration: Annotated[float, typer.Option(
            help="claude-code: dollars per iteration of the loop, spent on the fixer's model")] = 2.0,
        node: Annotated[str, typer.Option(help="needs trialbox[cluster]")] = "",
    ) -> None:
        """A command as the CLI had it."""

    @planted.command()
    def other() -> None:
        """A second command, so `fix` is a sub-command."""

    return planted


def test_the_check_finds_a_cut_option_name_and_an_eaten_bracket() -> None:
    pytest.importorskip("rich")
    problems = everything_unreadable(_planted())
    assert any("--target-pass-rate-for-the-loop not shown whole" in p for p in problems), problems
    assert any("'[cluster]' lost" in p for p in problems), problems
