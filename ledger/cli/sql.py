"""`ledger sql`: one read-only statement, printed as a table, CSV or JSON."""

from __future__ import annotations

from typing import Annotated

import typer

from ledger.cli.options import DbOpt
from ledger.errors import LedgerError


def sql_cmd(
    query: Annotated[str, typer.Argument(help="One read-only statement (SELECT, WITH, EXPLAIN).")],
    csv: Annotated[bool, typer.Option("--csv", help="CSV output.")] = False,
    json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
    db: DbOpt = None,
) -> None:
    """Run one read-only SQL query and print the result."""
    from ledger.output import format_csv, format_json, format_table
    from ledger.storage.readonly import run_query

    if csv and json:
        raise LedgerError("choose one of --csv and --json")
    columns, rows = run_query(db, query)
    fmt = format_csv if csv else format_json if json else format_table
    typer.echo(fmt(columns, rows), nl=False)
