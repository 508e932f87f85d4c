"""Revision 0023: on PostgreSQL the cache cells' pages keep room, so that a daily check's
update of the cells its new rows touched is made in place (HOT: no move, no new index
entry). SQLite keeps no such setting."""

from __future__ import annotations

import sqlalchemy as sa

from ledger.storage.open import open_ledger
from ledger.watch.check import judge, run_check

from .conftest import migrate, query
from .ledgers import add, at_head, rec

CELLS = 400


def _fillfactor(db) -> list | None:
    return query(db, "SELECT reloptions FROM pg_class WHERE relname = 'cache_cells'")[0][0]


def test_0023_sets_the_cells_fillfactor_and_its_downgrade_resets_it(pg_db):
    at_head(pg_db)
    assert _fillfactor(pg_db) == ["fillfactor=60"]
    migrate(pg_db, "downgrade", "0022")
    assert _fillfactor(pg_db) is None
    migrate(pg_db, "upgrade", "head")
    assert _fillfactor(pg_db) == ["fillfactor=60"]


def _updates_in_place(db, tmp_path, fillfactor: int | None = None) -> tuple[int, int]:
    """(cells updated, of them in place) by a daily check of a new row in every other cell
    of CELLS on a new ledger, the cells built by its first check; `fillfactor`: the cells'
    table set to it first (None: as head has it)."""
    at_head(db)
    with open_ledger(str(db), "write") as ledger:
        if fillfactor is not None:
            with ledger.engine.begin() as conn:
                conn.exec_driver_sql(f"ALTER TABLE cache_cells SET (fillfactor = {int(fillfactor)})")
        add(db, tmp_path, *(rec(hostname=f"node-{i:04d}") for i in range(CELLS)))
        run_check(ledger.engine)
        add(db, tmp_path, *(rec(hostname=f"node-{i:04d}", timestamp="2026-07-02T11:00:00", cache_state="cold")
                            for i in range(0, CELLS, 2)))
        with ledger.engine.connect() as conn, conn.begin() as txn:
            judge(conn)
            counts = conn.execute(sa.text(
                "SELECT pg_stat_get_xact_tuples_updated('cache_cells'::regclass),"
                " pg_stat_get_xact_tuples_hot_updated('cache_cells'::regclass)")).one()
            txn.rollback()
    return tuple(counts)


def test_a_daily_check_updates_the_cells_in_place_which_full_pages_do_not(pg_db, tmp_path):
    updated, in_place = _updates_in_place(pg_db, tmp_path)
    # a page can get more updates than its room holds: nearly all, not all
    assert updated == CELLS // 2 and in_place >= 0.9 * updated, (updated, in_place)
    updated, in_place = _updates_in_place(pg_db, tmp_path, 100)  # PostgreSQL's default: every page full
    assert updated == CELLS // 2 and in_place < updated // 4, (updated, in_place)
