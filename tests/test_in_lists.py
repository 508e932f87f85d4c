"""ledger/storage/in_lists.py: a Python list bound into `IN :name` on both backends."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from ledger.storage.in_lists import CHUNK, rows_in, with_lists
from ledger.storage.open import open_ledger

HOSTILE = ["it's", 'a "quoted" one', "two\nlines", "x" * 100_000, "%s", ":names", "' OR 1=1 --"]


@pytest.fixture
def conn(any_db):
    """A connection to a ledger at head, with a table of every hostile value and 3 chunks'
    worth of others; rolled back after the test."""
    with open_ledger(str(any_db), "write") as led, led.engine.connect() as conn, conn.begin() as txn:
        conn.execute(sa.text("CREATE TABLE words (w TEXT, n INTEGER)"))
        values = HOSTILE + [f"w{i}" for i in range(CHUNK * 2 + 7)]
        conn.execute(sa.text("INSERT INTO words (w, n) VALUES (:w, :n)"),
                     [{"w": w, "n": i} for i, w in enumerate(values)])
        yield conn
        txn.rollback()


def test_rows_in_reads_every_chunk_of_a_long_list_and_hostile_values_as_values(conn):
    wanted = HOSTILE + [f"w{i}" for i in range(0, CHUNK * 2 + 7, 2)] + ["absent"]
    got = sorted(r["w"] for r in rows_in(conn, "SELECT w FROM words WHERE w IN :ws AND n >= :low", "ws", wanted,
                                        {"low": 0}))
    assert got == sorted(set(wanted) - {"absent"})
    assert list(rows_in(conn, "SELECT w FROM words WHERE w IN :ws", "ws", [])) == []  # no query, nothing


def test_with_lists_binds_only_the_lists_the_sql_names_and_the_rest_as_values(conn):
    # :s is a list, :s_low a plain value beside it whose name starts with the list's
    sql = "SELECT count(*) FROM words WHERE w IN :s AND n >= :s_low"
    assert conn.execute(with_lists(sql, "s", "unused"), {"s": HOSTILE, "s_low": 3}).scalar() == len(HOSTILE) - 3
    # a name the SQL does not use is not bound (sa.text refuses binding an absent name)
    assert conn.execute(with_lists("SELECT count(*) FROM words", "s"), {}).scalar() == len(HOSTILE) + CHUNK * 2 + 7
