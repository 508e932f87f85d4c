"""Where a database stands in the revision chain, and what a command may do there.

The chain is listed here rather than read from migrations/ at every command:
importing alembic to parse the revision files cost every `ledger` command ~0.4 s.
tests/test_migrations.py holds this list to the real chain.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ledger.errors import LedgerError, first_line
from ledger.storage.sqlite_file import read_only

REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010", "0011", "0012", "0013", "0014", "0015", "0016", "0017", "0018", "0019", "0020", "0021", "0022", "0023", "0024", "0025")
HEAD = REVISIONS[-1]

# status: head, older, newer (a revision this ledger does not know), empty (no
# tables at all) or foreign (tables but no alembic_version).
HEAD_, OLDER, NEWER, EMPTY, FOREIGN = "head", "older", "newer", "empty", "foreign"


def classify(rev: str | None, tables: set[str]) -> tuple[str | None, str]:
    if rev is None:
        # alembic leaves its empty version table behind after `downgrade base`
        return None, (FOREIGN if tables - {"alembic_version"} else EMPTY)
    if rev == HEAD:
        return rev, HEAD_
    return rev, (OLDER if rev in REVISIONS else NEWER)


def sqlite_status(path: Path) -> tuple[str | None, str]:
    """(revision, status) of a SQLite file, read with sqlite3 alone, read-only: a
    missing file is empty and stays missing."""
    if not path.exists():
        if not path.parent.is_dir():
            raise LedgerError(f"cannot open {path}: no directory {path.parent}")
        return None, EMPTY
    try:
        with read_only(path) as con:
            return connection_status(con)
    except sqlite3.DatabaseError as exc:
        raise LedgerError(f"cannot open {path}: {exc}") from None


def connection_status(con: sqlite3.Connection) -> tuple[str | None, str]:
    """(revision, status) of the SQLite file open on `con`."""
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    rev = None
    if "alembic_version" in tables:
        rev = con.execute("SELECT version_num FROM alembic_version").fetchone()
        rev = rev[0] if rev else None
    return classify(rev, tables)


def engine_status(engine, display: str) -> tuple[str | None, str]:
    """(revision, status) through SQLAlchemy, for the server backends."""
    from sqlalchemy import inspect, text
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            rev = None
            if "alembic_version" in tables:
                rev = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except SQLAlchemyError as exc:
        raise LedgerError(f"cannot open {display}: {first_line(exc)}") from None
    return classify(rev, tables)


# What each way of opening a database takes besides head. `ledger db` moves any
# revision this ledger knows, from none up; a write brings an empty database to head
# first; a merge source at an older revision is merged from a copy brought to head.
ACCEPTS = {"read": (), "write": (EMPTY,), "migrate": (EMPTY, OLDER), "merge": (OLDER,)}


def gate(display: str, rev: str | None, status: str, mode: str) -> None:
    """Refuse, in one line, a database in a state that `mode` may not act on."""
    if status != HEAD_ and status not in ACCEPTS[mode]:
        raise LedgerError(refusal(display, rev, status))


def refusal(display: str, rev: str | None, status: str) -> str:
    """Why a command will not act on a database in this state."""
    return {
        EMPTY: f"{display} is an empty database: nothing to read",
        FOREIGN: f"{display} has tables but no alembic_version: not a ledger database "
        "(one made by hand holding the legacy schema can be adopted with `alembic stamp 0001`)",
        NEWER: f"{display} is at revision {rev}, which this ledger does not know "
        f"(its newest is {HEAD}): it was written by a newer ledger; upgrade the ledger",
        OLDER: f"{display} is at revision {rev}, this ledger needs {HEAD}: "
        "run `ledger db upgrade` (or `alembic upgrade head`) first",
    }[status]
