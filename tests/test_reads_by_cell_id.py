"""The reads group rows by their cell id where every row has one (cell_ids.all_assigned),
by the cell's columns where a row has none yet (INSERTed by hand: the next check gives it
one, and a read-only command may not): the two say the same, on both backends. What is
compared is every read that groups so: the report's lines and what the cache saved
(`ledger report`), each run's seconds saved (`ledger runs`), the HTML report's chart
points (lines.series) and the cold costs (savings.cold_costs)."""

from __future__ import annotations

import pytest

from ledger import savings
from ledger.report import lines as rl
from ledger.storage.cell_ids import all_assigned
from ledger.storage.open import open_ledger
from ledger.storage.writer import add_compile_record

from .conftest import run_cli
from .ledgers import every_kind_of_row


def _said(db) -> dict:
    out = {}
    for name, args in {"report": ("report",), "runs": ("runs", "--limit", "0", "--json")}.items():
        r = run_cli(*args, "--db", db)
        assert r.exit_code == 0, r.output
        out[name] = r.stdout
    with open_ledger(str(db), "read") as ledger, ledger.engine.connect() as conn:
        lines = rl.collect(conn, None)
        out["lines"] = lines
        out["points"] = rl.series(conn, None, per_key=2)  # the window's rank, not only its first row
        out["drawn"] = rl.series(conn, None, per_key=2, only=lines[::3])  # the charted lines' rows only
        out["costs"] = savings.cold_costs(conn, {(*ln.host, *ln.cell) for ln in lines})
        out["assigned"] = all_assigned(conn)
    return out


def _recorded(db) -> None:
    """Three runs of a program of three functions, the first cold, on a quiet host: its
    programs and days saved have cold costs to say."""
    with open_ledger(str(db), "write") as ledger:
        for run in range(3):
            for i in range(3):
                add_compile_record(ledger.engine, {
                    "transform": "recorded", "hostname": "node1", "process_index": 0, "function": f"jit_f{i}",
                    "input_signature": "f32[3]", "cache_dir": "/c", "command": "python fit.py", "run_id": f"run{run}",
                    "compile_index": i, "pid": 100 + run, "compile_s": 2.0 + i if run == 0 else 0.1 * run,
                    "cache_state": "cold" if run == 0 else "warm", "host_load_avg_1m": 0.0, "host_cpu_count": 2,
                    "timestamp": f"2026-12-0{run + 1}T10:00:0{i}+00:00"})


def _without_ids(db, where: str) -> None:
    with open_ledger(str(db), "write") as ledger, ledger.engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE compile_records SET cell_id = NULL WHERE {where}")


@pytest.mark.slow  # 0.24 s of the fast tier's 0.3 on a quiet machine, 0.41 s in a CI run
def test_reads_by_cell_id_say_what_reads_by_the_cells_columns_say(any_db, tmp_path):
    every_kind_of_row(any_db, tmp_path, seed=5)
    _recorded(any_db)
    by_id = _said(any_db)
    assert by_id.pop("assigned") is True  # every writer gave its rows their ids
    # not vacuous: warm and cold lines, chart points, cold costs, programs and days saved
    assert {ln.warm is not None for ln in by_id["lines"]} == {True, False}
    assert by_id["points"] and by_id["costs"] and 0 < len(by_id["drawn"]) < len(by_id["points"])
    assert "python fit.py" in by_id["report"] and "| node1 | /c | 2026-12-03 | 3 | 100% | 8.40 |" in by_id["report"]
    _without_ids(any_db, "id / 2 * 2 = id")  # half the rows, of every cell
    by_columns = _said(any_db)
    assert by_columns.pop("assigned") is False
    assert by_columns == by_id

