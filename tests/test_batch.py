"""ledger/storage/batch.py: the check's many rows written in one go (COPY on PostgreSQL,
the driver's executemany on SQLite) hold every value as given, on both backends: a
quote, a line break, a tab, a backslash, NUL-free control characters, a huge text, NULL."""

from __future__ import annotations

import sqlalchemy as sa

from ledger.storage.batch import insert_rows, update_rows
from ledger.storage.models import cache_cells
from ledger.storage.open import open_ledger

from .ledgers import at_head

HOSTILE = ["it's", 'a "quoted" word', "line\nbreak", "tab\there", "back\\slash \\N", "\r\x01\x1f", "x" * 200_000,
           "ünïcödé ☃"]


def _cells(conn) -> dict:
    return {r[0]: tuple(r[1:]) for r in conn.execute(sa.select(cache_cells).order_by(cache_cells.c.cell_key))}


def test_rows_inserted_and_updated_hold_every_value_as_given(any_db):
    rows = [{"cell_key": key, "newest": f"{key}|warm", "last_warm": None if i % 2 else key, "first_cold": key,
             "n_cold": i} for i, key in enumerate(HOSTILE)]
    at_head(any_db)
    with open_ledger(str(any_db), "write") as ledger:
        with ledger.engine.begin() as conn:
            insert_rows(conn, cache_cells, rows)
            insert_rows(conn, cache_cells, [])  # nothing to write: nothing written
        with ledger.engine.connect() as conn:
            assert _cells(conn) == {r["cell_key"]: (r["newest"], r["last_warm"], r["first_cold"], r["n_cold"])
                                    for r in rows}
        changed = [{"cell_key": key, "newest": "new\n'|cold", "last_warm": key[::-1], "first_cold": None,
                    "n_cold": 10**12} for key in HOSTILE[::2]]
        with ledger.engine.begin() as conn:
            update_rows(conn, cache_cells, "cell_key", changed)
            update_rows(conn, cache_cells, "cell_key", [])
        with ledger.engine.connect() as conn:
            got = _cells(conn)
    want = {r["cell_key"]: (r["newest"], r["last_warm"], r["first_cold"], r["n_cold"]) for r in rows}
    want |= {r["cell_key"]: (r["newest"], r["last_warm"], r["first_cold"], r["n_cold"]) for r in changed}
    assert got == want  # the rows not in `changed` as they were


def test_an_update_in_a_transaction_twice_leaves_no_scratch_table_behind(any_db):
    """On PostgreSQL each update_rows makes and drops its own temporary table: twice in one
    transaction (a check run rolled back and run again in a test's) works."""
    at_head(any_db)
    with open_ledger(str(any_db), "write") as ledger:
        with ledger.engine.begin() as conn:
            insert_rows(conn, cache_cells, [{"cell_key": "k", "newest": "a|warm", "last_warm": None, "first_cold": None,
                                             "n_cold": 0}])
            for n in (1, 2):
                update_rows(conn, cache_cells, "cell_key", [{"cell_key": "k", "newest": f"{n}|cold", "last_warm": None,
                                                             "first_cold": None, "n_cold": n}])
        with ledger.engine.connect() as conn:
            assert _cells(conn) == {"k": ("2|cold", None, None, 2)}


def test_where_no_temporary_table_may_be_made_an_update_is_statements(any_db, monkeypatch):
    """A database with TEMPORARY revoked (a locked-down cluster's): update_rows writes by
    statements instead, the same rows (on SQLite it always does)."""
    from ledger.storage import batch

    monkeypatch.setattr(batch, "_may_make_temporary_tables", lambda conn: False)
    at_head(any_db)
    with open_ledger(str(any_db), "write") as ledger:
        with ledger.engine.begin() as conn:
            insert_rows(conn, cache_cells, [{"cell_key": k, "newest": "a|warm", "last_warm": None, "first_cold": None,
                                             "n_cold": 0} for k in ("k1", "k'\n2")])
            update_rows(conn, cache_cells, "cell_key", [{"cell_key": "k'\n2", "newest": "b|cold", "last_warm": "x",
                                                         "first_cold": None, "n_cold": 3}])
        with ledger.engine.connect() as conn:
            assert _cells(conn) == {"k1": ("a|warm", None, None, 0), "k'\n2": ("b|cold", "x", None, 3)}
