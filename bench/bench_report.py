"""`ledger report` (markdown) on a 1,000,000-row ledger, against a bare SQL query that
reads the same rows (the warm and cold ok rows, the columns the report shows) with
Python's sqlite3 and nothing else.

Both run as a fresh process, so the ratio includes the CLI's start (Typer, SQLAlchemy,
the revision gate). Target: at most 3x. Best of 3 each, interleaved.
Run: .venv/bin/python bench/bench_report.py [N]
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BIN, legacy_records, verdict

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from ledger.record import COMPARABILITY_KEY, LEGACY_FIELDS

STATES = ("warm", "cold", "warm", "none", "cold", "unknown")
KEY = ", ".join(COMPARABILITY_KEY)
BARE = (f"SELECT {KEY}, id, compile_s, tag, timestamp, host_load_avg_1m, host_cpu_count, host_cpu_affinity"
        " FROM compile_records WHERE cache_state IN ('warm', 'cold') AND COALESCE(status, 'ok') = 'ok'"
        " AND compile_s IS NOT NULL")


def build(path: Path, n: int) -> None:
    """A ledger at head: n rows over 1,050 cells on 50 hosts, every cache state, some
    loaded hosts; a pin per warm key and a check run's verdicts, as the report reads."""
    subprocess.run([BIN / "ledger", "db", "upgrade", "--db", path], check=True, capture_output=True)
    cols = [*LEGACY_FIELDS, "cache_state", "status", "host_load_avg_1m", "host_cpu_count"]
    con = sqlite3.connect(path)
    with con:
        for start in range(0, n, 100_000):
            rows = legacy_records(min(100_000, n - start), seed=start)
            con.executemany(
                f"INSERT INTO compile_records ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [(*(r[c] for c in LEGACY_FIELDS), STATES[((start + i) // 1050) % 6], "ok",
                  float((start + i) % 40), 32) for i, r in enumerate(rows)],
            )
        con.execute(
            f"INSERT INTO pins (pin_key, {KEY}, row_id, compile_s, tag, timestamp, pinned_at)"
            f" SELECT 'k' || id, {KEY}, id, compile_s, tag, timestamp, '2026-08-01' FROM ("
            f"  SELECT *, ROW_NUMBER() OVER (PARTITION BY {KEY} ORDER BY timestamp DESC, id DESC) AS rn"
            "   FROM compile_records WHERE cache_state = 'warm') WHERE rn = 1")
        con.execute("INSERT INTO check_runs (id, checked_at, tolerance, exit_code) VALUES (1, '2026-08-02', 1.5, 1)")
        con.execute("INSERT INTO verdicts (check_run_id, pin_id, pin_key, row_id, verdict, checked_at)"
                    " SELECT 1, id, pin_key, row_id, CASE WHEN id % 7 = 0 THEN 'regression' ELSE 'ok' END,"
                    " '2026-08-02' FROM pins")
    con.close()


def timed(cmd) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True).stdout
    return time.perf_counter() - t0, out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ledger.db"
        t0 = time.perf_counter()
        build(db, n)
        print(f"built {n:,} rows at head in {time.perf_counter() - t0:.1f}s")
        bare_cmd = [sys.executable, "-c", (f"import sqlite3; rows = sqlite3.connect({str(db)!r}).execute("
                                           f"{BARE!r}).fetchall(); print(len(rows))")]
        report_cmd = [BIN / "ledger", "report", "--db", db]
        timed(bare_cmd)  # warm the page cache for both
        floors, runs = [], []
        for _ in range(3):
            wall, out = timed(bare_cmd)
            floors.append(wall)
            read = int(out)
            wall, out = timed(report_cmd)
            runs.append(wall)
        lines = sum(ln.startswith(b"| ") for ln in out.splitlines())
        floor, rep = min(floors), min(runs)
        print(f"bare SQL read of the {read:,} warm/cold rows (floor): {floor:.2f}s   "
              f"ledger report: {rep:.2f}s   (best of 3 each, interleaved)")
        print(f"ratio {rep / floor:.2f}x (target <= 3x) {verdict(rep / floor, 3.0)}")
        print(f"report: {out.count(b'### ')} host keys, {lines} table lines incl. headers")


if __name__ == "__main__":
    main()
