"""`ledger sql --csv` (and --json) of a 3,000,000-row result: peak RSS, time to the
first row and wall time, against floors measured in the same run:

- the floor: the database's own C client streaming CSV, `sqlite3 -csv -header`
  (the same rows; it quotes text with a space) and, on PostgreSQL (when
  LEDGER_TEST_PG_URL is set), `psql --csv` with FETCH_COUNT (a cursor, so it
  streams too);
- for scale, the plain Python loop anyone would write: the driver's cursor
  (sqlite3; psycopg's stream()) into csv.writer on sys.stdout.

The query is a recursive CTE, so nothing but the query decides the size: three
columns (an integer, its double and a short text). Each command runs under a fresh
watcher process that reads the output from a pipe (as a shell pipeline would),
notes when the first row's line arrives, and reports its one child's peak RSS
(RUSAGE_CHILDREN). Best of 3 for the times, the highest of 3 for RSS.

Goals (issue 13): RSS < 300 MB and the first row within 2 s. Before streaming, 10^7
rows took 3.4 GB and 40 s to the first line.

Run: .venv/bin/python bench/bench_sql_stream.py [rows]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BIN, verdict

ROWS = 3_000_000
RUNS = 3
GOAL_RSS_MB, GOAL_FIRST_S = 300, 2.0

# Runs one command, its stdout a pipe read in large blocks; prints what it saw.
WATCH = r"""
import json, os, resource, subprocess, sys, time
start = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
fd, newlines, size, first = proc.stdout.fileno(), 0, 0, None
while block := os.read(fd, 1 << 20):
    size += len(block)
    if first is None:
        newlines += block.count(b"\n")
        if newlines >= 2:  # the header, then the first row
            first = time.perf_counter() - start
rc = proc.wait()
print(json.dumps({"rc": rc, "first_s": first, "wall_s": time.perf_counter() - start, "bytes": size,
                  "rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""

PY_SQLITE_FLOOR = r"""
import csv, sqlite3, sys
con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
cur = con.execute(sys.argv[2])
out = csv.writer(sys.stdout, lineterminator="\n")
out.writerow([d[0] for d in cur.description])
out.writerows(cur)
"""

PY_PG_FLOOR = r"""
import csv, psycopg, sys
with psycopg.connect(sys.argv[1]) as con:
    cur = con.cursor()
    rows = cur.stream(sys.argv[2], size=1000)
    first = next(rows)
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow([d.name for d in cur.description])
    out.writerow(first)
    out.writerows(rows)
"""


def query(rows: int) -> str:
    return (f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {rows}) "
            "SELECT x, x * 2 AS y, 'row ' || x AS z FROM c")


def measure(cmd: list) -> dict:
    """Best of RUNS: the lowest times, the highest RSS; the output's size checked alike."""
    runs = []
    for _ in range(RUNS):
        out = subprocess.run([sys.executable, "-c", WATCH, *map(str, cmd)], capture_output=True, text=True,
                             check=True)
        run = json.loads(out.stdout)
        if run["rc"] != 0 or run["first_s"] is None:
            raise SystemExit(f"{cmd[:3]}: exit {run['rc']}, first row {run['first_s']}")
        runs.append(run)
    return {"first_s": min(r["first_s"] for r in runs), "wall_s": min(r["wall_s"] for r in runs),
            "rss_mb": max(r["rss_mb"] for r in runs), "bytes": {r["bytes"] for r in runs}}


def line(name: str, m: dict, floor: dict | None = None) -> str:
    text = f"{name:<34} first row {m['first_s']:6.2f} s   all {m['wall_s']:6.2f} s   peak RSS {m['rss_mb']:6.1f} MB"
    if floor:
        text += f"   ({m['wall_s'] / floor['wall_s']:.2f}x time, {m['rss_mb'] / floor['rss_mb']:.2f}x RSS)"
    return text


def goals(name: str, m: dict) -> list[str]:
    rss = f"{name}: peak RSS {m['rss_mb']:.0f} MB (goal < {GOAL_RSS_MB} MB) {verdict(m['rss_mb'], GOAL_RSS_MB)}"
    first = f"{name}: first row {m['first_s']:.2f} s (goal < {GOAL_FIRST_S:.0f} s) {verdict(m['first_s'], GOAL_FIRST_S)}"
    return [rss, first]


def sqlite_part(rows: int, q: str) -> list[str]:
    db = Path(tempfile.mkdtemp()) / "ledger.db"
    subprocess.run([BIN / "ledger", "db", "upgrade", "--db", db], check=True, stdout=subprocess.DEVNULL)
    ledger_csv = measure([BIN / "ledger", "sql", q, "--csv", "--db", db])
    ledger_json = measure([BIN / "ledger", "sql", q, "--json", "--db", db])
    py_floor = measure([sys.executable, "-c", PY_SQLITE_FLOOR, db, q])
    assert ledger_csv["bytes"] == py_floor["bytes"], (ledger_csv["bytes"], py_floor["bytes"])  # the same CSV
    print(f"SQLite, {rows:,} rows ({min(ledger_csv['bytes']) / 1e6:.0f} MB of CSV)")
    floor = None
    if shutil.which("sqlite3"):
        floor = measure(["sqlite3", "-readonly", "-csv", "-header", db, q])
        print("  " + line("floor: sqlite3 -csv", floor))
    print("  " + line("plain Python: sqlite3 + csv", py_floor))
    print("  " + line("ledger sql --csv", ledger_csv, floor))
    print("  " + line("ledger sql --json", ledger_json, floor))
    return goals("SQLite --csv", ledger_csv) + goals("SQLite --json", ledger_json)


def postgres_part(rows: int, q: str, url: str) -> list[str]:
    conninfo = url.replace("postgresql+psycopg://", "postgresql://", 1)
    ledger_csv = measure([BIN / "ledger", "sql", q, "--csv", "--db", url])
    plain = measure([sys.executable, "-c", PY_PG_FLOOR, conninfo, q])
    print(f"PostgreSQL, {rows:,} rows")
    floor = None
    if shutil.which("psql"):
        # psql uses its cursor only for a statement that starts with SELECT: the same
        # rows, from a subquery (given the WITH as it is, it holds all of them: 338 MB)
        floor = measure(["psql", "-X", "-q", "--csv", "-v", "FETCH_COUNT=1000", "-c", f"SELECT * FROM ({q}) AS t",
                         conninfo])
        print("  " + line("floor: psql --csv, FETCH_COUNT", floor))
    print("  " + line("plain Python: psycopg stream + csv", plain))
    print("  " + line("ledger sql --csv", ledger_csv, floor))
    return goals("PostgreSQL --csv", ledger_csv)


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else ROWS
    q = query(rows)
    print(f"best of {RUNS}; {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}")
    results = sqlite_part(rows, q)
    url = os.environ.get("LEDGER_TEST_PG_URL")
    if url:
        results += postgres_part(rows, q, url)
    else:
        print("PostgreSQL: LEDGER_TEST_PG_URL is not set, skipped")
    print(*results, sep="\n")


if __name__ == "__main__":
    main()
