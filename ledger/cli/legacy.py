"""`ledger import` and `ledger export`: the legacy JSON shape in and out."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ledger.cli.options import DbOpt
from ledger.errors import LedgerError
from ledger.record import CACHE_STATES


def import_cmd(
    paths: Annotated[list[Path], typer.Argument(help="Legacy results trees (<root>/<hardware>/<name>.json) or JSON files.")],
    skip_invalid: Annotated[bool, typer.Option("--skip-invalid", help="Import the valid records and list what was skipped.")] = False,
    db: DbOpt = None,
) -> None:
    """Import legacy JSON results: all or nothing, and idempotent."""
    from ledger import command


    def progress(files):
        if not sys.stderr.isatty():
            yield from files
            return
        with typer.progressbar(files, label="reading", file=sys.stderr) as bar:
            yield from bar

    summary = command.import_json(paths, db, skip_invalid=skip_invalid, progress=progress)
    for msg in summary.skipped:
        typer.echo(f"skipped: {msg}", err=True)
    states = ", ".join(f"{s} {summary.by_state.get(s, 0)}" for s in CACHE_STATES)
    typer.echo(
        f"{summary.records} records in {summary.files} files: "
        f"{summary.added_compile} compile rows added ({states}), "
        f"{summary.added_instrument} instrument records added, "
        f"{summary.duplicates} already present"
        + (f", {len(summary.skipped)} skipped" if summary.skipped else "")
    )


def export_cmd(
    output: Annotated[Path | None, typer.Option("--output", "-o", help="File to write (default: stdout).")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="json (re-importable) or csv (compile rows).")] = "json",
    db: DbOpt = None,
) -> None:
    """Export the ledger as JSON (legacy shape plus new fields) or CSV."""
    from ledger import command
    from ledger.files import atomic_write

    content = command.export(db, fmt)
    if output is None:
        typer.echo(content, nl=False)
        return
    try:
        atomic_write(output, content)
    except OSError as exc:
        raise LedgerError(f"cannot write {output}: {exc.strerror or exc}") from None
