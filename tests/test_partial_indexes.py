"""Revision 0019: the run_id and cache_key indexes hold only the rows that have one, and
every lookup the commands make by either column still goes through its index.

The statements are the commands' own: captured as `ledger check`, `ledger runs` and
`ledger diff` run them on a ledger of recorded and legacy rows, then explained on the
same backend (PostgreSQL with sequential scans priced out, so a plan names the index
exactly when the index can serve the statement)."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from ledger.storage.models import compile_records
from ledger.storage.open import open_ledger
from ledger.storage.writer import add_compile_record

from .conftest import PgDb, _session, insert_legacy, query, run_cli

COLUMNS = ("run_id", "cache_key")
# a lookup by the column's value, not the `column || '' IS NOT NULL` scans health makes on purpose
LOOKUP = re.compile(r"\b(run_id|cache_key) (IN|=|LIKE) ")


def _definitions(db) -> dict[str, str]:
    if isinstance(db, PgDb):
        rows = query(db, "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'compile_records'")
    else:
        rows = query(db, "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'compile_records'")
    return {name: sql for name, sql in rows if sql}


def _predicate(sql: str) -> str | None:
    where = re.search(r"\bWHERE\s+\(*(\w+)\s+IS\s+NOT\s+NULL", sql, re.IGNORECASE)
    return where and where.group(1)


def _recorded(db, runs=range(3), compiles=range(2)) -> None:
    base = {"transform": "recorded", "hostname": "node1", "process_index": 0, "function": "jit_step",
            "input_signature": "f32[3] -> f32[3]", "cache_dir": "/c", "command": "python fit.py"}
    with open_ledger(str(db), "write") as ledger:
        for run in runs:
            for i in compiles:
                add_compile_record(ledger.engine, dict(
                    base, run_id=f"run'\n{run}", compile_index=i, pid=100 + run, compile_s=2.0 if run == 0 else 0.1,
                    cache_state="cold" if run == 0 else "warm", cache_key=f"jit_step-{i}",
                    # under a cache size limit: the check looks the keys up to count their churn
                    jax_cache_settings='{"jax_compilation_cache_max_size": 1000000}',
                    timestamp=f"2026-12-0{run + 1}T10:00:0{i}+00:00"))


def test_the_indexes_hold_only_rows_that_have_the_column_and_models_say_so(any_db):
    db = any_db
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    found = _definitions(db)
    for column in COLUMNS:
        assert _predicate(found[f"ix_compile_records_{column}"]) == column, found
        index = next(ix for ix in compile_records.indexes if ix.name == f"ix_compile_records_{column}")
        # the models declare SQLite's predicate only (models._partial); the built ones are read above
        assert str(index.dialect_options["sqlite"]["where"]) == f"{column} IS NOT NULL"
    down = run_cli("db", "downgrade", "0018", "--db", db)
    assert down.exit_code == 0, down.output
    assert [_predicate(_definitions(db)[f"ix_compile_records_{c}"]) for c in COLUMNS] == [None, None]
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    assert [_predicate(_definitions(db)[f"ix_compile_records_{c}"]) for c in COLUMNS] == list(COLUMNS)


def test_every_lookup_by_run_or_key_the_commands_make_uses_its_index(any_db, tmp_path):
    db = any_db
    _recorded(db)
    legacy = [{"transform": "jit", "compile_s": 1.0 + i, "hostname": "old", "timestamp": f"2025-01-0{i + 1}T00:00:00",
               "tag": "cold"} for i in range(3)]
    if isinstance(db, PgDb):
        with open_ledger(str(db), "write") as ledger, ledger.engine.begin() as conn:
            conn.execute(compile_records.insert(), legacy)
    else:
        insert_legacy(db, legacy)
    statements: list[tuple[str, object]] = []

    def seen(conn, cursor, statement, parameters, context, executemany):
        if LOOKUP.search(statement) and "FROM compile_records" in statement and not executemany:
            statements.append((statement, parameters))

    def run(*commands):
        sa.event.listen(sa.engine.Engine, "before_cursor_execute", seen)
        try:
            for args in commands:
                result = run_cli(*args, "--db", db)
                assert result.exit_code in (0, 1), (args, result.output)
        finally:
            sa.event.remove(sa.engine.Engine, "before_cursor_execute", seen)

    run(["check"], ["runs"], ["diff"], ["diff", "run'\n0", "run'\n2"])
    _recorded(db, runs=(2, 3), compiles=(2, 3))  # rows in a run the last check saw, and in a new one
    run(["check"])  # the daily check's own lookups (health._times_since)
    looked_up = {m.group(1) for s, _ in statements for m in LOOKUP.finditer(s)}
    assert looked_up == set(COLUMNS), looked_up  # the check's health passes and the runs' own lookups
    explain = "EXPLAIN" if isinstance(db, PgDb) else "EXPLAIN QUERY PLAN"
    if isinstance(db, PgDb):
        _session(db).execute("SET enable_seqscan = off")
    for statement, parameters in statements:
        plan = " ".join(str(row[-1]) for row in query(db, f"{explain} {statement}", parameters))
        # on SQLite a lookup, not a walk of the whole index (`SCAN ... USING COVERING INDEX`)
        used = {c for c in COLUMNS if re.search(rf"{'' if isinstance(db, PgDb) else 'SEARCH .*'}ix_compile_records_{c}\b", plan)}
        wanted = {m.group(1) for m in LOOKUP.finditer(statement)}
        assert used & wanted, f"{statement!r}: {plan}"


@pytest.mark.parametrize("column", COLUMNS)
def test_a_row_without_the_column_is_not_in_its_index(db, column):
    """On SQLite, where a count through an index counts its entries."""
    _recorded(db)
    insert_legacy(db, [{"transform": "jit", "compile_s": 1.0, "hostname": "old", "timestamp": "2025-01-01T00:00:00"}])
    total = query(db, "SELECT COUNT(*) FROM compile_records")[0][0]
    entries = query(db, f"SELECT COUNT(*) FROM compile_records INDEXED BY ix_compile_records_{column}"
                        f" WHERE {column} IS NOT NULL")[0][0]
    assert (total, entries) == (7, 6)
