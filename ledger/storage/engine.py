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


def make_engine(url: str) -> Engine:
    try:
        engine = create_engine(url)
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

        @event.listens_for(engine, "begin")
        def _begin(conn):
            conn.exec_driver_sql("BEGIN")

    return engine
