"""`ledger import` of 100,000 legacy records against the floor: a bare `json.load`
plus `sqlite3` `executemany` of the same records into a table of the same 18 columns.

Both run as fresh processes (interpreter start included in both); best of 7, interleaved. The
ledger database is created at head (`ledger db upgrade`) before the timed import:
the floor's CREATE TABLE is not timed either, and schema creation is a one-off
that does not grow with the records.
Target: at most 1.5x (issue 33).
Run: .venv/bin/python bench/bench_import.py [N] [FILES]   (default 100,000 records in 10 files;
FILES=1 is the one-large-file case, where the forked readers cannot help)
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BIN, legacy_records, verdict

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from ledger.record import LEGACY_FIELDS

RUNS = 7

FLOOR = """
import json, sqlite3, sys
from pathlib import Path
cols = {cols!r}
con = sqlite3.connect(sys.argv[2])
con.execute("CREATE TABLE compile_records (id INTEGER PRIMARY KEY, " + ", ".join(cols) + ")")
sql = "INSERT INTO compile_records (" + ", ".join(cols) + ") VALUES (" + ", ".join("?" * len(cols)) + ")"
with con:
    for path in sorted(Path(sys.argv[1]).rglob("*.json")):
        con.executemany(sql, [tuple(r.get(c) for c in cols) for r in json.load(open(path))])
con.close()
"""


def timed(cmd, prepare=None) -> float:
    if prepare:
        subprocess.run(prepare, check=True, stdout=subprocess.DEVNULL)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree" / "local_cpu"
        tree.mkdir(parents=True)
        per_file = -(-n // files)
        for start in range(0, n, per_file):
            (tree / f"probe{start // per_file:03d}.json").write_text(
                json.dumps(legacy_records(min(per_file, n - start), seed=start))
            )
        floor_code = FLOOR.format(cols=list(LEGACY_FIELDS))
        floors, ledgers = [], []
        for i in range(RUNS):  # interleaved, so both sides see the same machine
            floors.append(timed([sys.executable, "-c", floor_code, str(tree.parent), f"{tmp}/floor{i}.db"]))
            db = f"{tmp}/ledger{i}.db"
            ledgers.append(timed([str(BIN / "ledger"), "import", str(tree.parent), "--db", db],
                                 prepare=[str(BIN / "ledger"), "db", "upgrade", "--db", db]))
        floor, ledger = min(floors), min(ledgers)
        again = timed([str(BIN / "ledger"), "import", str(tree.parent), "--db", f"{tmp}/ledger0.db"])
        out = subprocess.run([str(BIN / "ledger"), "sql", "SELECT count(*) FROM compile_records", "--csv",
                              "--db", f"{tmp}/ledger0.db"], capture_output=True, text=True, check=True).stdout
        assert out.split()[-1] == str(n), out
    ratio = ledger / floor
    paired = sorted(b / a for a, b in zip(floors, ledgers))
    print(f"{n:,} records in {files} file(s): json.load + sqlite3 executemany (floor) {floor:.2f}s   ledger import {ledger:.2f}s"
          f"   (best of {RUNS}, interleaved)")
    print(f"ratio {ratio:.2f}x (target <= 1.5x) {verdict(ratio, 1.5)}; "
          f"per-run ratios {paired[0]:.2f}..{paired[-1]:.2f}, median {paired[len(paired) // 2]:.2f}")
    print(f"re-import of the same tree (adds nothing): {again:.2f}s")


if __name__ == "__main__":
    main()
