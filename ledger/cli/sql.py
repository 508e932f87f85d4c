"""`ledger sql`: one read-only statement, streamed as CSV or JSON lines, or printed
as a table of at most --limit rows. Ctrl-C stops the query in the database."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import islice
from typing import Annotated

import typer

from ledger.cli.options import DbOpt, count
from ledger.errors import LedgerError

TABLE_LIMIT = 1000
INTERRUPTED_EXIT = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C ended


@contextmanager
def _first_sigint_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt once; later ones are ignored, while the first
    is handled (a PostgreSQL cancel in flight, the rollback) and after it, so that
    the command ends as the first one decided: one line, exit 130 (a second Ctrl-C
    landing in the interpreter's exit would kill it with no word). Without an
    interrupt the handler before is put back."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread; leave them as they are
        return
    hit = []

    def handler(_signum, _frame):
        if not hit:
            hit.append(True)
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN if hit else previous)


def sql_cmd(
    query: Annotated[str, typer.Argument(help="One read-only statement (SELECT, WITH, EXPLAIN).")],
    csv: Annotated[bool, typer.Option("--csv", help="CSV, streamed: every row, as it comes.")] = False,
    json: Annotated[bool, typer.Option(
        "--json", help="JSON lines, streamed: one object per row ({column: value}), every row, as it comes.")] = False,
    limit: Annotated[int | None, typer.Option(
        "--limit", callback=count, metavar="N",
        help=f"At most N rows; 0: all. Default: {TABLE_LIMIT} for the table (which holds its rows to align them), "
             "all for --csv and --json.")] = None,
    db: DbOpt = None,
) -> None:
    """Run one read-only SQL query and print the result. Ctrl-C stops it (exit 130)."""
    from ledger.command import settle
    from ledger.output import write_csv, write_json_lines, write_table
    from ledger.storage.readonly import open_query

    if csv and json:
        raise LedgerError("choose one of --csv and --json")
    cap = (None if csv or json else TABLE_LIMIT) if limit is None else limit or None
    with _first_sigint_raises():
        try:
            settle(db)  # a `ledger record` that just ended: its last rows
            with open_query(db, query) as result:
                out = sys.stdout
                rows = result.rows if cap is None or not (csv or json) else islice(result.rows, cap)
                if csv:
                    write_csv(out, result.columns, rows)
                elif json:
                    write_json_lines(out, result.columns, rows)
                else:
                    more = "; use --csv or --limit 0 for all" if limit is None else ""
                    write_table(out, result.columns, rows, cap, more)
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(INTERRUPTED_EXIT) from None

