"""The `ledger` command: a thin shell over the library.

Each command resolves the database, calls one library function and prints. User
errors are LedgerError, turned into one line on stderr and a non-zero exit at the
root (LedgerGroup); `--traceback` shows the traceback instead. Heavy imports
(SQLAlchemy, alembic, jax) happen inside commands so `ledger --help` stays fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional


import typer
from typer.core import TyperGroup
from typing import Annotated

from .cli_options import DbOpt
from .errors import LedgerError, first_line

_TRACEBACK = "ledger.traceback"


def _as_ledger_error(exc: Exception) -> LedgerError | None:
    if isinstance(exc, LedgerError):
        return exc
    module = type(exc).__module__
    if module.startswith("sqlalchemy"):
        from .dburl import redact

        return LedgerError(f"database error: {redact(first_line(exc))}")
    if module.startswith("alembic") and type(exc).__name__ == "CommandError":
        return LedgerError(f"migration error: {exc}")
    return None


class LedgerGroup(TyperGroup):
    def invoke(self, ctx: typer.Context):
        try:
            return super().invoke(ctx)
        except Exception as exc:
            error = _as_ledger_error(exc)
            if error is None or ctx.meta.get(_TRACEBACK):
                raise
            typer.echo(f"error: {error}", err=True)
            ctx.exit(error.exit_code)


app = typer.Typer(
    cls=LedgerGroup,
    help="Per-transform JAX compile measurements, with a measured cache_state, in SQLite.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)



@app.callback()
def _root(
    ctx: typer.Context,
    traceback: Annotated[bool, typer.Option("--traceback", help="Show tracebacks for errors.")] = False,
) -> None:
    ctx.meta[_TRACEBACK] = traceback


@app.command("import")
def import_cmd(
    paths: Annotated[List[Path], typer.Argument(help="Legacy results trees (<root>/<hardware>/<name>.json) or JSON files.")],
    skip_invalid: Annotated[bool, typer.Option("--skip-invalid", help="Import the valid records and list what was skipped.")] = False,
    db: DbOpt = None,
) -> None:
    """Import legacy JSON results: all or nothing, and idempotent."""
    from .db import writing
    from .importer import find_json_files, import_paths

    find_json_files(paths)  # a missing path fails before any database is made

    def progress(files):
        if not sys.stderr.isatty():
            yield from files
            return
        with typer.progressbar(files, label="reading", file=sys.stderr) as bar:
            yield from bar

    with writing(db) as engine:
        summary = import_paths(engine, paths, skip_invalid=skip_invalid, progress=progress)
    for msg in summary.skipped:
        typer.echo(f"skipped: {msg}", err=True)
    states = ", ".join(f"{s} {summary.by_state.get(s, 0)}" for s in ("cold", "warm", "none", "unknown"))
    typer.echo(
        f"{summary.records} records in {summary.files} files: "
        f"{summary.added_compile} compile rows added ({states}), "
        f"{summary.added_instrument} instrument records added, "
        f"{summary.duplicates} already present"
        + (f", {len(summary.skipped)} skipped" if summary.skipped else "")
    )


@app.command("sql")
def sql_cmd(
    query: Annotated[str, typer.Argument(help="One read-only statement (SELECT, WITH, EXPLAIN).")],
    csv: Annotated[bool, typer.Option("--csv", help="CSV output.")] = False,
    json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
    db: DbOpt = None,
) -> None:
    """Run one read-only SQL query and print the result."""
    from .output import format_csv, format_json, format_table
    from .sqlquery import run_query

    if csv and json:
        raise LedgerError("choose one of --csv and --json")
    columns, rows = run_query(db, query)
    fmt = format_csv if csv else format_json if json else format_table
    typer.echo(fmt(columns, rows), nl=False)


@app.command("export")
def export_cmd(
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="File to write [default: stdout].")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="json (re-importable) or csv (compile rows).")] = "json",
    db: DbOpt = None,
) -> None:
    """Export the ledger as JSON (legacy shape plus new fields) or CSV."""
    from .db import open_for_read
    from .exporter import FORMATS, render, write_atomically

    if fmt not in FORMATS:
        raise LedgerError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    content = render(open_for_read(db), fmt)
    if output is None:
        typer.echo(content, nl=False)
        return
    try:
        write_atomically(output, content)
    except OSError as exc:
        raise LedgerError(f"cannot write {output}: {exc.strerror or exc}") from None


from . import cli_db, cli_probe  # noqa: E402

app.command("probe")(cli_probe.probe_cmd)
app.command("objectives")(cli_probe.objectives_cmd)
app.add_typer(cli_db.app, name="db")


def main() -> None:
    app()
