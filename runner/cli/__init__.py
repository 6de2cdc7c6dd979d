"""The typer app: one module per command group; it parses, calls and prints."""

from runner.cli.app import main

__all__ = ["main"]
