"""Many writers at once, as on a cluster: every row arrives, no writer fails with
"database is locked", the writers really do overlap (one barrier, and each says
whom it saw), and a read goes on while a write is open (SQLite in WAL mode with
BEGIN IMMEDIATE and a busy timeout; PostgreSQL as it is)."""

from __future__ import annotations

import multiprocessing
import os
import queue
import re
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ledger.storage.sqlite_file import filesystem_type, network_filesystem

from .conftest import PgDb, query, run_cli, write_json
from .ledgers import add, rec

LEDGER = Path(sys.executable).with_name("ledger")
RECORD = {"transform": "jit", "compile_s": 1.5, "trace_s": 0.1, "model_type": "mge", "dataset_class": "imaging",
          "instrument": "hst", "hardware": "local_cpu", "hostname": "node1", "jax_version": "0.10.2",
          "cache_dir": "/c", "tag": "x-warm", "timestamp": "2026-07-01T10:00:00"}


def _files(tmp_path, writers: int, per_writer: int) -> list[Path]:
    return [write_json(tmp_path / "in" / f"w{w}.json",
                       [dict(RECORD, tag=f"w{w}-{i}-warm", compile_s=1.0 + i) for i in range(per_writer)])
            for w in range(writers)]


def _env(**extra) -> dict:
    return {**os.environ, **extra}


@pytest.mark.alone  # many writers and the lock they wait for
@pytest.mark.slow
@pytest.mark.parametrize("ledger", ["upgraded", "new"])
def test_concurrent_imports_lose_nothing(any_db, tmp_path, ledger):
    """Into a ledger just upgraded (on SQLite in rollback mode: each writer may be the one
    to put it in WAL mode), or into none yet: each writer may be the one to make it."""
    if ledger == "upgraded":
        assert run_cli("db", "upgrade", "--db", any_db).exit_code == 0
    files = _files(tmp_path, writers=8, per_writer=200)
    results = _at_once([[LEDGER, "import", f, "--db", str(any_db)] for f in files], tmp_path)
    assert [(code, err) for code, _, err in results] == [(0, "")] * 8
    assert query(any_db, "SELECT count(*), count(DISTINCT tag) FROM compile_records") == [(1600, 1600)]


def _commit_rows(db: str, writer: int, n: int) -> None:
    """A probe's way of writing: one transaction per row."""
    from ledger.storage.open import open_ledger
    from ledger.storage.writer import add_compile_record

    with open_ledger(db, "write") as ledger:
        for i in range(n):
            add_compile_record(ledger.engine, dict(RECORD, tag=f"p{writer}-{i}", cache_state="warm",
                                                   cache_state_source="measured_events", status="ok"))


@pytest.mark.alone  # many writers and the lock they wait for
@pytest.mark.slow
def test_concurrent_one_row_commits_lose_nothing(any_db):
    assert run_cli("db", "upgrade", "--db", any_db).exit_code == 0
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter each, as separate probes are
    procs = [ctx.Process(target=_commit_rows, args=(str(any_db), w, 40)) for w in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * 6
    assert query(any_db, "SELECT count(*), count(DISTINCT tag) FROM compile_records") == [(240, 240)]


@pytest.mark.alone  # many checks and the lock they wait for
@pytest.mark.slow
def test_concurrent_checks_each_run_and_say_the_same(any_db, tmp_path):
    """Checks of one ledger at once (two CI jobs, a user and a cron): each runs whole, one
    after another, and says what the others say. On PostgreSQL two that held their lock
    together deadlocked writing the same cells, and all but one failed."""
    add(any_db, tmp_path, rec(compile_s=1.0, timestamp="2026-07-01T10:00:00"))
    assert run_cli("pins", "update", "--db", any_db).exit_code == 0
    add(any_db, tmp_path, rec(compile_s=1.1, timestamp="2026-07-02T10:00:00"),
        rec(compile_s=3.0, timestamp="2026-07-03T10:00:00"))
    results = _at_once([[LEDGER, "check", "--db", str(any_db)]] * 6, tmp_path)
    assert [err for _, _, err in results] == [""] * 6
    said = {int(re.search(r"^check run (\d+) ", out, re.MULTILINE)[1]): (code, out) for code, out, _ in results}
    assert sorted(said) == [1, 2, 3, 4, 5, 6], results
    summary = "(tolerance 1.5x): 1 ok, 1 regression, 0 inconclusive, 0 went-cold\n"
    first = said.pop(1)
    assert first[0] == 1 and first[1].startswith("regression ") and first[1].endswith(f"check run 1 {summary}")
    for n, (code, out) in said.items():  # each after the one before it, whole
        unchanged = f"1 finding in 1 line unchanged since check run {n - 1}, 1 of them failing"
        assert (code, out) == (1, f"{unchanged}: ledger check --verbose lists them\ncheck run {n} {summary}")


def _at_once(commands: list[list], tmp_path) -> list[tuple[int, str, str]]:
    """The commands run at once; (exit code, stdout, stderr) of each. Their output goes to
    files: one blocked on a full pipe, with the lock held, would hold every other."""
    outs = [(tmp_path / f"out{i}", tmp_path / f"err{i}") for i in range(len(commands))]
    procs = []
    for command, (out, err) in zip(commands, outs, strict=True):
        with open(out, "w") as o, open(err, "w") as e:
            procs.append(subprocess.Popen(command, stdout=o, stderr=e, text=True, env=_env()))
    codes = [p.wait(timeout=300) for p in procs]
    return [(code, out.read_text(), err.read_text()) for code, (out, err) in zip(codes, outs, strict=True)]


def _keys(tmp_path, n: int, node: int = 0) -> Path:
    """n records of n keys (a host each), warm: each one a pin to make. Another node's
    are other measurements of the same keys."""
    return write_json(tmp_path / "keys" / f"k{n}-{node}.json",
                      [dict(RECORD, hostname=f"h{i}", tag=f"k{i}-node{node}-warm", compile_s=1.0 + node / 100)
                       for i in range(n)])


@pytest.mark.alone  # many writers and the lock they wait for
@pytest.mark.slow
def test_concurrent_pin_updates_pin_each_key_once(any_db, tmp_path):
    """`pins update` run at once (a job's last step on every node): one pins every key, the
    others find them pinned. On PostgreSQL each planned the same pins, and all but one
    failed on the unique pin_key."""
    assert run_cli("import", _keys(tmp_path, 2000), "--db", any_db).exit_code == 0
    results = _at_once([[LEDGER, "pins", "update", "--db", str(any_db)]] * 6, tmp_path)
    assert [(code, err) for code, _, err in results] == [(0, "")] * 6
    assert sorted(out.splitlines()[-1] for _, out, _ in results) == [
        "2000 pins: 0 new, 0 repinned, 2000 unchanged"] * 5 + ["2000 pins: 2000 new, 0 repinned, 0 unchanged"]
    assert query(any_db, "SELECT count(*), count(DISTINCT pin_key) FROM pins") == [(2000, 2000)]


@pytest.mark.alone  # many writers and the lock they wait for
@pytest.mark.slow
def test_concurrent_merges_adopt_each_pin_once(any_db, tmp_path):
    """Nodes' ledgers, each with the same keys pinned on rows of its own, merged at once
    into a ledger that has measured those keys (its cells made) and pinned none: the first
    merged takes the pins, the others' differ. On PostgreSQL each adopted them, and all
    but one failed on the unique pin_key."""
    assert run_cli("import", _keys(tmp_path, 1000, 9), "--db", any_db).exit_code == 0
    nodes = []
    for n in range(4):
        nodes.append(tmp_path / f"node{n}.db")
        assert run_cli("import", _keys(tmp_path, 1000, n), "--db", nodes[-1]).exit_code == 0
        assert run_cli("pins", "update", "--db", nodes[-1]).exit_code == 0
    results = _at_once([[LEDGER, "merge", str(node), "--db", str(any_db)] for node in nodes], tmp_path)
    assert [(code, err) for code, _, err in results] == [(0, "")] * 4
    taken = sorted(re.search(r"pins: (\d+) taken, \d+ the same, (\d+) differ", out).groups() for _, out, _ in results)
    assert taken == [("0", "1000")] * 3 + [("1000", "0")]
    assert query(any_db, "SELECT count(*), count(DISTINCT pin_key) FROM pins") == [(1000, 1000)]


@pytest.mark.alone  # many writers and the lock they wait for
@pytest.mark.slow
def test_merges_of_the_same_nodes_in_either_order_at_once_both_land(any_db, tmp_path):
    """Two `ledger merge` runs of the same two nodes' ledgers at once, in opposite orders (two
    jobs gathering what the nodes wrote). A merge takes a source's rows, then its pins, then
    the next source's rows: on PostgreSQL each waited on rows the other had inserted, and
    one failed with "deadlock detected" in 3 rounds of 3. Now one merge adds every row of
    a round and the other finds them all here."""
    for rnd in range(2):
        nodes = []
        for n in range(2):
            nodes.append(str(tmp_path / f"node{rnd}-{n}.db"))
            assert run_cli("import", _keys(tmp_path, 1000, 10 * rnd + n), "--db", nodes[-1]).exit_code == 0
            assert run_cli("pins", "update", "--db", nodes[-1]).exit_code == 0
        results = _at_once([[LEDGER, "merge", *nodes, "--db", str(any_db)],
                            [LEDGER, "merge", *nodes[::-1], "--db", str(any_db)]], tmp_path)
        assert [(code, err) for code, _, err in results] == [(0, "")] * 2
        added = sorted(out.splitlines()[-1] for _, out, _ in results)
        assert [line.split(": ", 1)[1] for line in added] == ["0 compile rows added", "2000 compile rows added"]
        assert query(any_db, "SELECT count(*) FROM compile_records") == [(2000 * (rnd + 1),)]
    assert query(any_db, "SELECT count(*), count(DISTINCT pin_key) FROM pins") == [(1000, 1000)]


@pytest.mark.slow
def test_concurrent_pytest_sessions_pin_each_test_once(any_db, tmp_path):
    """`pytest --ledger-pin` of one suite in two jobs at once (ledger/pytest_plugin/pins.py): one
    pins every passed test, the other keeps those pins. On PostgreSQL both pinned them,
    and one failed on the unique (test_id, function)."""
    from ledger.pytest_plugin.pins import pin_session
    from ledger.storage.engine import make_engine

    from .ledgers import at_head

    at_head(any_db)
    url = any_db.url if isinstance(any_db, PgDb) else f"sqlite:///{any_db}"
    tests, start = {f"tests/test_x.py::test_{i}" for i in range(2000)}, threading.Barrier(2)
    outcome: queue.Queue = queue.Queue()

    def session(run_id: str):
        engine = make_engine(url, wal=True)
        try:
            start.wait(timeout=60)
            pinned = pin_session(engine, run_id, tests, None, repin=False)
            outcome.put((pinned.new, pinned.kept))
        except Exception as exc:  # noqa: BLE001 - handed to the test's thread
            outcome.put(exc)
        finally:
            engine.dispose()

    sessions = [threading.Thread(target=session, args=(run,)) for run in ("a", "b")]
    for s in sessions:
        s.start()
    for s in sessions:
        s.join(timeout=300)
    assert sorted(outcome.get(timeout=1) for _ in sessions) == [(0, 2000), (2000, 0)]
    assert query(any_db, "SELECT count(*), count(DISTINCT test_id) FROM test_pins") == [(2000, 2000)]


# -- the writers overlap, and a read goes on while a write is open -------------------------

WRITERS = 16  # as bench/bench_concurrency.py runs them
START, WAITING, INSIDE, DONE = 0, 1, 2, 3  # where each writer is, in an array they share
HOLD_S = 0.1  # how long a writer inside holds on before it looks at the others


def _row(tag: str) -> dict:
    from ledger.record_validation import compile_row

    return compile_row(dict(RECORD, tag=tag, cache_state="warm", cache_state_source="measured_events", status="ok"))


def _others(w: int, states, where: int) -> list[int]:
    return [o for o in range(len(states)) if o != w and states[o] == where]


def _overlapping_writer(db: str, w: int, barriers, states, pids, entered, results) -> None:
    """One of the writers: connected, it waits at the barrier for all of them, then
    opens a write transaction through the ledger's engine and writes a row in it.
    Before it commits it reports the others it saw: on SQLite the writers queued
    behind it for the write lock (BEGIN IMMEDIATE), on PostgreSQL the writers whose
    write transactions were open beside its own, as the server lists them."""
    from sqlalchemy import insert

    from ledger.storage.models import compile_records
    from ledger.storage.open import open_ledger

    start, inside, looked = barriers
    row = _row(f"overlap-{w}")
    with open_ledger(db, "write") as ledger, ledger.engine.connect() as conn:
        postgresql = conn.dialect.name == "postgresql"
        if postgresql:
            pids[w] = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
            conn.commit()
        start.wait()
        states[w] = WAITING
        with conn.begin():
            states[w] = INSIDE
            with entered.get_lock():
                entered.value += 1
                rank = entered.value
            conn.execute(insert(compile_records).values(**row))
            if postgresql:
                inside.wait()  # every writer inside its transaction, its row written
                open_pids = set(conn.exec_driver_sql(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                    " AND backend_xid IS NOT NULL").scalars())
                seen = [o for o in range(len(states)) if o != w and pids[o] in open_pids]
                results.put((w, rank, seen, _others(w, states, INSIDE)))
                looked.wait()  # none commits before all have looked
            else:
                # every other writer at its BEGIN or done, and still waiting a while later
                deadline = time.monotonic() + 60
                while _others(w, states, START) and time.monotonic() < deadline:
                    time.sleep(0.001)
                time.sleep(HOLD_S)
                results.put((w, rank, _others(w, states, WAITING), _others(w, states, INSIDE)))
            states[w] = DONE  # just before the commit: INSIDE is only while it holds the lock


@pytest.mark.alone  # many writers and the lock they wait for
@pytest.mark.slow
def test_sixteen_writers_overlap(any_db):
    """16 writers (separate interpreters, as separate probes are) open their write
    transactions together, behind one barrier. On SQLite one holds the write lock
    at a time and the rest wait for it, none refused: the k-th in saw exactly the
    16 - k that came in after it queued behind it, and nobody else inside. On
    PostgreSQL all 16 transactions are open at once: each saw the other 15."""
    assert run_cli("db", "upgrade", "--db", any_db).exit_code == 0
    ctx = multiprocessing.get_context("spawn")
    barriers = [ctx.Barrier(WRITERS, timeout=120) for _ in range(3)]
    states, pids, entered, results = ctx.Array("i", WRITERS), ctx.Array("i", WRITERS), ctx.Value("i", 0), ctx.Queue()
    procs = [ctx.Process(target=_overlapping_writer, args=(str(any_db), w, barriers, states, pids, entered, results))
             for w in range(WRITERS)]
    for p in procs:
        p.start()
    reports = []
    try:
        for _ in procs:
            reports.append(results.get(timeout=300))
    except queue.Empty:
        pass
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * WRITERS, reports
    everyone = set(range(WRITERS))
    if isinstance(any_db, PgDb):
        assert sorted(reports) == [(w, rank, sorted(everyone - {w}), sorted(everyone - {w}))
                                   for w, rank, _, _ in sorted(reports)]
    else:
        rank_of = {w: rank for w, rank, _, _ in reports}
        assert sorted(rank_of.values()) == list(range(1, WRITERS + 1))
        for w, rank, seen, inside in reports:
            assert (seen, inside) == (sorted(o for o in everyone if rank_of[o] > rank), []), reports
    assert query(any_db, "SELECT count(*), count(DISTINCT tag) FROM compile_records") == [(WRITERS, WRITERS)]


COUNT_OPEN_SQL = "SELECT count(*) AS n, sum(CASE WHEN tag LIKE 'open-%' THEN 1 ELSE 0 END) AS open FROM compile_records"


def _hold_a_write_open(db: str, rows: int, opened, release, committed) -> None:
    """Write `rows` rows in one transaction, and hold it open until released."""
    from sqlalchemy import insert

    from ledger.storage.models import compile_records
    from ledger.storage.open import open_ledger

    with open_ledger(db, "write") as ledger:
        with ledger.engine.begin() as conn:
            conn.execute(insert(compile_records), [_row(f"open-{i}") for i in range(rows)])
            opened.set()
            if not release.wait(timeout=300):
                raise TimeoutError("never released")
        committed.set()


@pytest.mark.slow
def test_a_read_while_a_write_is_open_sees_the_last_commit(any_db, tmp_path):
    """A writer holds a transaction open with 500 rows written in it (on SQLite it
    holds the write lock). `ledger sql` reads meanwhile: it is not refused and sees
    the committed snapshot, none of the open rows; after the commit, all of them."""
    assert run_cli("import", write_json(tmp_path / "r.json", [RECORD]), "--db", any_db).exit_code == 0
    ctx = multiprocessing.get_context("spawn")
    opened, release, committed = ctx.Event(), ctx.Event(), ctx.Event()
    writer = ctx.Process(target=_hold_a_write_open, args=(str(any_db), 500, opened, release, committed))
    writer.start()
    try:
        assert opened.wait(timeout=300), "the writer never opened its transaction"
        during = subprocess.run([LEDGER, "sql", COUNT_OPEN_SQL, "--csv", "--db", str(any_db)], capture_output=True,
                                text=True, env=_env(), timeout=300, check=False)
        still_open = writer.is_alive() and not committed.is_set()
    finally:
        release.set()
        writer.join(timeout=300)
    assert (during.returncode, during.stdout, during.stderr) == (0, "n,open\n1,0\n", "")
    assert still_open and writer.exitcode == 0 and committed.is_set()  # the read was inside the write
    after = run_cli("sql", COUNT_OPEN_SQL, "--csv", "--db", any_db)
    assert (after.exit_code, after.output) == (0, "n,open\n501,500\n")


@pytest.mark.alone  # many writers and the lock they wait for
@pytest.mark.slow
def test_a_writer_that_cannot_get_the_lock_in_time_says_so_and_writes_nothing(db, tmp_path):
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    (f,) = _files(tmp_path, writers=1, per_writer=10)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer, holding the lock
    try:
        late = subprocess.run([LEDGER, "import", f, "--db", db], capture_output=True, text=True,
                              env=_env(LEDGER_BUSY_TIMEOUT="0.3"), check=False)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert late.returncode == 1 and late.stderr.count("\n") == 1 and "database is locked" in late.stderr
    assert query(db, "SELECT count(*) FROM compile_records") == [(0,)]
    assert subprocess.run([LEDGER, "import", f, "--db", db], capture_output=True, env=_env(), check=False).returncode == 0
    assert query(db, "SELECT count(*) FROM compile_records") == [(10,)]


def test_a_bad_busy_timeout_is_one_line(db, monkeypatch):
    monkeypatch.setenv("LEDGER_BUSY_TIMEOUT", "soon")
    result = run_cli("import", write_json(db.parent / "r.json", [RECORD]), "--db", db)
    assert (result.exit_code, result.output) == (1, "error: LEDGER_BUSY_TIMEOUT='soon' is not a number of seconds\n")
    assert not db.exists()


def test_a_writer_putting_the_ledger_in_wal_mode_waits_for_the_lock(db):
    """`ledger db upgrade` leaves the file in rollback mode; the first writer puts it in
    WAL mode. While another holds the write lock, SQLite refuses that step at once (busy
    timeout or not): the writer tries it again until the lock is free, as eight imports
    of a ledger just upgraded need."""
    from ledger.storage.engine import make_engine

    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    assert query(db, "PRAGMA journal_mode") == [("delete",)]
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    outcome: queue.Queue = queue.Queue()

    def open_to_write():
        engine = make_engine(f"sqlite:///{db}", wal=True)
        try:
            with engine.connect() as conn:
                outcome.put(conn.exec_driver_sql("PRAGMA journal_mode").scalar())
        except Exception as exc:  # noqa: BLE001 - handed to the test's thread
            outcome.put(exc)
        finally:
            engine.dispose()

    opener = threading.Thread(target=open_to_write)
    opener.start()
    try:
        with pytest.raises(queue.Empty):  # still waiting while the lock is held
            outcome.get(timeout=0.5)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        opener.join(timeout=60)
    assert outcome.get(timeout=1) == "wal"
    assert query(db, "PRAGMA journal_mode") == [("wal",)]


@pytest.mark.parametrize("other_open", [True, False], ids=["another-has-it-open", "alone"])
def test_a_failed_first_write_removes_the_new_file_only_if_no_other_has_it_open(tmp_path, other_open):
    """A write that fails leaves no new, empty ledger behind; but a file another writer has
    opened since is its own (a SLURM array's first writes): removing it lost every row
    that writer then committed, its command ending well."""
    from ledger.errors import LedgerError
    from ledger.storage.engine import make_engine
    from ledger.storage.open import open_ledger

    db = tmp_path / "new.db"
    failing = open_ledger(str(db), "write")  # found it missing: made it, at head
    other = make_engine(f"sqlite:///{db}", wal=True)
    try:
        if other_open:
            other.connect().close()  # into the pool: open, idle, as a writer between transactions
        failing.__exit__(LedgerError, LedgerError("a bad record"), None)
        assert db.exists() is other_open
        if other_open:  # and what the other writes is there
            with other.begin() as conn:
                conn.exec_driver_sql("INSERT INTO compile_records (transform, compile_s) VALUES ('jit', 1.0)")
            assert query(db, "SELECT count(*) FROM compile_records") == [(1,)]
    finally:
        other.dispose()


def test_the_ledger_runs_in_wal_mode(db):
    assert run_cli("import", write_json(db.parent / "r.json", [RECORD]), "--db", db).exit_code == 0
    assert query(db, "PRAGMA journal_mode") == [("wal",)]


MOUNTS = """\
/dev/vda1 / ext4 rw,relatime 0 0
nfs-server:/export/home /home nfs4 rw,relatime,vers=4.2 0 0
/dev/vdb1 /home/me/local ext4 rw 0 0
lustre@tcp:/scratch /scratch lustre rw 0 0
/dev/vdc1 /mnt/with\\040space xfs rw 0 0
"""


@pytest.mark.parametrize("path, kind, network", [
    ("/tmp/ledger.db", "ext4", None),
    ("/home/me/ledger.db", "nfs4", "nfs4"),
    ("/home/me/local/ledger.db", "ext4", None),  # the deepest mount point wins
    ("/scratch/run1/ledger.db", "lustre", "lustre"),
    ("/mnt/with space/ledger.db", "xfs", None),
])
def test_network_filesystems_are_recognised(path, kind, network):
    assert filesystem_type(Path(path), MOUNTS) == kind
    assert network_filesystem(Path(path), MOUNTS) == network


def test_a_ledger_on_a_network_filesystem_warns_and_stays_out_of_wal(db, monkeypatch):
    # where this runs there is no NFS mount to test on: the mount table says there is
    monkeypatch.setattr("ledger.storage.sqlite_file.filesystem_type", lambda path, mounts=None: "nfs4")
    out = run_cli("import", write_json(db.parent / "r.json", [RECORD]), "--db", db)
    assert out.exit_code == 0
    (warning,) = [line for line in out.output.splitlines() if line.startswith("warning: ")]
    assert warning.startswith(f"warning: {db} is on nfs4, a network filesystem: ")
    assert query(db, "PRAGMA journal_mode") == [("delete",)]



class _Flaky:
    """A connection whose BEGIN is refused `refusals` times at once (as SQLite does
    while it recovers a crashed writer's WAL), then goes through."""

    def __init__(self, refusals: int):
        self.refusals, self.calls = refusals, 0

    def exec_driver_sql(self, sql):
        from sqlalchemy.exc import OperationalError

        self.calls += 1
        if self.calls <= self.refusals:
            raise OperationalError(sql, (), sqlite3.OperationalError("database is locked"))


@pytest.mark.alone  # many writers and the lock they wait for
@pytest.mark.slow
def test_a_begin_refused_at_once_is_retried_a_bounded_number_of_times():
    from ledger.storage.engine import BEGIN_RETRIES, _begin_with_retries

    flaky = _Flaky(refusals=BEGIN_RETRIES)
    _begin_with_retries(flaky, "BEGIN IMMEDIATE", timeout=600)
    assert flaky.calls == BEGIN_RETRIES + 1
    with pytest.raises(Exception, match="database is locked"):
        _begin_with_retries(_Flaky(refusals=BEGIN_RETRIES + 1), "BEGIN IMMEDIATE", timeout=600)
    # a refusal that took the whole busy timeout is not retried
    once = _Flaky(refusals=1)
    with pytest.raises(Exception, match="database is locked"):
        _begin_with_retries(once, "BEGIN IMMEDIATE", timeout=0)
    assert once.calls == 1
