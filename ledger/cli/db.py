"""`ledger db`: the Alembic revision chain, through the same env.py as `alembic`."""

from __future__ import annotations

from typing import Annotated

import typer

from ledger.cli.options import DbOpt

app = typer.Typer(help="Schema migrations (the same revisions `alembic` runs).", no_args_is_help=True)


def _at(revision: str | None) -> None:
    typer.echo(f"at revision {revision or 'base (empty)'}")


@app.command("upgrade")
def upgrade_cmd(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
    db: DbOpt = None,
) -> None:
    """Upgrade the schema (and run data migrations) to REVISION."""
    from ledger import command

    _at(command.upgrade(db, revision))


@app.command("downgrade")
def downgrade_cmd(
    revision: Annotated[str, typer.Argument(help="Target revision, e.g. 0001 (base drops every table).")],
    drop_data: Annotated[bool, typer.Option(
        "--drop-data", help="Down to base: drop every table even when they hold rows.")] = False,
    db: DbOpt = None,
) -> None:
    """Downgrade the schema to REVISION: lossless down to 0001 (docs/migrations.md). Base drops
    every table, and is refused on a ledger with rows unless --drop-data is given."""
    from ledger import command

    _at(command.downgrade(revision, db, drop_data=drop_data))


@app.command("current")
def current_cmd(db: DbOpt = None) -> None:
    """Print the database's revision and whether it is at head."""
    from ledger import command
    from ledger.storage.revisions import EMPTY, HEAD, HEAD_

    rev, status = command.current(db)
    if status == EMPTY:
        typer.echo("no revision (empty database)")
    elif status == HEAD_:
        typer.echo(f"{rev} (head)")
    else:
        typer.echo(f"{rev} (head is {HEAD}: run `ledger db upgrade`)")
