"""`ledger db`: the Alembic revision chain, through the same env.py as `alembic`."""

from __future__ import annotations

from typing import Annotated

import typer

from .cli_options import DbOpt
from .errors import LedgerError

app = typer.Typer(help="Schema migrations (the same revisions `alembic` runs).", no_args_is_help=True)


def _status(db: str | None, *, must_exist: bool):
    """(url, revision, status) of the database, refusing the states no migration
    should touch: a revision this ledger does not know, tables not made by it."""
    from .db import file_url, make_engine, refusal, revision_status
    from .dburl import sqlite_path

    url = file_url(db)
    path = sqlite_path(url)
    if must_exist and path is not None and not path.exists():
        raise LedgerError(f"no ledger database at {path}")
    engine = make_engine(url)
    try:
        rev, status = revision_status(engine, url)
    finally:
        engine.dispose()
    if status in ("newer", "foreign"):
        raise LedgerError(refusal(url, rev, status))
    return url, rev, status


def _now_at(url: str) -> str:
    from .db import current_revision, make_engine

    engine = make_engine(url)
    try:
        return current_revision(engine) or "base (empty)"
    finally:
        engine.dispose()


def _migrate(direction: str, revision: str, db: str | None) -> None:
    from . import db as ledger_db

    url, _, _ = _status(db, must_exist=direction == "downgrade")  # upgrade may create
    getattr(ledger_db, direction)(url, revision)
    typer.echo(f"at revision {_now_at(url)}")


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
    from .db import REVISIONS

    _, rev, status = _status(db, must_exist=True)
    if status == "empty":
        typer.echo("no revision (empty database)")
    elif status == "head":
        typer.echo(f"{rev} (head)")
    else:
        typer.echo(f"{rev} (head is {REVISIONS[-1]}: run `ledger db upgrade`)")
