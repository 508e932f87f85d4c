"""`alembic upgrade head` backfilling 1,000,000 legacy rows at 0001, against one bare
SQL UPDATE of cache_state over a copy of the same table.

Target: at most 1.5x the bare UPDATE, peak RSS at most 250 MB.
Run: .venv/bin/python bench/bench_backfill.py [N]
"""

from __future__ import annotations

import shutil
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
from ledger.legacy.cache_rule import state_sql
from ledger.record import LEGACY_FIELDS


def build(path: Path, n: int) -> None:
    subprocess.run([BIN / "alembic", "-x", f"db={path}", "upgrade", "0001"], cwd=REPO, check=True, capture_output=True)
    cols = list(LEGACY_FIELDS)
    con = sqlite3.connect(path)
    chunk = 100_000
    with con:
        for start in range(0, n, chunk):
            rows = legacy_records(min(chunk, n - start), seed=start)
            con.executemany(
                f"INSERT INTO compile_records ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [tuple(r[c] for c in cols) for r in rows],
            )
    con.close()


def bare_update(path: Path) -> float:
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("ALTER TABLE compile_records ADD COLUMN cache_state TEXT")
    t0 = time.perf_counter()
    con.execute("BEGIN")
    con.execute(f"UPDATE compile_records SET cache_state = {state_sql()}")
    con.execute("COMMIT")
    wall = time.perf_counter() - t0
    con.close()
    return wall


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "legacy.db"
        t0 = time.perf_counter()
        build(src, n)
        print(f"built {n:,} legacy rows at 0001 in {time.perf_counter() - t0:.1f}s")
        floors, runs, rss = [], [], 0
        for i in range(5):
            copy = Path(tmp) / f"floor{i}.db"
            shutil.copy(src, copy)
            floors.append(bare_update(copy))
            copy.unlink()
            target = Path(tmp) / f"mig{i}.db"
            shutil.copy(src, target)
            # a fresh `time`-like child per run: its own peak RSS, its own wall clock
            cmd = [sys.executable, "-c", (
                "import resource, subprocess, sys, time; t=time.perf_counter();"
                f"subprocess.run([{str(BIN / 'alembic')!r}, '-x', 'db={target}', 'upgrade', 'head'], check=True,"
                " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL);"
                "print(time.perf_counter()-t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
            )]
            out = subprocess.run(cmd, cwd=REPO, check=True, capture_output=True, text=True).stdout.split()
            runs.append(float(out[0]))
            rss = max(rss, int(out[1]) // 1024)
            con = sqlite3.connect(target)
            states = dict(con.execute("SELECT cache_state, count(*) FROM compile_records GROUP BY 1").fetchall())
            con.close()
            assert sum(states.values()) == n and None not in states, states
            target.unlink()
        floor, mig = min(floors), min(runs)
        ratio = mig / floor
        # alembic's own start (importing alembic, reading the revision files): the part
        # of the upgrade that does not grow with the rows
        empty = Path(tmp) / "empty.db"
        build(empty, 0)
        fixed = []
        for i in range(5):
            copy = Path(tmp) / f"empty{i}.db"
            shutil.copy(empty, copy)
            t0 = time.perf_counter()
            subprocess.run([BIN / "alembic", "-x", f"db={copy}", "upgrade", "head"], cwd=REPO, check=True, capture_output=True)
            fixed.append(time.perf_counter() - t0)
        print(f"bare UPDATE (floor): {floor:.2f}s   alembic upgrade head: {mig:.2f}s   (best of 5 each, interleaved)")
        print(f"ratio {ratio:.2f}x (target <= 1.5x) {verdict(ratio, 1.5)}")
        start = min(fixed)
        print(f"  of which alembic start-up (upgrade head of an empty 0001 database): {start:.2f}s; "
              f"the rest is {(mig - start) / floor:.2f}x the floor")
        print(f"peak RSS of alembic upgrade head: {rss} MB (target <= 250 MB) {verdict(rss, 250)}")
        print(f"states: {states}")


if __name__ == "__main__":
    main()
