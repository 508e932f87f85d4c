"""`ledger db`: the Alembic revision chain, through the same env.py as `alembic`."""

from __future__ import annotations


import typer
from typing import Annotated

from .cli_options import DbOpt
from .errors import LedgerError

app = typer.Typer(help="Schema migrations (the same revisions `alembic` runs).", no_args_is_help=True)



def _existing_url(db: str | None) -> str:
    from .dburl import resolve_db_url, sqlite_path

    url = resolve_db_url(db)
    path = sqlite_path(url)
    if path is not None and not path.exists():
        raise LedgerError(f"no ledger database at {path}")
    return url


@app.command("upgrade")
def upgrade_cmd(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
    db: DbOpt = None,
) -> None:
    """Upgrade the schema (and run data migrations) to REVISION."""
    from .db import current_revision, make_engine, upgrade
    from .dburl import resolve_db_url

    url = resolve_db_url(db)
    upgrade(url, revision)
    typer.echo(f"at revision {current_revision(make_engine(url))}")


@app.command("downgrade")
def downgrade_cmd(
    revision: Annotated[str, typer.Argument(help="Target revision, e.g. 0001, or base.")],
    db: DbOpt = None,
) -> None:
    """Downgrade the schema to REVISION."""
    from .db import current_revision, downgrade, make_engine

    url = _existing_url(db)
    downgrade(url, revision)
    typer.echo(f"at revision {current_revision(make_engine(url)) or 'base (empty)'}")


@app.command("current")
def current_cmd(db: DbOpt = None) -> None:
    """Print the database's revision and whether it is at head."""
    from .db import current_revision, known_revisions, make_engine

    url = _existing_url(db)
    rev = current_revision(make_engine(url))
    known, head = known_revisions()
    if rev is None:
        typer.echo("no revision (empty database)")
    elif rev == head:
        typer.echo(f"{rev} (head)")
    elif rev in known:
        typer.echo(f"{rev} (head is {head}: run `ledger db upgrade`)")
    else:
        raise LedgerError(f"revision {rev} is unknown to this ledger (its head is {head})")
