"""Many writers, one ledger: 16 concurrent writers x 500 rows, as imports (16 `ledger
import` processes, one 500-record file each) and as a probe writes (16 processes,
500 one-row transactions each). Checked: 0 rows lost, 0 writers failed. Reported:
throughput, and the wall time against a floor measured in the same run, the same
8,000 rows written by one process (one import of the 16 files; 8,000 one-row
transactions in a row).

On SQLite (a WAL file) always; on PostgreSQL too when LEDGER_TEST_PG_URL is set
(ci/postgres.sh start prints it), in a database made for the run and dropped after.
Run: .venv/bin/python bench/bench_concurrency.py [WRITERS] [ROWS]
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BIN, PgDatabases

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

RECORD = {"transform": "jit", "compile_s": 1.5, "trace_s": 0.1, "model_type": "mge", "dataset_class": "imaging",
          "instrument": "hst", "hardware": "local_cpu", "hostname": "node1", "jax_version": "0.10.2",
          "cache_dir": "/c", "timestamp": "2026-07-01T10:00:00"}


def _ledger(*args) -> subprocess.CompletedProcess:
    return subprocess.run([BIN / "ledger", *map(str, args)], capture_output=True, text=True, check=False)


def _count(db: str) -> int:
    out = _ledger("sql", "SELECT count(*) FROM compile_records", "--csv", "--db", db)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[-1])


def _commit_rows(db: str, writer: int, n: int, ready, go) -> None:
    from ledger.storage.open import open_ledger
    from ledger.storage.writer import add_compile_record

    with open_ledger(db, "write") as ledger:
        ledger.engine.connect().close()
        ready.put(writer)
        go.wait()  # start-up (imports, engine) is not what is measured: all start together
        for i in range(n):
            add_compile_record(ledger.engine, dict(RECORD, tag=f"c{writer}-{i}", cache_state="warm",
                                                   cache_state_source="measured_events", status="ok"))


def imports(db: str, files: list[Path], concurrent: bool) -> tuple[float, int]:
    """Wall seconds, and how many writers failed: one import of every file, or one
    `ledger import` process per file, all at once."""
    t0 = time.perf_counter()
    if concurrent:
        procs = [subprocess.Popen([BIN / "ledger", "import", f, "--db", db], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for f in files]
        failed = sum(p.wait() != 0 for p in procs)
    else:
        failed = int(_ledger("import", files[0].parent, "--db", db).returncode != 0)
    return time.perf_counter() - t0, failed


def commits(db: str, writers: int, rows: int) -> tuple[float, int]:
    """Wall seconds from the start signal, and how many writers failed."""
    ctx = multiprocessing.get_context("spawn")
    ready, go = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_commit_rows, args=(db, w, rows, ready, go)) for w in range(writers)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=600)
    t0 = time.perf_counter()
    go.set()
    for p in procs:
        p.join()
    return time.perf_counter() - t0, sum(p.exitcode != 0 for p in procs)


def run(label: str, make_db, tmp: Path, writers: int, rows: int) -> None:
    files = []
    for w in range(writers):
        f = tmp / "in" / f"w{w}.json"
        f.parent.mkdir(exist_ok=True)
        f.write_text(json.dumps([dict(RECORD, tag=f"i{w}-{i}-warm", compile_s=1.0 + i) for i in range(rows)]))
        files.append(f)
    total = writers * rows
    print(f"{label}: {writers} writers x {rows} rows")
    for kind in ("imports", "one-row commits"):
        seq_db, con_db = make_db(), make_db()
        if kind == "imports":
            floor, _ = imports(seq_db, files, concurrent=False)
            wall, failed = imports(con_db, files, concurrent=True)
        else:
            floor, _ = commits(seq_db, 1, total)
            wall, failed = commits(con_db, writers, rows)
        landed = _count(con_db)
        assert _count(seq_db) == total
        print(f"  {kind:<16} {landed:,} of {total:,} rows landed, {total - landed} lost, {failed} writers failed;"
              f" {wall:.2f}s = {total / wall:,.0f} rows/s; one writer alone {floor:.2f}s; ratio {wall / floor:.2f}x")


def _pg_maker():
    databases, n = PgDatabases("ledger_bench_concurrency"), iter(range(10**6))

    def make() -> str:
        url = databases.create(f"db{next(n)}")
        assert _ledger("db", "upgrade", "--db", url).returncode == 0
        return url

    return make, databases.drop


def main() -> None:
    writers = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)

        def sqlite_db() -> str:
            path = tmp / f"{uuid.uuid4().hex[:8]}.db"
            assert _ledger("db", "upgrade", "--db", path).returncode == 0
            return str(path)

        run("SQLite (WAL)", sqlite_db, tmp, writers, rows)
        base = os.environ.get("LEDGER_TEST_PG_URL")
        if not base:
            print("PostgreSQL: LEDGER_TEST_PG_URL not set (ci/postgres.sh start), skipped")
            return
        make, drop = _pg_maker()
        try:
            run("PostgreSQL", make, tmp, writers, rows)
        finally:
            drop()


if __name__ == "__main__":
    main()
