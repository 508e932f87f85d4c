"""Revision 0024: the run_id index also holds what the health findings read to find each
program's newest run (health._run_times), on both backends: what it finds is what the rows
say (a program is its command, or its objective where it has none, the same text in
either; failed rows and rows with no run id left out; a NULL timestamp the oldest); on
SQLite it reads the index alone; a downgrade puts 0019's index on run_id alone back."""

from __future__ import annotations

import sqlalchemy as sa

from ledger.storage.open import open_ledger
from ledger.storage.writer import add_compile_record
from ledger.watch import health

from .conftest import PgDb, query, run_cli

INDEX = "ix_compile_records_run_id"
BASE = {"transform": "recorded", "hostname": "node1", "process_index": 0, "function": "jit_step",
        "input_signature": "f32[3] -> f32[3]", "cache_dir": "/c", "cache_state": "cold", "compile_s": 1.0}
ROWS = [  # (run, command, objective, timestamp, status)
    ("r1", "python fit.py", None, "2026-12-01T10:00:00+00:00", "ok"),
    ("r1", None, "python fit.py", "2026-12-01T11:00:00+00:00", "ok"),  # the same program, newer
    ("r1", "python fit.py", None, "2026-12-01T12:00:00+00:00", "failed"),  # not an ok row
    ("r2", "python fit.py", None, None, "ok"),  # no time: the oldest
    ("r2", None, "mge", "2026-12-02T09:00:00+00:00", "ok"),
    ("r'\n3", None, "mge", "2026-12-03T09:00:00+00:00", "ok"),
    (None, "python fit.py", None, "2026-12-04T09:00:00+00:00", "ok"),  # in no run
]


def _ledger(db) -> None:
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    with open_ledger(str(db), "write") as ledger:
        for i, (run, command, objective, stamp, status) in enumerate(ROWS):
            add_compile_record(ledger.engine, dict(
                BASE, run_id=run, command=command, objective=objective, timestamp=stamp, status=status,
                compile_index=i, cache_key=f"jit_step-{i}"))


def _expected() -> set[tuple]:
    newest: dict[tuple, str] = {}
    for run, command, objective, stamp, status in ROWS:
        if run is not None and status == "ok":
            pair = (command or objective, run)
            newest[pair] = max(stamp or "", newest.get(pair, ""))
    return {(*pair, t) for pair, t in newest.items()}


def test_each_programs_runs_are_found_from_the_index_as_the_rows_say(any_db):
    _ledger(any_db)
    statements = []
    with open_ledger(str(any_db), "read") as ledger, ledger.engine.connect() as conn:
        sa.event.listen(conn, "before_cursor_execute", lambda c, cur, s, p, ctx, many: statements.append(s))
        found = health._run_times(conn, "", {})
    assert sorted(found) == sorted(_expected())
    assert len(found) == 4  # r1's two spellings of one program are one
    if not isinstance(any_db, PgDb):
        (statement,) = [s for s in statements if "FROM compile_records" in s]
        plan = [r[-1] for r in query(any_db, f"EXPLAIN QUERY PLAN {statement}")]
        assert plan == [f"SEARCH r USING COVERING INDEX {INDEX} (run_id>?)"], plan  # no sort, no table


def test_a_downgrade_puts_the_index_on_run_id_alone_back(any_db):
    _ledger(any_db)
    assert _columns(any_db) == ["run_id", "command", "objective", "timestamp", "status"]
    assert run_cli("db", "downgrade", "0023", "--db", any_db).exit_code == 0
    assert _columns(any_db) == ["run_id"]
    assert run_cli("db", "upgrade", "--db", any_db).exit_code == 0
    assert _columns(any_db) == ["run_id", "command", "objective", "timestamp", "status"]


def _columns(db) -> list[str]:
    if isinstance(db, PgDb):
        return [r[0] for r in query(db, "SELECT a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                                        " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)"
                                        f" WHERE c.relname = '{INDEX}' ORDER BY array_position(i.indkey, a.attnum)")]
    return [r[2] for r in query(db, f"SELECT * FROM pragma_index_info('{INDEX}') ORDER BY seqno")]
