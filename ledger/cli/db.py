"""`ledger db`: the Alembic revision chain, through the same env.py as `alembic`."""

from __future__ import annotations

from typing import Annotated

import typer

from ledger.cli.options import DbOpt

app = typer.Typer(help="Schema migrations (the same revisions `alembic` runs).", no_args_is_help=True)


def _migrate(direction: str, revision: str, db: str | None) -> None:
    from ledger.storage.open import open_ledger

    with open_ledger(db, "migrate", create=direction == "upgrade") as ledger:
        ledger.migrate(direction, revision)
        typer.echo(f"at revision {ledger.revision or 'base (empty)'}")


@app.command("upgrade")
def upgrade_cmd(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
    db: DbOpt = None,
) -> None:
    """Upgrade the schema (and run data migrations) to REVISION."""
    _migrate("upgrade", revision, db)


@app.command("downgrade")
def downgrade_cmd(
    revision: Annotated[str, typer.Argument(help="Target revision, e.g. 0001, or base.")],
    db: DbOpt = None,
) -> None:
    """Downgrade the schema to REVISION (lossless: see the README)."""
    _migrate("downgrade", revision, db)


@app.command("current")
def current_cmd(db: DbOpt = None) -> None:
    """Print the database's revision and whether it is at head."""
    from ledger.storage.open import open_ledger
    from ledger.storage.revisions import EMPTY, HEAD, HEAD_

    with open_ledger(db, "migrate") as ledger:
        rev, status = ledger.revision, ledger.status
    if status == EMPTY:
        typer.echo("no revision (empty database)")
    elif status == HEAD_:
        typer.echo(f"{rev} (head)")
    else:
        typer.echo(f"{rev} (head is {HEAD}: run `ledger db upgrade`)")
