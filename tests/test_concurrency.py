"""Many writers at once, as on a cluster: every row arrives, no writer fails with
"database is locked", and readers are never refused (SQLite in WAL mode with
BEGIN IMMEDIATE and a busy timeout; PostgreSQL as it is)."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.storage.sqlite_file import filesystem_type, network_filesystem

from .conftest import query, run_cli, write_json

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


def test_concurrent_imports_lose_nothing(any_db, tmp_path):
    assert run_cli("db", "upgrade", "--db", any_db).exit_code == 0
    files = _files(tmp_path, writers=8, per_writer=200)
    procs = [subprocess.Popen([LEDGER, "import", f, "--db", str(any_db)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=_env()) for f in files]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close(), p.stderr.close()
    assert results == [(0, "")] * 8
    assert query(any_db, "SELECT count(*), count(DISTINCT tag) FROM compile_records") == [(1600, 1600)]


def _commit_rows(db: str, writer: int, n: int) -> None:
    """A probe's way of writing: one transaction per row."""
    from ledger.storage.open import open_ledger
    from ledger.storage.writer import add_compile_record

    with open_ledger(db, "write") as ledger:
        for i in range(n):
            add_compile_record(ledger.engine, dict(RECORD, tag=f"p{writer}-{i}", cache_state="warm",
                                                   cache_state_source="measured_events", status="ok"))


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


def test_a_reader_is_not_refused_while_an_import_writes(any_db, tmp_path):
    assert run_cli("db", "upgrade", "--db", any_db).exit_code == 0
    (big,) = _files(tmp_path, writers=1, per_writer=20_000)
    writer = subprocess.Popen([LEDGER, "import", big, "--db", str(any_db)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, env=_env())
    seen = set()
    while writer.poll() is None:
        read = subprocess.run([LEDGER, "sql", "SELECT count(*) FROM compile_records", "--csv", "--db", str(any_db)],
                              capture_output=True, text=True, env=_env())
        assert read.returncode == 0, read.stderr
        seen.add(int(read.stdout.split()[-1]))
    assert writer.wait() == 0, writer.stderr.read()
    writer.stderr.close()
    assert seen <= {0, 20_000}  # all or nothing, never part of the import
    assert query(any_db, "SELECT count(*) FROM compile_records") == [(20_000,)]


def test_a_writer_that_cannot_get_the_lock_in_time_says_so_and_writes_nothing(db, tmp_path):
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    (f,) = _files(tmp_path, writers=1, per_writer=10)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer, holding the lock
    try:
        late = subprocess.run([LEDGER, "import", f, "--db", db], capture_output=True, text=True,
                              env=_env(LEDGER_BUSY_TIMEOUT="0.3"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert late.returncode == 1 and late.stderr.count("\n") == 1 and "database is locked" in late.stderr
    assert query(db, "SELECT count(*) FROM compile_records") == [(0,)]
    assert subprocess.run([LEDGER, "import", f, "--db", db], capture_output=True, env=_env()).returncode == 0
    assert query(db, "SELECT count(*) FROM compile_records") == [(10,)]


def test_a_bad_busy_timeout_is_one_line(db, monkeypatch):
    monkeypatch.setenv("LEDGER_BUSY_TIMEOUT", "soon")
    result = run_cli("import", write_json(db.parent / "r.json", [RECORD]), "--db", db)
    assert (result.exit_code, result.output) == (1, "error: LEDGER_BUSY_TIMEOUT='soon' is not a number of seconds\n")
    assert not db.exists()


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
