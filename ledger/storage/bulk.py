"""Writing many rows at once, keyed so that writing them again adds nothing: what
`ledger import` and `ledger merge` share.

Every compile and sibling row carries record_key, a digest of its identity
(ledger/record_validation.py); the unique index on it makes an INSERT of a row already present a no-op.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy import select, text
from sqlalchemy.engine import Connection

from ledger.record import KEY_FIELDS
from ledger.record_validation import compile_key, instrument_key
from ledger.storage import cell_ids
from ledger.storage.batch import insert_text, set_aside
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


def insert_sql(conn: Connection, table, columns, *, keyed: bool = True) -> str:
    """INSERT of `columns`; a row whose record_key is taken is skipped by the unique index,
    or (`keyed` False, while that index is set aside: KeysTaken) left out by the caller."""
    sql = insert_text(conn, table, columns)
    return sql + " ON CONFLICT (record_key) WHERE record_key IS NOT NULL DO NOTHING" if keyed else sql


# The indexes of compile_records that a batch of rows enters in no order: a digest, and
# a cell anywhere in the ledger. SQLite finds a page of each for every row; on a batch
# larger than the table, dropping them and making them again (one sort each) costs
# less (bench/bench_import.py: 100,000 rows' insert 0.86 s -> 0.57 s with the rebuild).
SCATTERED_INDEXES = ("ux_compile_records_record_key", "ix_compile_records_cell_time")


class KeysTaken:
    """The record keys of compile_records while its unique index on them is set aside
    (scattered_indexes_aside): a row whose key is taken, in the ledger or earlier in the
    batch, is left out, as the index's ON CONFLICT DO NOTHING would leave it out."""

    def __init__(self, conn: Connection):
        found = conn.exec_driver_sql("SELECT record_key FROM compile_records WHERE record_key IS NOT NULL")
        self.keys = set(found.scalars())

    def new(self, rows: list, at) -> list:
        """The rows (tuples, or dicts with `at` a name) whose key at `at` is not taken; takes them."""
        keys, kept = self.keys, []
        for row in rows:
            key = row[at]
            if key not in keys:
                keys.add(key)
                kept.append(row)
        return kept


@contextmanager
def scattered_indexes_aside(conn: Connection) -> Iterator[KeysTaken]:
    """On SQLite, SCATTERED_INDEXES dropped for the caller's batch, in its write
    transaction, and made again from their own text after it; the caller leaves out rows
    whose key is taken (the KeysTaken yielded) and inserts with insert_sql(keyed=False).
    A batch that fails rolls back to the indexes it found (SQLite's DDL is transactional)."""
    taken = KeysTaken(conn)  # before the unique index goes: the keys are read from it
    with set_aside(conn, "index", SCATTERED_INDEXES):
        yield taken


def insert_new(conn: Connection, table, rows: list[dict], taken: KeysTaken | None = None) -> int:
    """Insert rows whose record_key is new; returns how many went in. `taken`: the
    compile rows' keys while their unique index is set aside (scattered_indexes_aside).

    A driver-level executemany over just the columns the batch has values for: the
    SQLAlchemy Core path spent more time building parameters than SQLite spent
    inserting (bench/bench_import.py)."""
    if taken is not None and table is compile_records:
        rows = taken.new(rows, "record_key")
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
        return conn.exec_driver_sql(insert_sql(conn, table, columns, keyed=taken is None), params).rowcount


def lookup(conn: Connection, table, by: str, want: str, values) -> dict:
    """{row[by]: row[want]} for the rows whose `by` column is one of `values`, asked
    500 at a time (a bound-parameter list has limits on every backend)."""
    values, out = list(values), {}
    for start in range(0, len(values), 500):
        query = select(table.c[by], table.c[want]).where(table.c[by].in_(values[start:start + 500]))
        out.update(conn.execute(query).all())
    return out
