"""Reads made beside a write transaction: on a connection of their own, in a thread, while
the writer's connection goes on with other statements, so that a check uses both cores
(SQLite lets go of Python's lock while it steps; PostgreSQL reads in a server process of
its own).

What it reads is what the writer would read where the writer has changed none of the
tables it reads, and no other writer can commit to them meanwhile: on SQLite the writer
holds the write lock (BEGIN IMMEDIATE) and the reader's snapshot (WAL) is the last
commit; on PostgreSQL the writer's lock on compile_records (engine.one_writer_at_a_time,
taken by cells.begin_fold) keeps every other insert out, and the reader sees what is
committed. A first check reads so the cache cells' rebuild (ledger/watch/cells.py) and
its judgement of every pinned row (ledger/watch/check.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import sqlalchemy as sa

from ledger.storage.engine import read_connection
from ledger.storage.url import sqlite_path


class Aside:
    """A call of a connection of its own (`call(conn)`: what it returns), made in a thread;
    its connection's transaction begins as one that only reads."""

    def __init__(self, engine, call: Callable[[sa.Connection], object]):
        self._dbapi = None  # the reader's driver connection, once it has one (cancel)
        self._result = None
        self._error: Exception | None = None
        self._ready = threading.Event()  # it has a connection, or failed to get one
        self._thread = threading.Thread(target=self._call, args=(engine, call), daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, conn, call: Callable[[sa.Connection], object]) -> Aside | None:
        """The call begun beside `conn`, or None where it cannot be: a SQLite database in
        memory has no second connection to it."""
        url = conn.engine.url
        if url.get_backend_name() == "sqlite" and sqlite_path(url.render_as_string(hide_password=False)) is None:
            return None
        return cls(conn.engine, call)

    def _call(self, engine, call) -> None:
        try:
            with read_connection(engine) as conn:
                self._dbapi = conn.connection.dbapi_connection
                self._ready.set()
                self._result = call(conn)
        except Exception as exc:  # noqa: BLE001 - handed to the caller by result()
            self._error = exc
        finally:
            self._ready.set()

    def result(self):
        """What the call returned, once it has; its error, if it failed."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result

    def cancel(self) -> None:
        """Stop the call's statement (the writer gave up) and wait for its thread to end."""
        self._ready.wait()
        if self._dbapi is not None and self._thread.is_alive():
            stop = getattr(self._dbapi, "interrupt", None) or self._dbapi.cancel  # sqlite3's, psycopg's
            try:
                stop()
            except Exception:  # noqa: BLE001, S110 - the call ended meanwhile: nothing to stop
                pass
        self._thread.join()


def rows_of(sql: str, params: dict, setup: tuple[str, ...] = ()) -> Callable[[sa.Connection], list[tuple]]:
    """An Aside's call: the rows of one SELECT, after the `setup` statements (planner settings)."""
    def read(conn: sa.Connection) -> list[tuple]:
        for statement in setup:
            conn.exec_driver_sql(statement)
        return [tuple(r) for r in conn.execute(sa.text(sql), params)]

    return read
