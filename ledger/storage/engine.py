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

A file still in rollback mode (as `ledger db upgrade` leaves it) is put in WAL mode
by the first writer that opens it. Two turning it at once deadlock, and SQLite
refuses one at once, busy timeout or not: so that step is retried until the
timeout (_into_wal).
"""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError, OperationalError

from ledger.errors import LedgerError
from ledger.storage.sqlite_file import busy_timeout_s, connect_read_only, is_locked
from ledger.storage.url import redact, sqlite_path

# A PostgreSQL session whose every transaction is read-only: no statement text can
# end the read-only transaction and start a writable one (COMMIT; DELETE ...).
_PG_READ_ONLY = "-c default_transaction_read_only=on"


# An execution option for a connection of a writing engine that will only read: its
# transaction begins deferred, so it does not hold the write lock while it reads.
READS_ONLY = "ledger_reads_only"


def read_connection(engine: Engine):
    """A connection that only reads (see READS_ONLY); use it as a context manager."""
    return engine.connect().execution_options(**{READS_ONLY: True})


def make_engine(url: str, *, read_only: bool = False, wal: bool = False) -> Engine:
    """An engine for ``url``; ``read_only`` engines cannot write on either backend;
    ``wal`` puts a SQLite file in WAL mode (readers never wait for writers)."""
    kwargs = {}
    if read_only and url.startswith("postgresql"):
        kwargs["connect_args"] = {"options": _PG_READ_ONLY}
    timeout = busy_timeout_s() if url.startswith("sqlite") else None  # read once, for connect and BEGIN
    if timeout is not None:
        kwargs["connect_args"] = {"timeout": timeout}
        path = sqlite_path(url) if read_only else None
        # in a folder this user may not write (a group's shared ledger), opened read-only by
        # SQLite itself; elsewhere read-write with query_only (below): a mode=ro reader of a WAL
        # file leaves its -wal and -shm behind, and a read command must leave no file
        if path is not None and not os.access(Path(path).resolve().parent, os.W_OK):
            kwargs["creator"] = lambda: connect_read_only(path)
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
                _into_wal(dbapi_conn, timeout)

        @event.listens_for(engine, "begin")
        def _begin(conn):
            reads = read_only or conn.get_execution_options().get(READS_ONLY, False)
            _begin_with_retries(conn, "BEGIN" if reads else "BEGIN IMMEDIATE", timeout)

    return engine


@contextmanager
def planned(conn, **settings: str):
    """PostgreSQL's planner settings (SET LOCAL) for the statements inside, put back after;
    nothing on SQLite. For the few statements whose rows the planner puts at a handful on
    a big ledger (its default guess for the test of an ok row, rows.ok_sql, is 0.5% of them),
    so that it sorts or loops where a hash is far cheaper: each names what it saved."""
    if conn.dialect.name != "postgresql":
        yield
        return
    for statement in planner_settings(conn.dialect.name, **settings):
        conn.exec_driver_sql(statement)
    try:
        yield
    finally:
        for name in settings:
            conn.exec_driver_sql(f"SET LOCAL {name} TO DEFAULT")


def one_writer_at_a_time(conn, table: str) -> None:
    """On PostgreSQL, the caller's transaction waits here for any other that has called
    this for `table`, or is inserting into it, to end: SHARE ROW EXCLUSIVE conflicts with
    itself and with ROW EXCLUSIVE, never with a read. For what reads a table and then
    writes what it did not find (pins update, a merge's pins, a pytest session's test
    pins, a check's cells): two at once both wrote it, and the second failed on the
    unique index or deadlocked. A merge takes it on compile_records first of all. Nothing
    on SQLite: a write transaction begins IMMEDIATE, one at a time already. `table` is one
    of the ledger's own names, never a user's."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE")


def planner_settings(dialect: str, **settings: str) -> tuple[str, ...]:
    """The statements that make planned()'s settings for the rest of a transaction."""
    return tuple(f"SET LOCAL {name} = {value}" for name, value in settings.items()) if dialect == "postgresql" else ()


def param_marker(conn) -> str:
    """The driver's placeholder for one positional parameter (exec_driver_sql's SQL)."""
    marker = {"qmark": "?", "format": "%s", "pyformat": "%s"}.get(conn.dialect.paramstyle)
    if marker is None:  # pragma: no cover - neither SQLite nor PostgreSQL
        raise LedgerError(f"unsupported database driver paramstyle {conn.dialect.paramstyle}")
    return marker


def _into_wal(dbapi_conn, timeout: float) -> None:
    """PRAGMA journal_mode = WAL, tried again until the busy timeout while SQLite says
    busy. Turning a rollback-mode file reads its header and then writes it; another
    connection that holds or wants the write lock meanwhile makes SQLite refuse at
    once rather than wait (of eight `ledger import` runs of a ledger just upgraded,
    one failed so in CI). The PRAGMA is the whole step, so a retry repeats nothing; on
    a file already in WAL mode it changes nothing."""
    deadline, pause = time.monotonic() + timeout, 0.01
    while True:
        try:
            dbapi_conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if not is_locked(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(2 * pause, 0.25)


BEGIN_RETRIES = 3


def _begin_with_retries(conn, begin: str, timeout: float) -> None:
    """BEGIN, retried a few times when SQLite says busy *before* the busy timeout ran
    out: it does that without waiting while a crashed writer's WAL is recovered.
    Nothing has run in the transaction yet, so a retry repeats nothing. A busy that
    took the whole timeout is final: the lock is held, and waiting again would double
    the wait the user asked for."""
    for attempt in range(BEGIN_RETRIES + 1):
        started = time.monotonic()
        try:
            conn.exec_driver_sql(begin)
            return
        except OperationalError as exc:
            waited = time.monotonic() - started
            if not is_locked(exc) or waited >= 0.9 * timeout \
                    or attempt == BEGIN_RETRIES:
                raise
            time.sleep(0.05 * 2 ** attempt)
