"""`ledger sql`: ad-hoc, read-only queries over the ledger, streamed.

Read-only is enforced by the database, not by guessing at the SQL text: SQLite is
opened read-only (mode=ro) with query_only on and an authorizer that allows reads
only; PostgreSQL runs it as one prepared statement in a session whose every
transaction is read-only, and rolls it back. One statement per call.

Rows come as the database makes them (SQLite steps the statement; PostgreSQL sends
them to libpq's chunked or single-row mode), so a 10^7-row result costs no more
memory than a chunk of rows.
The first row is fetched before the caller gets the result: an error that a query
makes at once is raised before anything is printed. A SIGINT (KeyboardInterrupt)
stops the query inside the database: SQLite's progress handler lets Python's signal
handler run while a statement steps, and psycopg cancels the query on the server.

One value of the answer is at most CELL_LIMIT: a larger one is refused, in one line
(TOO_BIG_MSG), as it arrives. SQLite is told a larger limit, BUILD_LIMIT
(SQLITE_LIMIT_LENGTH, Python 3.11+), on what a step of the query may build: a huge
value (zeroblob(1e9)) is refused at once, at no cost (BUILD_MSG), while length(x) and
substr(x, 1, n) of a stored value over CELL_LIMIT, which SQLite must read whole, still
answer (at CELL_LIMIT itself they could not: the way to look at a big value was refused
with it). On Python 3.10 and PostgreSQL there is no build limit: the output is as
bounded, the memory is not.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import chain
from typing import NamedTuple

from ledger.errors import LedgerError, first_line
from ledger.storage.sqlite_file import busy_timeout_s, read_only

READ_ONLY_MSG = "ledger sql is read-only: only SELECT, WITH ... SELECT, EXPLAIN and read-only PRAGMAs run"

# PRAGMAs that read: those that take a table or index name, and those that are
# reads only when given no value (PRAGMA user_version = 7 would write).
_READ_PRAGMAS = {
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "database_list", "collation_list", "function_list", "pragma_list",
    "compile_options",
}
_READ_PRAGMAS_WITHOUT_VALUE = {
    "user_version", "schema_version", "application_id", "page_count", "page_size",
    "freelist_count", "encoding", "foreign_keys", "journal_mode",
}
# SQLite runs the progress handler every this many virtual-machine steps (a few
# microseconds' work): often enough that a SIGINT ends the query at once, rarely
# enough to cost nothing measurable.
PROGRESS_STEPS = 10_000
# Rows PostgreSQL's client takes at once. libpq hands a chunk over when it is full
# or the result ends, and drops it for an error that comes first, so an error in
# the first chunk's rows (a backend that ends its own session after one row) comes
# before anything is printed, as it did when the whole result was fetched.
STREAM_CHUNK = 1000
# The most one value (TEXT in UTF-8, or BLOB) may hold: 1 MiB, far above any value
# the ledger stores (a record_json is a few kB), small enough that a table of 1000
# rows of them would still fit (the table stops at output.TABLE_BYTES anyway).
CELL_LIMIT = 1 << 20
TOO_BIG_MSG = (f"sql error: a value is over {CELL_LIMIT} bytes, the cap on one value of ledger sql: "
               "select a part of it (substr(x, 1, n)) or its length (length(x))")
# What a step of a SQLite query may build: far above any value a ledger stores, so that
# length() and substr() read any of them; far below what would take a machine's memory.
BUILD_LIMIT = 64 << 20
BUILD_MSG = (f"sql error: the query builds a value over {BUILD_LIMIT} bytes, more than ledger sql lets"
             " SQLite make: select less")
_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}


def _authorizer(action, arg1, arg2, _db, _trigger):
    if action in _ALLOWED:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA and arg1:
        name = arg1.lower()
        if name in _READ_PRAGMAS or (name in _READ_PRAGMAS_WITHOUT_VALUE and arg2 is None):
            return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_UPDATE and arg1 == "sqlite_master":
        # SQLite asks this of itself when a table-valued function (json_each) is
        # first used; a real write is still refused by mode=ro and query_only.
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


class Result(NamedTuple):
    """The columns of one statement, and its rows as they come (an iterator that
    raises LedgerError, or KeyboardInterrupt when the query was interrupted)."""

    columns: list[str]
    rows: Iterator[tuple]


def _primed(rows: Iterator[tuple]) -> Iterator[tuple]:
    """`rows`, its first one already fetched: the errors a query makes at once come
    before the caller prints anything."""
    first = next(rows, None)
    return iter(()) if first is None else chain((first,), rows)


# -- SQLite ------------------------------------------------------------------------------


def _go_on() -> int:
    # Returning 0 lets the statement go on. What this call is for is its side effect:
    # Python runs pending signal handlers on entering it, and a KeyboardInterrupt
    # raised here aborts the statement (sqlite3 turns it into "interrupted").
    return 0


def _too_big(value) -> bool:
    if isinstance(value, str):
        return len(value) > CELL_LIMIT // 4 and len(value.encode("utf-8", "surrogatepass")) > CELL_LIMIT
    return isinstance(value, (bytes, bytearray, memoryview)) and len(value) > CELL_LIMIT


def _capped(rows: Iterator[tuple]) -> Iterator[tuple]:
    """`rows`, refused at the first value over CELL_LIMIT. Every row passes through it,
    so the common value (a number, a short text) costs a class test and no call."""
    quick = CELL_LIMIT // 4  # fewer characters than this are under CELL_LIMIT bytes in UTF-8
    for row in rows:
        for v in row:
            cls = v.__class__
            if (cls is str or cls is bytes or cls is bytearray or cls is memoryview) and len(v) > quick \
                    and _too_big(v):
                raise LedgerError(TOO_BIG_MSG)
        yield row


def _sqlite_error(exc: sqlite3.Error) -> BaseException:
    text = str(exc)
    if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_TOOBIG or text == "string or blob too big":
        return LedgerError(BUILD_MSG)
    if isinstance(exc, sqlite3.OperationalError) and text == "interrupted":
        return KeyboardInterrupt()
    if isinstance(exc, sqlite3.ProgrammingError) and "one statement" in text:
        return LedgerError("ledger sql runs one statement at a time")
    if isinstance(exc, sqlite3.DatabaseError) and ("authoriz" in text or "readonly" in text or "read-only" in text):
        return LedgerError(READ_ONLY_MSG)
    return LedgerError(f"sql error: {exc}")


def _execute(con: sqlite3.Connection, query: str, wait_s: float) -> sqlite3.Cursor:
    """con.execute(query), waiting up to `wait_s` for a writer's lock (a file not in
    WAL mode, a writer inside its transaction) as the busy timeout would, but in
    Python's sleep: SQLite's own wait sleeps in C, deaf to a SIGINT until the lock
    is free or the timeout (600 s by default) is over."""
    deadline, pause = time.monotonic() + wait_s, 0.001
    while True:
        try:
            return con.execute(query)
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", None) != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, 0.05)


def _sqlite_rows(cur: sqlite3.Cursor) -> Iterator[tuple]:
    try:
        for row in cur:  # noqa: UP028 (`yield from` would close the cursor when this generator closes)
            yield row
    except sqlite3.Error as exc:
        raise _sqlite_error(exc) from None


@contextmanager
def _sqlite_query(path, query: str) -> Iterator[Result]:
    if not path.is_file():
        raise LedgerError(f"{path} is not a database file")
    try:
        with read_only(path) as con:
            wait_s = busy_timeout_s()
            try:
                con.execute("PRAGMA busy_timeout = 0")  # waits for a writer's lock are _execute's
                _execute(con, "SELECT count(*) FROM sqlite_master", wait_s)  # a file that is no database fails here
                con.execute("PRAGMA query_only = ON")
            except sqlite3.DatabaseError as exc:
                raise LedgerError(f"cannot read {path}: {exc}") from None
            if hasattr(con, "setlimit"):  # Python 3.11+
                con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, BUILD_LIMIT)
            con.set_authorizer(_authorizer)
            con.set_progress_handler(_go_on, PROGRESS_STEPS)
            try:
                cur = _execute(con, query, wait_s)
            except sqlite3.Error as exc:
                raise _sqlite_error(exc) from None
            rows = _capped(_sqlite_rows(cur))
            try:
                yield Result([d[0] for d in cur.description or ()], _primed(rows))
            finally:
                rows.close()
    except sqlite3.OperationalError as exc:  # opening it: read_only() connects
        raise LedgerError(f"cannot read {path}: {exc}") from None


# -- PostgreSQL --------------------------------------------------------------------------


def _postgres_error(exc) -> LedgerError:
    import psycopg

    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return LedgerError(READ_ONLY_MSG)
    if "multiple commands" in str(exc):
        return LedgerError("ledger sql runs one statement at a time")
    if "COPY" in str(exc) and "cannot be used" in str(exc):
        return LedgerError("ledger sql does not run COPY: use a SELECT (with --csv for CSV)")
    return LedgerError(f"sql error: {first_line(exc)}")


def _postgres_rows(stream) -> Iterator[tuple]:
    """The stream's rows; a statement with no result (SET, LOCK ...) has none."""
    import psycopg

    try:
        for row in stream:
            yield tuple(row)
    except psycopg.Error as exc:
        if type(exc) is psycopg.ProgrammingError and "didn't produce a result" in str(exc):
            return
        raise _postgres_error(exc) from None


def _postgres_columns(pg, query: str) -> list[str]:
    """The columns of a statement that gave no row (the stream says nothing of them):
    from the server's description of it, prepared again and not run."""
    from psycopg import pq

    encoding = pg.info.encoding
    res = pg.pgconn.prepare(b"", query.encode(encoding))
    if res.status == pq.ExecStatus.COMMAND_OK:
        res = pg.pgconn.describe_prepared(b"")
    if res.status != pq.ExecStatus.COMMAND_OK:
        return []
    return [res.fname(i).decode(encoding) for i in range(res.nfields)]


@contextmanager
def _postgres_query(ledger, query: str) -> Iterator[Result]:
    """On a read-only session (see storage/engine.py), as one statement through the
    extended protocol, which is a prepared statement: the server refuses several
    commands in one, so no `COMMIT; DELETE ...`; and the transaction is rolled back,
    side effects of functions included. Rows come as the server sends them (libpq's
    chunked or single-row mode); leaving early cancels the query on the server."""
    from sqlalchemy.exc import SQLAlchemyError

    if ledger.engine.dialect.driver != "psycopg":
        raise LedgerError("ledger sql on PostgreSQL needs the psycopg driver: a postgresql+psycopg:// URL")
    import psycopg
    from psycopg import capabilities

    from ledger.storage.url import redact

    try:
        raw = ledger.engine.raw_connection()
    except (SQLAlchemyError, psycopg.Error) as exc:
        # the pool's connect raises the driver's own error (a refused connection),
        # unwrapped; said as every other command says it (revisions.engine_status)
        raise LedgerError(f"cannot open {ledger.display}: {redact(first_line(exc))}") from None

    pg = raw.driver_connection
    cur = pg.cursor()
    # rows by the chunk where libpq can (17 and later): a row at a time costs three
    # times as much; the server buffers its output by the 8 kB anyway
    stream = cur.stream(query, size=STREAM_CHUNK if capabilities.has_stream_chunked() else 1)
    rows = _capped(_postgres_rows(stream))
    try:
        first = _primed(rows)
        if cur.description is not None:
            yield Result([d.name for d in cur.description], first)
        else:  # no row came: the stream does not say what its columns were
            yield Result(_postgres_columns(pg, query), first)
    finally:
        try:
            # first the stream: it holds the connection's lock, and closing it cancels
            # a query still running (a capped table, an interrupt)
            rows.close()
            stream.close()
            pg.rollback()
        except psycopg.Error:
            # No ROLLBACK gets through on a connection that is lost (the statement
            # was pg_terminate_backend(pg_backend_pid())) or still streaming COPY
            # TO STDOUT: close it, and the server ends the transaction unfinished,
            # which is a rollback. The statement's own error is the one to report.
            raw.invalidate()
        raw.close()


@contextmanager
def open_query(db: str | None, query: str) -> Iterator[Result]:
    """The columns and rows of one read-only statement, streamed while the context
    lasts; the connection is closed (and on PostgreSQL the transaction rolled back)
    on leaving it."""
    if not query.strip():
        raise LedgerError("empty query")
    if not query.isascii():
        try:
            query.encode("utf-8")
        except UnicodeEncodeError:  # argv that is not UTF-8 arrives as lone surrogates
            raise LedgerError("the query is not UTF-8 text") from None
    from ledger.storage.open import open_ledger

    with open_ledger(db, "query") as ledger:
        if ledger.path is not None:
            with _sqlite_query(ledger.path, query) as result:
                yield result
            return
        if not ledger.target.value.startswith("postgresql"):
            raise LedgerError(f"ledger sql reads SQLite files and PostgreSQL, not {ledger.display.split(':', 1)[0]}")
        with _postgres_query(ledger, query) as result:
            yield result
