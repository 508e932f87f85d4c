"""`ledger check` on a 1,000,000-row ledger, against one bare SQL query (sqlite3) that
reads the same rows and columns the check reads.

The ledger: 1,050 comparability keys (50 hosts x 3 models x 7 transforms) over 17
cache dirs; half the rows are pinned (`ledger pins update`), then the other half
arrives, so the check judges ~425,000 warm rows against their pins, stores a verdict
for each, and reads the cache cells for the cache findings. Its data gives every
finding kind but cache-not-written (rows(): regression, went-cold, cache-off, cache-not-reused,
jax-changed, below-threshold, evicted; each row in a run of a program, with its cache key),
and the counts of each are printed for the first check and the daily one; the daily
check's findings are then held, line for line, to a full check's of the same rows (the
cells folded again from every row, nothing taken from an earlier run).

The check a ledger runs every day: the ledger has been checked before (its cache
cells are folded: ledger/watch/cells.py) and a day's rows (1%) arrived since. Timed
beside it: the same check again with no new rows, and the first check after the
upgrade to 0009, which builds the cells from every row and judges every row.

Targets (issue 33): `ledger check` (the installed entry point, a subprocess) at most 1.5x the
bare query every day on SQLite (3x on PostgreSQL), the first check at most 3x (5x). Also
printed: the check as a library call (no interpreter start-up), the CLI's fixed start-up
(the same check on an empty ledger), and revision 0018's data step on the same rows (each
row's cell id) against a bare UPDATE writing one integer into every row.
The rows are written as the writers write them: their cell ids given in the same step
(ledger/storage/cell_ids.py), not by the check.
Run: .venv/bin/python bench/bench_check.py [N]
     .venv/bin/python bench/bench_check.py --postgresql [N]   the same on a PostgreSQL
       database made for it (and dropped) on the server of $LEDGER_TEST_PG_URL
       (ci/postgres.sh start prints it; the password, if any, comes from PGPASSFILE)
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BIN, TRANSFORMS, PgDatabases, verdict

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

COLUMNS = ("transform", "compile_s", "dataset_class", "model_type", "instrument", "hardware", "jax_version",
           "cache_dir", "mixed_precision", "tag", "hostname", "timestamp", "cache_state", "cache_state_source",
           "status", "host_cpu_count", "host_load_avg_1m", "run_id", "command", "cache_key", "cache_not_persisted",
           "cache_min_compile_time_s", "jax_cache_settings")


# Lineages (a cell across jax versions and cache dirs: ledger/watch/findings.py) are
# i % 1050 (7 transforms x 3 models x 50 hosts). A few of them carry the events that
# give every cache finding kind, placed relative to the ledger's size `total` and the
# row `first` at which the first check runs (the rest arrive a day at a time after it).
LINEAGES = 1050
OFF, BUMP_EARLY, BUMP_LATE = 1, 2, 3  # lineage % 25: lost its cache dir; jax bumped before the first check; after
QUICK, LIMITED = 4, 5  # lineage % 25: compiles under JAX's 1 s threshold (below-threshold); a size limit (evicted)
MODELS = ("mge", "pixelization", "knn")
NEW_JAX = "0.10.3"


def _stamp(month: int, i: int) -> str:
    """Row i's time: one row a second from the month's start, so newer rows are newer."""
    return f"2026-{month:02d}-{1 + i // 86_400:02d}T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}.{i:07d}"


def rows(start: int, n: int, month: int, total: int, first: int):
    rnd = random.Random(start)
    for i in range(start, start + n):
        no_dir = i % 10 == 0
        # the second month is the cache working: cold rows are rare, a few warm ones slow
        cold_share = 0.3 if month == 7 else 0.001
        state = "none" if no_dir else "cold" if rnd.random() < cold_share else "warm" if i % 19 else "unknown"
        slow = 1.0 if rnd.random() > 0.001 else 10.0
        host, cache_dir, jax = f"node{i % 50}", "" if no_dir else f"/tmp/cache{i % 17}", "0.10.2"
        event = i % LINEAGES % 25
        if event == OFF and i >= total - total // 25:
            # cache-off: the jobs of these cells lost JAX_COMPILATION_CACHE_DIR for good
            cache_dir, state = "", "none"
        elif event == BUMP_EARLY and first - LINEAGES <= i:
            # jax-changed: a bump just before the first check, its first compile cold, then warm
            jax, state = NEW_JAX, "cold" if i < first else "warm"
        elif event == BUMP_LATE and i >= total - LINEAGES:
            jax, state = NEW_JAX, "cold"  # jax-changed seen by the checks after the first
        elif i % 1000 == 7:
            # cache-not-reused: scratch nodes where each job's cache dir is its own $TMPDIR
            host, cache_dir, state = f"scratch{i // 1000 % 4}", f"/tmp/job{i // 1000 % 10}", "cold"
        compile_s = (rnd.uniform(2, 2.6) * slow) if state == "warm" else rnd.uniform(50, 300)
        quick = event == QUICK and state != "none"
        if quick:  # never written, so cold every run, and they add up (below-threshold)
            state, compile_s = "cold", rnd.uniform(0.2, 0.9)
        settings = '{"jax_compilation_cache_max_size": 1000000000}' if event == LIMITED else None
        # each model's fit is a program; a run is one day of it on one host (the health findings' units)
        model = MODELS[i % 3]
        yield (TRANSFORMS[i % 7], compile_s, "imaging", model, "hst",
               "local_cpu", jax, cache_dir, False, f"t{i % 40}", host, _stamp(month, i),
               state, "measured_events", "failed" if i % 997 == 0 else "ok", 32,
               rnd.uniform(0, 40) if i % 53 == 0 else rnd.uniform(0, 8),
               f"{model}-{host}-{month}-{i // 86_400}", f"python {'quick' if event == QUICK else 'fit'}_{model}.py",
               f"jit_{TRANSFORMS[i % 7]}-{i % LINEAGES:032x}{jax.replace('.', ''):0>32}",
               "min_compile_time" if quick else None, 1.0 if quick else None, settings)


def insert(path: Path, start: int, n: int, month: int, total: int, first: int) -> None:
    con = sqlite3.connect(path)
    with con:
        con.executemany(f"INSERT INTO compile_records ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
                        rows(start, n, month, total, first))
    con.close()
    give_cells(f"sqlite:///{path}")


def give_cells(url: str) -> None:
    """What every writer does in its transaction (revision 0018): the new rows' cells."""
    import sqlalchemy as sa

    from ledger.storage.cell_ids import assign

    engine = sa.create_engine(url)
    with engine.begin() as conn:
        assign(conn)
    engine.dispose()


def ledger(*args) -> None:
    subprocess.run([BIN / "ledger", *map(str, args)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def build(path: Path, n: int) -> None:
    ledger("db", "upgrade", "--db", path)
    insert(path, 0, n // 2, 7, n, n - n // 100)
    ledger("pins", "update", "--db", path)
    insert(path, n // 2, n - n // 2 - n // 100, 8, n, n - n // 100)


def a_day_later(path: Path, n: int) -> None:
    """Checked once (the cells built), then a day's rows arrive."""
    cli_check(path)
    insert(path, n - n // 100, n // 100, 8, n, n - n // 100)


def counts(con) -> str:
    """The last check run's verdicts, kind by kind (every kind, none left out)."""
    from ledger.watch.kinds import KINDS

    got = dict(con.execute("SELECT verdict, SUM(n_rows) FROM verdicts WHERE check_run_id ="
                           " (SELECT MAX(id) FROM check_runs) GROUP BY verdict").fetchall())
    return ", ".join(f"{int(got.get(k, 0)):,} {k}" for k in KINDS)


def said(findings: list[dict]) -> list[tuple]:
    """What a check says of each finding: its kind, row, words, whether it fails, its pin
    and what the row cost against it (the check run's own ids left out)."""
    return [(f["verdict"], f["row_id"], f["cause"], f["fails"], f["pin_id"], f["compile_s"], f["ratio"])
            for f in findings]


def daily_equals_full(db: str) -> str:
    """The last check's findings against a full check's of the same rows, in a transaction
    rolled back: the cache cells folded again from every row (upto 0) and nothing taken
    from an earlier run (rejudge). Raises if they differ in any line."""
    import sqlalchemy as sa

    from ledger.storage.open import open_ledger
    from ledger.watch.check import judge, stored_findings

    with open_ledger(db, "write", create=False) as led:
        with led.engine.connect() as conn:
            daily = said(stored_findings(conn, conn.execute(sa.text("SELECT MAX(id) FROM check_runs")).scalar()))
        with led.engine.connect() as conn, conn.begin() as txn:
            conn.execute(sa.text("UPDATE cache_cells_state SET upto = 0"))
            t0 = time.perf_counter()
            full = said(judge(conn, rejudge=True).findings)
            took = time.perf_counter() - t0
            txn.rollback()
    differ = [(a, b) for a, b in zip(daily, full) if a != b]
    assert daily == full, f"the daily check said {len(daily)} findings, a full check {len(full)}; first differing:" \
                          f" {differ[:1] or (daily[len(full):] + full[len(daily):])[:1]}"
    return f"the daily check's {len(daily):,} findings equal a full check's line for line (the full check: {took:.1f}s)"


# Every column the check reads, of every row it reads (the ok rows), in one scan.
FLOOR_SQL = ("SELECT sum(length(hardware) + length(hostname) + length(jax_version) + length(dataset_class)"
             " + length(model_type) + length(instrument) + length(transform) + length(cache_dir) + length(cache_state)"
             " + mixed_precision + host_cpu_count), sum(compile_s), sum(host_load_avg_1m), max(timestamp)"
             " FROM compile_records WHERE COALESCE(status, 'ok') = 'ok'")


def copy_synced(src: Path, dst: Path) -> None:
    """A copy of a ledger, on disk before it is timed. A fresh copy's pages wait in the page
    cache, and the first fsync after it (a check's commit checkpoints its WAL into the file)
    would write the whole file out: a cost no ledger that has been on disk a while pays
    (0.1-0.3 s of a daily check at 1M rows), and one the read-only floor never pays."""
    shutil.copy(src, dst)
    fd = os.open(dst, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def floor(path: Path) -> float:
    con = sqlite3.connect(path)
    t0 = time.perf_counter()
    con.execute(FLOOR_SQL).fetchall()
    wall = time.perf_counter() - t0
    con.close()
    return wall


def cli_check(path: Path) -> float:
    t0 = time.perf_counter()
    rc = subprocess.run([BIN / "ledger", "check", "--db", path], stdout=subprocess.DEVNULL, check=False).returncode
    assert rc in (0, 1), rc
    return time.perf_counter() - t0


def library_check(path: Path):
    from ledger.storage.open import open_ledger
    from ledger.watch.check import run_check

    with open_ledger(str(path), "write", create=False) as led:
        t0 = time.perf_counter()
        run_check(led.engine)
        return time.perf_counter() - t0


def pg_insert(url: str, start: int, n: int, month: int, total: int, first: int) -> None:
    import psycopg

    with psycopg.connect(url) as con, con.cursor().copy(
            f"COPY compile_records ({', '.join(COLUMNS)}) FROM STDIN") as copy:
        for row in rows(start, n, month, total, first):
            copy.write_row(row)
    give_cells(url.replace("postgresql://", "postgresql+psycopg://", 1))


def main_postgresql(n: int) -> None:
    """The daily check on PostgreSQL: a day's rows (1%) arrive, then `ledger check`; three
    times, each against the same bare scan."""
    import psycopg

    databases = PgDatabases("ledger_bench_check")
    url = databases.create("ledger")
    plain = url.replace("postgresql+psycopg://", "postgresql://", 1)
    day, first_at = n // 100, n - 3 * (n // 100)
    try:
        t0 = time.perf_counter()
        ledger("db", "upgrade", "--db", url)
        pg_insert(plain, 0, n // 2, 7, n, first_at)
        ledger("pins", "update", "--db", url)
        pg_insert(plain, n // 2, first_at - n // 2, 8, n, first_at)
        with psycopg.connect(plain, autocommit=True) as con:
            con.execute("VACUUM ANALYZE compile_records")
        print(f"built {n:,} rows (half pinned) on PostgreSQL in {time.perf_counter() - t0:.1f}s")
        first = cli_check(url)
        with psycopg.connect(plain) as con:
            first_counts = counts(con)
        floors, clis, idles = [], [], []
        for d in range(3):
            pg_insert(plain, first_at + d * day, day, 8, n, first_at)
            with psycopg.connect(plain) as con:
                t0 = time.perf_counter()
                con.execute(FLOOR_SQL.replace("+ mixed_precision", "+ CAST(mixed_precision AS INTEGER)")).fetchall()
                floors.append(time.perf_counter() - t0)
            clis.append(cli_check(url))
            with psycopg.connect(plain) as con:
                daily_counts = counts(con)
            idles.append(cli_check(url))
        f, c, idle = min(floors), min(clis), min(idles)
        print(f"bare SQL scan (floor): {f:.2f}s   ledger check: {c:.2f}s   the same with no new rows: {idle:.2f}s"
              f"   first check after the upgrade (builds the cells): {first:.2f}s   (best of 3)")
        print(f"PostgreSQL ratio {c / f:.2f}x (target <= 3x) {verdict(c / f, 3)}; no new rows {idle / f:.2f}x;"
              f" first check {first / f:.2f}x (target <= 5x) {verdict(first / f, 5)}")
        print(f"first check's verdicts: {first_counts}")
        print(f"daily check's verdicts: {daily_counts}")
        print(daily_equals_full(url))
    finally:
        databases.drop()


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--postgresql"]
    n = int(args[0]) if args else 1_000_000
    if "--postgresql" in sys.argv:
        return main_postgresql(n)
    with tempfile.TemporaryDirectory() as tmp:
        src, work = Path(tmp) / "ledger.db", Path(tmp) / "work.db"
        t0 = time.perf_counter()
        build(src, n)
        print(f"built {n:,} rows (half pinned) in {time.perf_counter() - t0:.1f}s")
        firsts = []
        for _ in range(3):
            copy_synced(src, work)
            firsts.append(cli_check(work))
        first_counts = counts(sqlite3.connect(work))
        a_day_later(src, n)
        floors, clis, idles, libs = [], [], [], []
        for _ in range(3):
            copy_synced(src, work)
            floors.append(floor(work))
            clis.append(cli_check(work))
            idles.append(cli_check(work))  # again, no row since
            copy_synced(src, work)
            libs.append(library_check(work))
        daily_counts = counts(sqlite3.connect(work))
        empty = Path(tmp) / "empty.db"
        ledger("db", "upgrade", "--db", empty)
        start = min(cli_check(empty) for _ in range(3))
        f, c, idle, lib, first = min(floors), min(clis), min(idles), min(libs), min(firsts)
        print(f"bare SQL scan (floor): {f:.2f}s   ledger check: {c:.2f}s   the same with no new rows: {idle:.2f}s"
              f"   library run_check: {lib:.2f}s   first check after the upgrade (builds the cells): {first:.2f}s"
              "   (best of 3)")
        print(f"ratio {c / f:.2f}x (target <= 1.5x) {verdict(c / f, 1.5)}; no new rows {idle / f:.2f}x;"
              f" library call {lib / f:.2f}x; first check {first / f:.2f}x (target <= 3x) {verdict(first / f, 3)};"
              f" CLI start-up (check of an empty ledger) {start:.2f}s")
        print(f"first check's verdicts: {first_counts}")
        print(f"daily check's verdicts: {daily_counts}")
        print(daily_equals_full(str(work)))
        migration(src, Path(tmp))


def migration(src: Path, tmp: Path) -> None:
    """Revision 0018's data step (every row's cell) on the same ledger, taken back to 0017,
    against a bare UPDATE that writes one integer into every row of the same table."""
    at_17, floor_db = tmp / "at17.db", tmp / "floor.db"
    copy_synced(src, at_17)
    ledger("db", "downgrade", "0017", "--db", at_17)
    copy_synced(at_17, floor_db)
    t0 = time.perf_counter()
    ledger("db", "upgrade", "0018", "--db", at_17)  # that step alone (not 0019's index builds after it)
    upgrade = time.perf_counter() - t0
    con = sqlite3.connect(floor_db)
    con.execute("ALTER TABLE compile_records ADD COLUMN bench_id BIGINT")
    t0 = time.perf_counter()
    with con:
        con.execute("UPDATE compile_records SET bench_id = id")
    bare = time.perf_counter() - t0
    con.close()
    print(f"revision 0018 (every row's cell id): `ledger db upgrade 0018` {upgrade:.2f}s, bare UPDATE of one integer"
          f" {bare:.2f}s: {upgrade / bare:.2f}x (target <= 1.5x) {verdict(upgrade / bare, 1.5)}")


if __name__ == "__main__":
    main()
