"""A read made beside a write transaction: one SELECT on a connection of its own, in a
thread, while the writer's connection goes on with other statements, so that a check
uses both cores (SQLite lets go of Python's lock while it steps; PostgreSQL reads in a
server process of its own).

What it reads is what the writer would read where the writer has changed none of the
tables it reads, and no other writer can commit to them meanwhile: on SQLite the writer
holds the write lock (BEGIN IMMEDIATE) and the reader's snapshot (WAL) is the last
commit; on PostgreSQL the writer's SHARE lock on compile_records (cells.begin_fold)
keeps every other insert out, and the reader sees what is committed. The cache cells'
rebuild (ledger/watch/cells.py) and the judgement of every pinned row
(ledger/watch/check.py) use it on a first check.
"""

from __future__ import annotations

import threading

import sqlalchemy as sa

from ledger.storage.engine import read_connection
from ledger.storage.url import sqlite_path


class AsideRead:
    """One SELECT's rows, read in a thread on a connection of its own (the engine's,
    beginning a transaction that only reads)."""

    def __init__(self, engine, sql: str, params: dict, setup: tuple[str, ...] = ()):
        self._dbapi = None  # the reader's driver connection, once it has one (cancel)
        self._rows: list[tuple] | None = None
        self._error: Exception | None = None
        self._ready = threading.Event()  # it has a connection, or failed to get one
        self._thread = threading.Thread(target=self._read, args=(engine, sql, params, setup), daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, conn, sql: str, params: dict, setup: tuple[str, ...] = ()) -> AsideRead | None:
        """The read begun beside `conn`, or None where it cannot be: a SQLite database in
        memory has no second connection to it."""
        url = conn.engine.url
        if url.get_backend_name() == "sqlite" and sqlite_path(url.render_as_string(hide_password=False)) is None:
            return None
        return cls(conn.engine, sql, params, setup)

    def _read(self, engine, sql: str, params: dict, setup: tuple[str, ...]) -> None:
        try:
            with read_connection(engine) as conn:
                self._dbapi = conn.connection.dbapi_connection
                self._ready.set()
                for statement in setup:
                    conn.exec_driver_sql(statement)
                self._rows = [tuple(r) for r in conn.execute(sa.text(sql), params)]
        except Exception as exc:  # noqa: BLE001 - handed to the caller by rows()
            self._error = exc
        finally:
            self._ready.set()

    def rows(self) -> list[tuple]:
        """The rows, once read; the reader's error, if it failed."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._rows

    def cancel(self) -> None:
        """Stop the read (the writer gave up) and wait for its thread to end."""
        self._ready.wait()
        if self._dbapi is not None and self._thread.is_alive():
            stop = getattr(self._dbapi, "interrupt", None) or self._dbapi.cancel  # sqlite3's, psycopg's
            try:
                stop()
            except Exception:  # noqa: BLE001, S110 - the read ended meanwhile: nothing to stop
                pass
        self._thread.join()
