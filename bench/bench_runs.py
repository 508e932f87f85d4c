"""`ledger runs`, `ledger diff` and `ledger report --html` on 1,000 recorded runs of a
250-compile program (250,000 rows), against the floor: `ledger sql` of a bare SELECT
run_id, COUNT(*) ... GROUP BY run_id over the same rows (the same process start, the
same open).

The ledger is made at head and filled by plain INSERTs of recorded rows (61 functions,
the rest eager primitives; one run in five cold, the rest warm), each given its cell id as
the ledger's writers give theirs (cell_ids.assign, what `ledger check` does for a row
INSERTed by hand), then each command runs as a fresh process: best of 5. Targets: runs
and diff within 1 s each; the HTML report within 5x the floor (issue 33; it was 10x) and
at most 2 MB. Then, for the record, the HTML report again with every row's cell id gone
(rows INSERTed by hand and not yet checked: the reads group by the cells' columns).
Run: .venv/bin/python bench/bench_runs.py [RUNS] [COMPILES]
"""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BIN

TRIES = 5
TARGET_S = 1.0
HTML_TARGET = 5  # x the floor (issue 33; it was 10)
COLS = ("transform", "compile_s", "dataset_class", "model_type", "instrument", "hardware", "jax_version",
        "cache_dir", "mixed_precision", "tag", "hostname", "timestamp", "cache_state", "status", "run_id",
        "phase", "function", "input_signature", "command", "function_kind", "pid", "compile_index")


def fill(db: Path, runs: int, compiles: int) -> None:
    subprocess.run([str(BIN / "ledger"), "db", "upgrade", "--db", str(db)], check=True, stdout=subprocess.DEVNULL)
    rnd = random.Random(0)
    con = sqlite3.connect(db)
    sql = f"INSERT INTO compile_records ({', '.join(COLS)}) VALUES ({', '.join('?' * len(COLS))})"
    with con:
        for r in range(runs):
            state = "cold" if r % 5 == 0 else "warm"
            stamp = f"2026-{1 + r // 250:02d}-{1 + (r // 10) % 25:02d}T{r % 24:02d}:{r % 60:02d}:00+00:00"
            rows = []
            for i in range(compiles):
                fn = f"jit_fn{i % 61}" if i < 61 else f"jit_prim{i % 40}"
                cost = (2.0 if state == "cold" else 0.05) * (1 + rnd.random())
                rows.append(("recorded", cost, None, None, None, "local_cpu", "0.10.2", "/c", False, None, "node1",
                             stamp, state, "ok", f"run{r:05d}", None, fn, f"f32[{i}]", "python fit.py",
                             "jit" if i < 61 else "eager", 1000 + r, i))
            con.executemany(sql, rows)
    con.close()
    _cell_ids(db, "assign")


def _cell_ids(db: Path, how: str) -> None:
    import sqlalchemy as sa

    from ledger.storage import cell_ids

    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        if how == "assign":
            cell_ids.assign(conn)
        else:
            conn.exec_driver_sql("UPDATE compile_records SET cell_id = NULL")
    engine.dispose()


def timed(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([str(BIN / "ledger"), *args], check=False, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    compiles = int(sys.argv[2]) if len(sys.argv) > 2 else 250
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ledger.db"
        fill(db, runs, compiles)
        cases = {
            "floor": ["sql", "SELECT run_id, COUNT(*) FROM compile_records GROUP BY run_id", "--db", str(db)],
            "runs": ["runs", "--db", str(db)],
            "diff": ["diff", "--db", str(db)],
            "report --html": ["report", "--html", str(Path(tmp) / "report.html"), "--db", str(db)],
        }
        best = {name: min(timed(args) for _ in range(TRIES)) for name, args in cases.items()}
        size = (Path(tmp) / "report.html").stat().st_size
        _cell_ids(db, "forget")
        no_ids = min(timed(cases["report --html"]) for _ in range(TRIES))
    print(f"{runs} runs x {compiles} compiles = {runs * compiles:,} rows")
    print(f"floor (ledger sql GROUP BY run_id): {best['floor']:.2f} s")
    for name in ("runs", "diff"):
        ratio = best[name] / best["floor"]
        print(f"ledger {name}: {best[name]:.2f} s = {ratio:.2f}x the floor: "
              f"{'PASS' if best[name] <= TARGET_S else 'FAIL'} (target: within {TARGET_S:.0f} s)")
    ratio = best["report --html"] / best["floor"]
    print(f"ledger report --html: {best['report --html']:.2f} s = {ratio:.2f}x the floor, {size / 1e6:.2f} MB: "
          f"{'PASS' if ratio <= HTML_TARGET and size <= 2e6 else 'FAIL'} (target: within {HTML_TARGET}x, at most 2 MB)")
    print(f"ledger report --html, no row with its cell id: {no_ids:.2f} s = {no_ids / best['floor']:.2f}x the floor"
          " (not a target: the next check gives every row its id)")


if __name__ == "__main__":
    main()
