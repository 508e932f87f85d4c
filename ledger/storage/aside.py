"""A read made beside a SQLite write transaction: one SELECT on a connection of its own,
in a thread, while the writer's connection goes on with other statements; the two use
both cores (SQLite lets go of Python's lock while it steps).

What it reads is what the writer would read, when the writer has changed none of the
tables it reads: the writer holds the write lock (BEGIN IMMEDIATE), so no other
connection can commit meanwhile, and the reader's snapshot (WAL) is the last commit:
the writer's own, until it has written. A rebuild of the cache cells (ledger/watch/cells.py)
uses it for its pass over every row.
"""

from __future__ import annotations

import sqlite3
import threading

from ledger.storage.sqlite_file import connect_read_only
from ledger.storage.url import sqlite_path


class AsideRead:
    """One SELECT's rows, read in a thread on a read-only connection of its own."""

    def __init__(self, path, sql: str, params: dict, pragmas: tuple[str, ...] = ()):
        self._con: sqlite3.Connection | None = None
        self._rows: list[tuple] | None = None
        self._error: BaseException | None = None
        self._ready = threading.Event()  # the connection is open (or failed to open)
        self._thread = threading.Thread(target=self._read, args=(path, sql, params, pragmas), daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, conn, sql: str, params: dict, pragmas: tuple[str, ...] = ()) -> AsideRead | None:
        """The read begun beside `conn`, or None where it cannot be (not a SQLite file: a
        database in memory has no second connection)."""
        path = sqlite_path(conn.engine.url.render_as_string(hide_password=False))
        return cls(path, sql, params, pragmas) if conn.dialect.name == "sqlite" and path is not None else None

    def _read(self, path, sql: str, params: dict, pragmas: tuple[str, ...]) -> None:
        try:
            self._con = connect_read_only(path)
            self._ready.set()
            for pragma in pragmas:
                self._con.execute(pragma)
            self._rows = self._con.execute(sql, params).fetchall()
        except Exception as exc:  # noqa: BLE001 - handed to the caller by rows()
            self._error = exc
        finally:
            self._ready.set()
            if self._con is not None:
                self._con.close()

    def rows(self) -> list[tuple]:
        """The rows, once read; the reader's error, if it failed."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._rows

    def cancel(self) -> None:
        """Stop the read (the writer gave up) and wait for the thread to end."""
        self._ready.wait()
        con = self._con
        if con is not None:
            try:
                con.interrupt()
            except sqlite3.ProgrammingError:  # closed already: the read had ended
                pass
        self._thread.join()
