"""`trialbox capture`: a real GAIA Agent UI conversation becomes a regression scenario.

Reads a chat database (a user's `~/.gaia/chat/gaia_chat.db`, or a sandbox's
`results/<run>/artifacts/<id>/gaia_chat.db`) read-only and writes one scenario YAML in GAIA's
captured form under `eval/scenarios/captured/`, then loads it with our own loader so the
author learns at once whether it will run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from runner.capture._chatdb import (
    DEFAULT_DB,
    REQUIRED_COLUMNS,
    CapturedSession,
    CapturedTurn,
    CaptureError,
    SessionDocument,
    SessionSummary,
    default_db,
    list_sessions,
    open_chat_db,
    pair_turns,
    read_session,
    tools_from_steps,
)
from runner.capture._scenario import (
    CATEGORY,
    REVIEW_NOTE,
    build_scenario,
    check_form,
    document_path,
    render_yaml,
    scenario_id_for,
)
from runner.run.errors import EXIT_INFRA, EXIT_USAGE
from runner.scenarios import Problem, load_suite
from runner.system.paths import eval_root
from runner.system.writes import WriteRefused, atomic_write, check_destination

__all__ = [
    "CATEGORY",
    "DEFAULT_DB",
    "REQUIRED_COLUMNS",
    "REVIEW_NOTE",
    "CaptureError",
    "CaptureResult",
    "CapturedSession",
    "CapturedTurn",
    "SessionDocument",
    "SessionSummary",
    "build_scenario",
    "capture",
    "capture_command",
    "default_db",
    "document_path",
    "list_sessions",
    "open_chat_db",
    "pair_turns",
    "read_session",
    "render_yaml",
    "scenario_id_for",
    "tools_from_steps",
]


@dataclass
class CaptureResult:
    """What capture wrote, and what our loader says about it."""

    path: Path
    scenario_id: str
    session: CapturedSession
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        return [problem for problem in self.problems if problem.is_error]


def default_out_dir() -> Path:
    return eval_root() / "scenarios" / CATEGORY


def default_corpus() -> Path:
    return eval_root() / "corpus"


def capture(database: Path, session_id: str | None = None, *, out_dir: Path | None = None,
            corpus_root: Path | None = None, force: bool = False,
            now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> CaptureResult:
    """Write the session as `<out_dir>/<scenario id>.yaml` and validate it against the corpus.

    Refuses (CaptureError) to overwrite an existing file unless `force`: a captured scenario
    is usually reviewed and edited by hand afterwards, and a second capture must not undo that.
    """
    out_dir = out_dir if out_dir is not None else default_out_dir()
    corpus_root = corpus_root if corpus_root is not None else default_corpus()
    session = read_session(database, session_id)
    data = build_scenario(session, corpus_root, database, now())
    try:
        check_form(data)
    except ValidationError as exc:  # a capture bug, not the user's: say so plainly
        raise AssertionError(f"capture built a scenario our model rejects: {exc}") from exc
    target = out_dir / f"{data['id']}.yaml"
    if out_dir.exists() and not out_dir.is_dir():
        raise CaptureError(f"--out {out_dir}: is a file; give a folder")
    try:
        # Refused before --force is looked at: a folder, a FIFO or a device by that name is
        # never renamed over (--force replaces a scenario file, nothing else).
        check_destination(target)
    except WriteRefused as exc:
        raise CaptureError(f"--out {out_dir}: {exc}") from None
    if target.exists() and not force:
        raise CaptureError(f"{target}: already exists (perhaps reviewed by hand); pass --force "
                           "to overwrite it, or --out DIR to write elsewhere")
    try:  # whole or not at all: a full disk never leaves half a scenario for review
        atomic_write(target, render_yaml(data))
    except WriteRefused as exc:
        if exc.infrastructure:  # the machine's, not the user's: exit 3 (capture_command)
            raise
        raise CaptureError(f"--out {out_dir}: cannot write {target.name} there ({exc}); give a "
                           "folder you can write to") from None
    suite = load_suite([target], corpus_root)
    return CaptureResult(path=target, scenario_id=data["id"], session=session,
                         problems=list(suite.problems))


def capture_command(
    db: Annotated[Path | None, typer.Argument(
        help="a GAIA Agent UI chat database: a run's results/<run>/artifacts/<id>/gaia_chat.db "
             "[default: the user's, $GAIA_HOME/chat/gaia_chat.db or ~/.gaia/chat/gaia_chat.db]",
        show_default=False)] = None,
    session: Annotated[str | None, typer.Option(
        "--session", help="the session id or a unique prefix [default: the only session with "
                          "replies]")] = None,
    list_only: Annotated[bool, typer.Option("--list", help="list the sessions and stop")] = False,
    out: Annotated[Path | None, typer.Option(
        "--out", help="folder for the scenario [default: eval/scenarios/captured]")] = None,
    corpus: Annotated[Path | None, typer.Option(
        "--corpus", help="corpus root: documents with the same bytes are written relative to "
                         "it, and the scenario is validated against it [default: eval/corpus]")] = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite an existing file")] = False,
) -> None:
    """Turn a GAIA Agent UI conversation into a scenario (GAIA's captured form) and validate it."""
    db = db if db is not None else default_db()
    try:
        if list_only:
            _print_sessions(db, list_sessions(db))
            return
        result = capture(db, session, out_dir=out, corpus_root=corpus, force=force)
    except CaptureError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    except WriteRefused as exc:  # a full or failing disk (capture raises only those as such)
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_INFRA) from None
    summary = result.session.summary
    typer.echo(f"wrote {result.path}")
    typer.echo(f"  session {summary.id} {summary.title!r}: {len(result.session.turns)} turn(s), "
               f"{len(result.session.documents)} document(s); scenario id {result.scenario_id}")
    for problem in result.problems:
        typer.echo(f"  {problem}")
    if result.errors:
        typer.echo(f"error: the captured scenario does not validate against the corpus "
                   f"{corpus or default_corpus()}; fix the problems above (or pass --corpus "
                   "with the folder that holds its documents) and capture again with --force",
                   err=True)
        raise typer.Exit(EXIT_USAGE)
    typer.echo("  valid; review each success_criteria (it quotes the captured reply) before "
               "relying on it")


def _print_sessions(db: Path, sessions: list[SessionSummary]) -> None:
    if not sessions:
        typer.echo(f"{db}: no sessions")
        return
    for item in sessions:
        typer.echo(f"{item.id}  {item.created_at:19}  {item.turns:3} turn(s) "
                   f"{item.documents:2} doc(s)  {item.title}")
