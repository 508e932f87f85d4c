"""The one database resolver: --db, then LEDGER_DB, then ./ledger.db.

Used by the CLI and by migrations/env.py, so `alembic upgrade head` and `ledger`
always mean the same database. A plain path and a SQLAlchemy URL both work.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import LedgerError

ENV_VAR = "LEDGER_DB"
DEFAULT_PATH = "ledger.db"
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
# scheme://user:password@host: a password typed on a command line ends up in shell
# history and `ps`; it has to come from the environment instead.
_PASSWORD_IN_URL = re.compile(r"^[^:/]+://[^/@:]*:[^/@]+@")


def is_url(value: str) -> bool:
    return bool(_URL.match(value))


def resolve_db_url(db: str | None = None, *, from_command_line: bool = True) -> str:
    """The SQLAlchemy URL for `db`, falling back to LEDGER_DB and ./ledger.db."""
    if db and from_command_line and _PASSWORD_IN_URL.match(db):
        raise LedgerError(
            f"--db carries a password: put the URL in the {ENV_VAR} environment variable instead"
        )
    value = db or os.environ.get(ENV_VAR) or DEFAULT_PATH
    if is_url(value):
        return value
    return "sqlite:///" + str(Path(value).expanduser().resolve())


def sqlite_path(url: str) -> Path | None:
    """The file behind a sqlite URL, or None for other backends and in-memory DBs."""
    if not url.startswith("sqlite"):
        return None
    rest = url.split("://", 1)[1]
    if rest.startswith("/"):
        rest = rest[1:]
    rest = rest.split("?", 1)[0]
    if rest in ("", ":memory:"):
        return None
    return Path(rest)


def redact(url: str) -> str:
    """The URL as it may appear in a message or a log: never with its password; a
    SQLite file is shown as its path."""
    path = sqlite_path(url)
    if path is not None:
        return str(path)
    return re.sub(r"^([^:/]+://[^/@:]*):[^/@]+@", r"\1:***@", url)
