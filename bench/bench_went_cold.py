"""`ledger check` the day a cache dir is emptied under N warm cells (default 2,000): every
cell compiles cold, and each is a went-cold finding, against the floor of the same check
the day the same N rows arrive warm (no finding).

A went-cold's cause compares its cold row with its last warm row (whole rows) and the
warm key's prunes; the lines group the findings by root cause (ledger/watch/grouped.py).
Read a pair at a time, and grouped by searching a list of every finding at each finding,
2,000 went-cold cells took the check 3.1 s on SQLite and 5.2 s on PostgreSQL.
Target: at most 2x the floor; the findings' lines are one (one root cause).
Run: .venv/bin/python bench/bench_went_cold.py [N]
     .venv/bin/python bench/bench_went_cold.py --postgresql [N]   the same on PostgreSQL
       databases made for it (and dropped) on the server of $LEDGER_TEST_PG_URL
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BIN, PgDatabases, verdict

RUNS = 5
RECORD = {"transform": "jit", "compile_s": 0.2, "trace_s": 0.1, "model_type": "mge", "dataset_class": "imaging",
          "instrument": "hst", "hardware": "local_cpu", "jax_version": "0.10.2", "cache_dir": "/scratch/jax-cache",
          "timestamp": "2026-07-01T10:00:00"}


def ledger(*args) -> subprocess.CompletedProcess:
    return subprocess.run([BIN / "ledger", *map(str, args)], capture_output=True, text=True, check=False)


def records(tmp: Path, n: int, name: str, state: str, day: int) -> Path:
    path = tmp / f"{name}.json"
    path.write_text(json.dumps([dict(RECORD, hostname=f"h{i}", tag=f"{name}-{i}-{state}",
                                     compile_s=3.0 if state == "cold" else 0.2,
                                     timestamp=f"2026-07-0{day}T10:00:00") for i in range(n)]))
    return path


def made(db: str, tmp: Path, n: int, then: str) -> None:
    """A ledger of n warm cells, checked; then a day's n rows, `then` warm or cold."""
    for args in (("import", records(tmp, n, "day1", "warm", 1)), ("check",),
                 ("import", records(tmp, n, f"day2-{then}", then, 2))):
        assert ledger(*args, "--db", db).returncode == 0, args


def timed_check(db: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    result = ledger("check", "--db", db)
    wall = time.perf_counter() - t0
    assert result.returncode in (0, 1), result.stderr
    return wall, result.stdout


class SQLiteCopies:
    def __init__(self, tmp: Path):
        self.tmp = tmp

    def base(self, name: str) -> str:
        return str(self.tmp / f"{name}.db")

    def fresh(self, name: str) -> str:
        shutil.copy(self.base(name), self.tmp / "work.db")
        return str(self.tmp / "work.db")

    def drop(self) -> None:
        pass


class PostgresCopies:
    """Each base a database; each timed check on a copy of it (CREATE DATABASE ... TEMPLATE)."""

    def __init__(self, tmp: Path):
        self.databases = PgDatabases("ledger_bench_went_cold")

    def base(self, name: str) -> str:
        return self.databases.create(name)

    def fresh(self, name: str) -> str:
        return self.databases.create("work", template=name)

    def drop(self) -> None:
        self.databases.drop()


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--postgresql"]
    n = int(args[0]) if args else 2000
    backend = "PostgreSQL" if "--postgresql" in sys.argv else "SQLite"
    with tempfile.TemporaryDirectory() as tmp:
        copies = (PostgresCopies if backend == "PostgreSQL" else SQLiteCopies)(Path(tmp))
        try:
            for then in ("warm", "cold"):
                made(copies.base(then), Path(tmp), n, then)
            floors, colds, said = [], [], ""
            for _ in range(RUNS):  # interleaved, so both see the same machine
                floors.append(timed_check(copies.fresh("warm"))[0])
                wall, said = timed_check(copies.fresh("cold"))
                colds.append(wall)
        finally:
            copies.drop()
    floor, cold = min(floors), min(colds)
    lines = said.splitlines()
    print(f"{backend}, {n:,} cells: the check of a day of warm rows (floor) {floor:.2f}s;"
          f" of the day they all went cold {cold:.2f}s (best of {RUNS}, interleaved)")
    print(f"ratio {cold / floor:.2f}x (target <= 2x) {verdict(cold / floor, 2)}; it printed {len(lines)} lines:")
    for line in lines:
        print(f"  {line}")


if __name__ == "__main__":
    main()
