"""``python -m runner.corpus build|verify|large`` (the lead wires ``trialbox corpus`` to these)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from runner.corpus import build_corpus, default_corpus_root, read_manifest, verify_facts
from runner.corpus._large import DEFAULT_LARGE_CHARS, write_large_register
from runner.system.writes import WriteRefused

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Build and verify the evaluation corpus.")


@contextmanager
def _writes() -> Iterator[None]:
    """A write refused is one line: exit 3 for a full or failing disk, else 2 (the place)."""
    try:
        yield
    except WriteRefused as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(3 if exc.infrastructure else 2) from None


CorpusRoot = Annotated[Path | None, typer.Option(
    "--corpus-root", help="the folder holding manifest.json (default: eval/corpus)")]


@app.command()
def build(
    corpus_root: CorpusRoot = None,
    real_world: Annotated[bool, typer.Option(
        help="fetch the real-world texts (licences, PyPI READMEs)")] = True,
    cache_dir: Annotated[Path | None, typer.Option(
        help="where downloaded sdists are kept (default .cache/corpus)")] = None,
    update_checksums: Annotated[bool, typer.Option(
        help="write the sha256 of the bytes on disk into the manifest (corpus authors only)")]
    = False,
) -> None:
    """Generate documents, fetch real-world texts, check every checksum."""
    root = corpus_root or default_corpus_root()
    with _writes():
        report = build_corpus(root, real_world=real_world, cache_dir=cache_dir,
                              update_checksums=update_checksums)
    for line in report:
        typer.echo(line)
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def verify(corpus_root: CorpusRoot = None) -> None:
    """Prove every manifest fact against its document (run after build)."""
    root = corpus_root or default_corpus_root()
    report = verify_facts(read_manifest(root), root)
    for problem in report.problems:
        typer.echo(f"FAIL {problem}")
    if report.not_on_disk:
        typer.echo(f"not on disk (not verified): {', '.join(report.not_on_disk)}")
    typer.echo(f"facts verified: {report.verified}, problems: {len(report.problems)}")
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def large(
    out: Annotated[Path, typer.Argument(help="file to write (Markdown)")],
    chars: Annotated[int, typer.Option(min=1, help="at least this many characters")]
    = DEFAULT_LARGE_CHARS,
) -> None:
    """Write the large generated register (not part of the manifest; for load tests)."""
    with _writes():
        path = write_large_register(out, chars)
    typer.echo(f"{path}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    app()
