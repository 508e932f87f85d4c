"""The one database resolver: --db, then LEDGER_DB, then ./ledger.db.

Used by the CLI and by migrations/env.py, so `alembic upgrade head` and `ledger`
always mean the same database. A plain path and a SQLAlchemy URL both work.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ledger.errors import LedgerError

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


@dataclass(frozen=True)
class Target:
    """The database a command means: a SQLAlchemy URL, or a SQLite file path.

    A plain path stays a path until something needs its URL: `ledger sql` on a
    SQLite file never imports SQLAlchemy (0.3 s of an ad-hoc query's start-up)."""

    value: str  # a URL, or an absolute file path

    @cached_property
    def path(self) -> Path | None:
        """The SQLite file, or None for other backends and in-memory databases."""
        return sqlite_path(self.value) if is_url(self.value) else Path(self.value)

    @cached_property
    def url(self) -> str:
        if is_url(self.value):
            return self.value
        from sqlalchemy.engine import URL

        # URL.create escapes the path: a '?' or '#' in a file name stays in the name
        return URL.create("sqlite", database=self.value).render_as_string(hide_password=False)

    @property
    def display(self) -> str:
        """How the database may appear in a message: a path, or a redacted URL."""
        return str(self.path) if self.path is not None else redact(self.value)


def resolve(db: str | None = None, *, from_command_line: bool = True) -> Target:
    """The database for `db`, falling back to LEDGER_DB and ./ledger.db."""
    if db and from_command_line and is_url(db) and has_password(db):
        # typed on a command line, a password ends up in shell history and `ps`
        raise LedgerError(
            f"--db carries a password: put the URL in the {ENV_VAR} environment variable instead"
        )
    value = db or os.environ.get(ENV_VAR) or DEFAULT_PATH
    _check_text(value)
    target = Target(value) if is_url(value) else Target(str(Path(value).expanduser().resolve()))
    if target.path is not None:
        _check_path(target.path)
    return target


def _check_text(value: str) -> None:
    """Every database the CLI opens enters here, so here a name is refused once, before
    a command measures or writes anything. A file name that is not UTF-8 (a byte like
    \\xff, which Python carries as a lone surrogate) cannot become a SQLAlchemy URL."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        shown = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise LedgerError(f"the database name {redact(shown)} is not UTF-8 text: "
                          "give it a UTF-8 name (or a link with one)") from None


def _check_path(path: Path) -> None:
    """A path the system cannot look up (a name too long, a loop of links, a folder
    on the way it may not enter) is one line here, not a traceback from whichever
    command looks first."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        pass  # each command says what a missing ledger means to it
    except OSError as exc:  # ENAMETOOLONG, ELOOP, EACCES on a folder on the way
        name = str(path)
        shown = name if len(name) <= 200 else f"{name[:200]}... ({len(name)} characters)"
        raise LedgerError(f"cannot use the database path {shown}: {exc.strerror}") from None


def resolve_db_url(db: str | None = None, *, from_command_line: bool = True) -> str:
    """The SQLAlchemy URL for `db` (see resolve())."""
    return resolve(db, from_command_line=from_command_line).url


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
