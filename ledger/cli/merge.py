"""`ledger merge`: per-node ledgers into one, as a thin shell over ledger.merge."""

from __future__ import annotations

from typing import Annotated

import typer

from ledger.cli.options import DbOpt
from ledger.errors import one_line


def merge_cmd(
    sources: Annotated[list[str], typer.Argument(help="Ledgers to merge from (files or URLs); never changed.")],
    db: DbOpt = None,
) -> None:
    """Merge per-node ledgers into this one: idempotent, all or nothing; conflicts listed."""
    from ledger import command

    display, summaries = command.merge(sources, db)
    for s in summaries:
        typer.echo(f"merged {one_line(s.line())}")
        for conflict in (*s.conflicts, *s.pins.conflicts):
            typer.echo(f"  conflict: {one_line(conflict)}")
        for skipped in s.pins.skipped:
            typer.echo(f"warning: {one_line(s.display)}: {one_line(skipped)}; not merged"
                       " (`ledger pins update` pins that key from the merged rows)", err=True)
    added = sum(s.added for s in summaries)
    typer.echo(f"{len(summaries)} ledgers merged into {display}: {added} compile rows added")
