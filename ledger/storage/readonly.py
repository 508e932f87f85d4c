"""`ledger sql`: ad-hoc, read-only queries over the ledger.

Read-only is enforced by the database, not by guessing at the SQL text: SQLite is
opened read-only (mode=ro) with query_only on and an authorizer that allows reads
only; PostgreSQL runs it as one prepared statement in a session whose every
transaction is read-only, and rolls it back. One statement per call.
"""

from __future__ import annotations

import sqlite3

from ledger.errors import LedgerError, first_line
from ledger.storage.sqlite_file import read_only

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


def _sqlite_query(path, query: str):
    if not path.is_file():
        raise LedgerError(f"{path} is not a database file")
    try:
        with read_only(path) as con:
            con.execute("SELECT count(*) FROM sqlite_master")  # a file that is no database fails here
            con.execute("PRAGMA query_only = ON")
            con.set_authorizer(_authorizer)
            return _guarded_query(con, query)
    except sqlite3.DatabaseError as exc:
        raise LedgerError(f"cannot read {path}: {exc}") from None


def _guarded_query(con: sqlite3.Connection, query: str):
    try:
        cur = con.execute(query)
        rows = cur.fetchall()
    except sqlite3.ProgrammingError as exc:
        if "one statement" in str(exc):
            raise LedgerError("ledger sql runs one statement at a time") from None
        raise LedgerError(f"sql error: {exc}") from None
    except sqlite3.DatabaseError as exc:
        if "authoriz" in str(exc) or "readonly" in str(exc) or "read-only" in str(exc):
            raise LedgerError(READ_ONLY_MSG) from None
        raise LedgerError(f"sql error: {exc}") from None
    return [d[0] for d in cur.description or ()], rows


def _postgres_query(ledger, query: str):
    """On a read-only session (see storage/engine.py), as one prepared statement:
    the server refuses several commands in one, so no `COMMIT; DELETE ...`; and the
    transaction is rolled back, side effects of functions included."""
    from sqlalchemy.exc import SQLAlchemyError

    if ledger.engine.dialect.driver != "psycopg":
        raise LedgerError("ledger sql on PostgreSQL needs the psycopg driver: a postgresql+psycopg:// URL")
    try:
        raw = ledger.engine.raw_connection()
    except SQLAlchemyError as exc:
        raise LedgerError(f"cannot query {ledger.display}: {first_line(exc)}") from None
    import psycopg

    try:
        pg = raw.driver_connection
        try:
            cur = pg.execute(query, prepare=True)
            columns = [d.name for d in cur.description or ()]
            rows = [tuple(r) for r in cur.fetchall()] if cur.description else []
        except psycopg.errors.ReadOnlySqlTransaction:
            raise LedgerError(READ_ONLY_MSG) from None
        except psycopg.Error as exc:
            if "multiple commands" in str(exc):
                raise LedgerError("ledger sql runs one statement at a time") from None
            if "COPY cannot be used" in str(exc):
                raise LedgerError("ledger sql does not run COPY: use a SELECT (with --csv for CSV)") from None
            raise LedgerError(f"sql error: {first_line(exc)}") from None
        finally:
            try:
                pg.rollback()
            except psycopg.Error:
                # No ROLLBACK gets through on a connection that is lost (the statement
                # was pg_terminate_backend(pg_backend_pid())) or still streaming COPY
                # TO STDOUT: close it, and the server ends the transaction unfinished,
                # which is a rollback. The statement's own error is the one to report.
                raw.invalidate()
        return columns, rows
    finally:
        raw.close()


def run_query(db: str | None, query: str) -> tuple[list[str], list[tuple]]:
    """Columns and rows of one read-only statement."""
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
            return _sqlite_query(ledger.path, query)
        if not ledger.target.value.startswith("postgresql"):
            raise LedgerError(f"ledger sql reads SQLite files and PostgreSQL, not {ledger.display.split(':', 1)[0]}")
        return _postgres_query(ledger, query)
