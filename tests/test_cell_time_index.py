"""Revision 0021: the index on (cell_id, timestamp), and the check's read of a lineage from
its start through it (findings._rows_by_cell), on both backends: from every start the
rows are exactly those a whole read has at or after it in rows.oldest_first's order,
with times that are each other's prefix and a NULL timestamp among them; the plan is a
range of the index; a downgrade puts 0018's index back."""

from __future__ import annotations

import sqlalchemy as sa

from ledger.storage.open import open_ledger
from ledger.watch import cells, findings

from .conftest import PgDb, _session, query, run_cli
from .ledgers import add, rec

TIMES = ["2026-07-02T10:00:00+00:00", "2026-07-02T10:00:00", "2026-07-01T09:00:00", "2026-07-02T10:00:00",
         "2026-07-02T10:00:00.5", "2026-07-03T00:00:00"]


def _ledger(db, tmp_path) -> tuple:
    """Two cells of one lineage (two jax versions) and a third of another, interleaved, and
    a row INSERTed by hand with no timestamp; the lineage's key."""
    records = [rec(cache_state=("cold", "warm")[i % 2], timestamp=t, tag=f"r{i}", jax_version=("0.10.2", "0.10.3")[i % 2])
               for i, t in enumerate(TIMES)]
    add(db, tmp_path, *records, rec(transform="grad", timestamp=TIMES[0]))
    with open_ledger(str(db), "write") as ledger, ledger.engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO compile_records (transform, compile_s, dataset_class, model_type,"
                             " instrument, n_batch, batch_size, hardware, jax_version, cache_dir, mixed_precision,"
                             " hostname, cache_state, status) SELECT transform, compile_s, dataset_class, model_type,"
                             " instrument, n_batch, batch_size, hardware, jax_version, cache_dir, mixed_precision,"
                             " hostname, cache_state, status FROM compile_records WHERE id = 1")
        cells.fold(conn)  # gives the hand-written row its cell
        return findings.lineage_key(conn.execute(sa.text("SELECT * FROM compile_records WHERE id = 1")).mappings().one())


def _read(conn, lineage, start) -> list[int]:
    mine = findings._cells_of(conn, {lineage})
    return [r["id"] for r in findings._rows_by_cell(conn, {lineage: list(mine[lineage])}, {lineage: start})[lineage]]


def test_a_read_from_any_start_is_every_row_at_or_after_it(any_db, tmp_path):
    assert run_cli("db", "upgrade", "--db", any_db).exit_code == 0
    lineage = _ledger(any_db, tmp_path)
    with open_ledger(str(any_db), "read") as ledger, ledger.engine.connect() as conn:
        whole = _read(conn, lineage, None)
        assert len(whole) == len(TIMES) + 1  # not the other lineage's row
        stamps = {r[0]: r[1] for r in conn.execute(sa.text(
            f"SELECT id, {cells.stamp_sql(conn.dialect.name)} FROM compile_records"))}
        for i, row in enumerate(whole):
            assert _read(conn, lineage, stamps[row]) == whole[i:], (row, stamps[row])
        assert [cells.row_id(stamps[r]) for r in whole] == whole
        assert cells.stamp_time(stamps[whole[0]]) == ""  # the row with no timestamp: the oldest


def test_the_read_is_a_range_of_the_index_and_a_downgrade_puts_0018_s_back(any_db, tmp_path):
    assert run_cli("db", "upgrade", "--db", any_db).exit_code == 0
    lineage = _ledger(any_db, tmp_path)
    statements = []
    with open_ledger(str(any_db), "read") as ledger, ledger.engine.connect() as conn:
        sa.event.listen(conn, "before_cursor_execute", lambda c, cur, s, p, ctx, many: statements.append((s, p)))
        _read(conn, lineage, f"2026-07-02T10:00:00{cells.SEP}{cells._ID_PAD + 1}")
    (statement, parameters), = [(s, p) for s, p in statements if "VALUES" in s]
    if isinstance(any_db, PgDb):
        _session(any_db).execute("SET enable_seqscan = off")
        plan = " ".join(str(r[0]) for r in query(any_db, f"EXPLAIN {statement}", parameters))
        assert ('Index Cond: ((cell_id = "*VALUES*".column1) AND (("timestamp")::text >= "*VALUES*".column3))'
                in plan and "ix_compile_records_cell_time" in plan and "Seq Scan" not in plan), plan
    else:
        plan = [r[-1] for r in query(any_db, f"EXPLAIN QUERY PLAN {statement}", parameters)]
        assert "SEARCH r USING INDEX ix_compile_records_cell_time (cell_id=? AND timestamp>?)" in plan, plan
    assert run_cli("db", "downgrade", "0020", "--db", any_db).exit_code == 0
    assert _indexes(any_db) == {"ix_compile_records_cell_id"}
    assert run_cli("db", "upgrade", "--db", any_db).exit_code == 0
    assert _indexes(any_db) == {"ix_compile_records_cell_time"}


def _indexes(db) -> set[str]:
    if isinstance(db, PgDb):
        found = query(db, "SELECT indexname FROM pg_indexes WHERE tablename = 'compile_records'")
    else:
        found = query(db, "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'compile_records'")
    return {r[0] for r in found if r[0].startswith("ix_compile_records_cell")}
