"""SQLAlchemy engines, with SQLite made transactional.

SQLite's Python driver opens transactions lazily and not for DDL, so a migration
that fails half-way would leave half a schema. We take transaction control
(isolation_level=None plus an explicit BEGIN on every SQLAlchemy begin), which
makes DDL transactional: a failed upgrade rolls back to where it started.

Every transaction of an engine that may write begins IMMEDIATE: it takes the write
lock first and waits for it (the busy timeout). A deferred transaction that reads
(the import's duplicate check) and then writes fails at once with "database is
locked" when another writer holds the lock, and no timeout can help it; with
IMMEDIATE, many writers queue and all of their rows arrive.
"""

from __future__ import annotations

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError

from ledger.errors import LedgerError
from ledger.storage.sqlite_file import busy_timeout_s
from ledger.storage.url import redact


# A PostgreSQL session whose every transaction is read-only: no statement text can
# end the read-only transaction and start a writable one (COMMIT; DELETE ...).
_PG_READ_ONLY = "-c default_transaction_read_only=on"


def make_engine(url: str, *, read_only: bool = False, wal: bool = False) -> Engine:
    """An engine for ``url``; ``read_only`` engines cannot write on either backend;
    ``wal`` puts a SQLite file in WAL mode (readers never wait for writers)."""
    kwargs = {}
    if read_only and url.startswith("postgresql"):
        kwargs["connect_args"] = {"options": _PG_READ_ONLY}
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"timeout": busy_timeout_s()}
    try:
        engine = create_engine(url, **kwargs)
    except ModuleNotFoundError as exc:
        raise LedgerError(f"no driver for {url.split(':', 1)[0]}: install the {exc.name} package") from None
    except ArgumentError:
        # not the exception's text: it quotes the URL, password and all
        raise LedgerError(f"not a database URL: {redact(url)}") from None
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def _connect(dbapi_conn, _record):
            dbapi_conn.isolation_level = None
            dbapi_conn.execute("PRAGMA foreign_keys = ON")
            if read_only:
                dbapi_conn.execute("PRAGMA query_only = ON")
            elif wal:
                dbapi_conn.execute("PRAGMA journal_mode = WAL")

        begin = "BEGIN" if read_only else "BEGIN IMMEDIATE"

        @event.listens_for(engine, "begin")
        def _begin(conn):
            conn.exec_driver_sql(begin)

    return engine
