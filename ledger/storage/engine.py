"""SQLAlchemy engines, with SQLite made transactional.

SQLite's Python driver opens transactions lazily and not for DDL, so a migration
that fails half-way would leave half a schema. We take transaction control
(isolation_level=None plus an explicit BEGIN on every SQLAlchemy begin), which
makes DDL transactional: a failed upgrade rolls back to where it started.
"""

from __future__ import annotations

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError

from ledger.errors import LedgerError
from ledger.storage.url import redact


# A PostgreSQL session whose every transaction is read-only: no statement text can
# end the read-only transaction and start a writable one (COMMIT; DELETE ...).
_PG_READ_ONLY = "-c default_transaction_read_only=on"


def make_engine(url: str, *, read_only: bool = False) -> Engine:
    """An engine for ``url``; ``read_only`` engines cannot write on either backend."""
    kwargs = {}
    if read_only and url.startswith("postgresql"):
        kwargs["connect_args"] = {"options": _PG_READ_ONLY}
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

        @event.listens_for(engine, "begin")
        def _begin(conn):
            conn.exec_driver_sql("BEGIN")

    return engine
