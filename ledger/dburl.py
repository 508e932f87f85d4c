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
# The user-info part of scheme://user:password@host/...: up to the LAST '@', since a
# password may hold '@' or '/' (over-redacting an '@' in a database name is the safe
# side). A password can also travel as a query parameter.
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://[^:@]*):(.*)@")
_QUERY_PASSWORD = re.compile(r"([?&](?:password|passwd|pwd)=)[^&]*", re.IGNORECASE)


def has_password(url: str) -> bool:
    return bool(_USERINFO.match(url) or _QUERY_PASSWORD.search(url))


def is_url(value: str) -> bool:
    return bool(_URL.match(value))


def resolve_db_url(db: str | None = None, *, from_command_line: bool = True) -> str:
    """The SQLAlchemy URL for `db`, falling back to LEDGER_DB and ./ledger.db."""
    if db and from_command_line and is_url(db) and has_password(db):
        # typed on a command line, a password ends up in shell history and `ps`
        raise LedgerError(
            f"--db carries a password: put the URL in the {ENV_VAR} environment variable instead"
        )
    value = db or os.environ.get(ENV_VAR) or DEFAULT_PATH
    if is_url(value):
        return value
    from sqlalchemy.engine import URL

    # URL.create escapes the path: a '?' or '#' in a file name stays in the name
    path = str(Path(value).expanduser().resolve())
    return URL.create("sqlite", database=path).render_as_string(hide_password=False)


def sqlite_path(url: str) -> Path | None:
    """The file behind a sqlite URL, or None for other backends and in-memory DBs."""
    if not url.startswith("sqlite"):
        return None
    from sqlalchemy.engine import make_url

    database = make_url(url).database
    if database in (None, "", ":memory:") or database.startswith("file:"):
        return None
    return Path(database)


def redact(url: str) -> str:
    """The URL as it may appear in a message or a log: never with its password; a
    SQLite file is shown as its path."""
    path = sqlite_path(url)
    if path is not None:
        return str(path)
    return _QUERY_PASSWORD.sub(r"\1***", _USERINFO.sub(r"\1:***@", url, count=1))
