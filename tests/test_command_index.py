"""Revision 0020: the index on (command, transform), and the report's newest run of each
recorded program found through it, on both backends: the same runs the plain GROUP BY
finds, with filters, failed rows, probe rows and commands of no recorded program mixed
in, and a plan that walks the index instead of scanning the table."""

from __future__ import annotations

import sqlalchemy as sa

from ledger.report.recorded import _newest_runs, _where
from ledger.storage.open import open_ledger
from ledger.storage.writer import add_compile_record

from .conftest import PgDb, _session, query, run_cli

# The definition the index replaced: each command's newest recorded row, by a scan.
ORACLE = ("SELECT command, run_id FROM compile_records WHERE id IN"
          " (SELECT MAX(id) FROM compile_records WHERE {where} GROUP BY command)")


def _rows(db) -> None:
    """Three programs' interleaved runs on two hosts; the newest row of one failed; a probe
    of a fourth command (no recorded row); legacy rows without a command."""
    base = {"hostname": "node1", "process_index": 0, "function": "jit_step", "input_signature": "f32[3]",
            "cache_dir": "/c", "cache_state": "warm", "compile_s": 0.1}
    with open_ledger(str(db), "write") as ledger:
        n = 0
        for run in range(4):
            for cmd in ("python fit.py", "python b'\n.py", "python a.py"):
                n += 1
                add_compile_record(ledger.engine, dict(
                    base, transform="recorded", command=cmd, run_id=f"{cmd}-{run}", pid=n, compile_index=0,
                    hostname="node1" if run % 2 else "node2", timestamp=f"2026-12-01T10:00:{n:02d}+00:00",
                    **({"status": "failed", "compile_s": None, "error": "boom"} if (cmd, run) == ("python a.py", 3)
                       else {})))
        add_compile_record(ledger.engine, dict(base, transform="jit", command="ledger probe x", run_id="probe",
                                               pid=99, compile_index=0, timestamp="2026-12-02T00:00:00+00:00"))
        with ledger.engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO compile_records (transform, compile_s, hostname) VALUES ('vag', 1.0, 'old')")


def test_the_newest_run_of_each_program_is_the_one_a_scan_finds(any_db):
    assert run_cli("db", "upgrade", "--db", any_db).exit_code == 0
    _rows(any_db)
    with open_ledger(str(any_db), "read") as ledger, ledger.engine.connect() as conn:
        for filters in (None, {"hostname": "node1"}, {"hostname": "node2"}, {"hostname": "nowhere"}):
            where, params = _where(filters)
            scanned = {r[0]: r[1] for r in conn.execute(sa.text(ORACLE.format(where=where)), params)}
            assert _newest_runs(conn, where, params) == scanned, filters
        where, params = _where(None)
        assert _newest_runs(conn, where, params) == {  # a.py's newest row failed: its run before
            "python fit.py": "python fit.py-3", "python b'\n.py": "python b'\n.py-3", "python a.py": "python a.py-2"}


def test_the_walk_goes_through_the_index(any_db):
    assert run_cli("db", "upgrade", "--db", any_db).exit_code == 0
    _rows(any_db)
    where, params = _where(None)
    with open_ledger(str(any_db), "read") as ledger, ledger.engine.connect() as conn:
        statements = []
        sa.event.listen(conn, "before_cursor_execute", lambda c, cur, s, p, ctx, many: statements.append((s, p)))
        _newest_runs(conn, where, params)
    (statement, parameters), = [(s, p) for s, p in statements if "commands" in s]
    if isinstance(any_db, PgDb):
        _session(any_db).execute("SET enable_seqscan = off")
        plan = " ".join(str(r[0]) for r in query(any_db, f"EXPLAIN {statement}", parameters))
        assert "ix_compile_records_command" in plan and "Seq Scan" not in plan, plan
    else:
        plan = [r[-1] for r in query(any_db, f"EXPLAIN QUERY PLAN {statement}", parameters)]
        assert not [p for p in plan if p.startswith(("SCAN compile_records", "SCAN r"))], plan
        assert sum("ix_compile_records_command" in p for p in plan) == 3, plan


def test_the_index_is_partial_and_goes_with_a_downgrade(any_db):
    assert run_cli("db", "upgrade", "--db", any_db).exit_code == 0
    _rows(any_db)
    if not isinstance(any_db, PgDb):  # a count through an index counts its entries
        assert query(any_db, "SELECT COUNT(*) FROM compile_records INDEXED BY ix_compile_records_command"
                             " WHERE command IS NOT NULL") == [(13,)]
        assert query(any_db, "SELECT COUNT(*) FROM compile_records") == [(14,)]
    assert run_cli("db", "downgrade", "0019", "--db", any_db).exit_code == 0
    names = ("SELECT indexname FROM pg_indexes WHERE tablename = 'compile_records'" if isinstance(any_db, PgDb)
             else "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'compile_records'")
    assert "ix_compile_records_command" not in {r[0] for r in query(any_db, names)}
    assert run_cli("db", "upgrade", "--db", any_db).exit_code == 0
    assert "ix_compile_records_command" in {r[0] for r in query(any_db, names)}
