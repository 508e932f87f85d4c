"""Options shared by every command group."""

from __future__ import annotations

from typing import Annotated

import typer

# Not envvar=LEDGER_DB: the resolver reads the environment itself, and only a URL
# typed on the command line is refused for carrying a password.
DbOpt = Annotated[
    str | None,
    typer.Option("--db", help="Database file or SQLAlchemy URL (else $LEDGER_DB, else ./ledger.db)."),
]
