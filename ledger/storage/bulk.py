"""Writing many rows at once, keyed so that writing them again adds nothing: what
`ledger import` and `ledger merge` share.

Every compile and sibling row carries record_key, a digest of its identity
(ledger/record_validation.py); the unique index on it makes an INSERT of a row already present a no-op.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from sqlalchemy import select, text
from sqlalchemy.engine import Connection

from ledger.record import KEY_FIELDS
from ledger.record_validation import compile_key, instrument_key
from ledger.storage import cell_ids
from ledger.storage.engine import param_marker
from ledger.storage.models import compile_records, instrument_records


def fill_missing_keys(conn: Connection) -> None:
    """Rows that came in by plain INSERT (or lost their key in a downgrade below 0002)
    get one, so importing the same records afterwards still adds nothing."""
    compile_cols = [compile_records.c[f] for f in KEY_FIELDS]
    _fill_keys(conn, compile_records, compile_cols, compile_key)
    instrument_cols = [instrument_records.c.record_json, instrument_records.c.hardware]
    _fill_keys(conn, instrument_records, instrument_cols,
               lambda r: instrument_key(json.loads(r["record_json"]), r["hardware"]))


def _fill_keys(conn: Connection, table, columns, key_of: Callable[[dict], int]) -> None:
    rows = conn.execute(select(table.c.id, *columns).where(table.c.record_key.is_(None))).mappings().all()
    if not rows:
        return
    taken = set(conn.execute(select(table.c.record_key).where(table.c.record_key.is_not(None))).scalars())
    updates = []
    for r in rows:
        key = key_of(r)
        if key not in taken:  # a true duplicate among keyless rows keeps no key
            taken.add(key)
            updates.append({"k": key, "i": r["id"]})
    if updates:
        conn.execute(text(f"UPDATE {table.name} SET record_key = :k WHERE id = :i"), updates)


def insert_sql(conn: Connection, table, columns) -> str:
    marker = param_marker(conn)
    return (
        f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({', '.join([marker] * len(columns))}) "
        "ON CONFLICT (record_key) WHERE record_key IS NOT NULL DO NOTHING"
    )


def insert_new(conn: Connection, table, rows: list[dict]) -> int:
    """Insert rows whose record_key is new; returns how many went in.

    A driver-level executemany over just the columns the batch has values for: the
    SQLAlchemy Core path spent more time building parameters than SQLite spent
    inserting (bench/bench_import.py)."""
    if not rows:
        return 0
    columns = sorted(set().union(*rows))
    params = [tuple(map(row.get, columns)) for row in rows]
    if table is not compile_records:
        return conn.exec_driver_sql(insert_sql(conn, table, columns), params).rowcount
    from ledger.watch.cells import appending

    columns, params = cell_ids.with_cell_ids(conn, columns, params)  # each row's cell (revision 0018)
    # the rows are new (ids above MAX(id)) and their cell ids their own: no trigger is run per row
    # (on SQLite 0009's were half a 100,000-row merge's insert: 6.7 s)
    above = conn.exec_driver_sql("SELECT COALESCE(MAX(id), 0) FROM compile_records").scalar()
    with appending(conn, above), cell_ids.own_ids(conn):
        return conn.exec_driver_sql(insert_sql(conn, table, columns), params).rowcount


def lookup(conn: Connection, table, by: str, want: str, values) -> dict:
    """{row[by]: row[want]} for the rows whose `by` column is one of `values`, asked
    500 at a time (a bound-parameter list has limits on every backend)."""
    values, out = list(values), {}
    for start in range(0, len(values), 500):
        query = select(table.c[by], table.c[want]).where(table.c[by].in_(values[start:start + 500]))
        out.update(conn.execute(query).all())
    return out
