"""Many rows of one table written in one go, where no key guards them (the check's
verdicts and cache cells): by COPY on PostgreSQL (an update through a temporary table,
where the role may make one), by the driver's executemany elsewhere.

psycopg's pipelined executemany of 7,888 cache cells' UPDATEs took 0.15-0.24 s of a daily
check at 1M rows; their COPY into a temporary table and one UPDATE ... FROM it, 0.08 s (an
UPDATE ... FROM unnest of bound arrays was slower still). On SQLite the driver's own
executemany skips SQLAlchemy's making of each row's parameters (0.03 s of those cells).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Connection

from ledger.storage.engine import param_marker


@contextmanager
def set_aside(conn: Connection, kind: str, names: tuple[str, ...]) -> Iterator[None]:
    """SQLite's triggers or indexes (`kind`) of these names, those there are, dropped for
    the caller's batch in its write transaction and made again from their own text after
    it: a batch that fails rolls back to what it found (SQLite's DDL is transactional)."""
    assert kind in ("trigger", "index") and conn.dialect.name == "sqlite"
    marks = ", ".join("?" * len(names))
    found = conn.exec_driver_sql(f"SELECT name, sql FROM sqlite_master WHERE type = ? AND name IN ({marks})",
                                 (kind, *names)).all()
    for name, _ in found:
        conn.exec_driver_sql(f"DROP {kind.upper()} {name}")
    yield
    for _, sql in found:
        conn.exec_driver_sql(sql)


def insert_text(conn: Connection, table, columns) -> str:
    """INSERT INTO `table` of `columns`, one driver placeholder a column (exec_driver_sql's)."""
    marks = ", ".join([param_marker(conn)] * len(columns))
    return f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({marks})"


def insert_rows(conn: Connection, table, rows: list[dict]) -> None:
    """INSERT `rows` (dicts of the same columns) into `table`."""
    if not rows:
        return
    columns = list(rows[0])
    if conn.dialect.name == "postgresql":
        _copy(conn, table.name, columns, rows)
        return
    conn.exec_driver_sql(insert_text(conn, table, columns), [tuple(r[c] for c in columns) for r in rows])


def update_rows(conn: Connection, table, key: str, rows: list[dict]) -> None:
    """UPDATE `table` SET each row's other columns WHERE `key` is the row's `key` value."""
    if not rows:
        return
    columns = [c for c in rows[0] if c != key]
    if conn.dialect.name == "postgresql" and _may_make_temporary_tables(conn):
        scratch = f"_ledger_{table.name}_update"
        conn.exec_driver_sql(f"CREATE TEMPORARY TABLE {scratch} (LIKE {table.name}) ON COMMIT DROP")
        _copy(conn, scratch, [key, *columns], rows)
        sets = ", ".join(f"{c} = n.{c}" for c in columns)
        conn.exec_driver_sql(f"UPDATE {table.name} t SET {sets} FROM {scratch} n WHERE t.{key} = n.{key}")
        conn.exec_driver_sql(f"DROP TABLE {scratch}")
        return
    marker = param_marker(conn)
    sets = ", ".join(f"{c} = {marker}" for c in columns)
    conn.exec_driver_sql(f"UPDATE {table.name} SET {sets} WHERE {key} = {marker}",
                         [(*(r[c] for c in columns), r[key]) for r in rows])


def _may_make_temporary_tables(conn: Connection) -> bool:
    """Whether this role may make a temporary table here: every role may by default, but a
    cluster's database can have TEMPORARY revoked, and the check must still run there."""
    return bool(conn.exec_driver_sql("SELECT has_database_privilege(current_database(), 'TEMPORARY')").scalar())


def _copy(conn: Connection, name: str, columns: list[str], rows: list[dict]) -> None:
    """COPY `rows` into `name` on the connection's own transaction (PostgreSQL)."""
    cursor = conn.connection.driver_connection.cursor()
    with cursor.copy(f"COPY {name} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row([row[c] for c in columns])
