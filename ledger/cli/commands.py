"""The `ledger` command, every group and command of it (ledger/cli/__init__.py: the entry).

Each command resolves the database, calls one library function and prints. User
errors are LedgerError, turned into one line on stderr and a non-zero exit at the
root (LedgerGroup); `--traceback` shows the traceback instead. Heavy imports
(SQLAlchemy, alembic, jax) happen inside commands so `ledger --help` stays fast.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ledger.cli.group import _TRACEBACK, LedgerGroup

app = typer.Typer(
    cls=LedgerGroup,
    help="Per-transform JAX compile measurements, with a measured cache_state, in SQLite.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)



def _print_version(value: bool) -> None:
    if value:
        import ledger

        typer.echo(f"ledger {ledger.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    traceback: Annotated[bool, typer.Option("--traceback", help="Show tracebacks for errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    ctx.meta[_TRACEBACK] = traceback


from ledger.cli import cache, db, legacy, merge, pins, predict, probe, record, report, runs, sql, sweep, watch

app.command("import")(legacy.import_cmd)
app.command("export")(legacy.export_cmd)
app.command("merge")(merge.merge_cmd)
app.command("sql")(sql.sql_cmd)
app.command("probe")(probe.probe_cmd)
app.command("objectives")(probe.objectives_cmd)
app.command("predict")(predict.predict_cmd)
app.command("record", context_settings={"allow_interspersed_args": False})(record.record_cmd)
app.add_typer(db.app, name="db")
app.add_typer(pins.app, name="pins")
app.add_typer(sweep.app, name="sweep")
app.command("check")(watch.check_cmd)
app.command("explain")(watch.explain_cmd)
app.command("report")(report.report_cmd)
app.command("runs")(runs.runs_cmd)
app.command("diff")(runs.diff_cmd)
app.add_typer(cache.app, name="cache")
