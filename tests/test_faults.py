"""Faults, on SQLite: the installed `ledger` killed mid-transaction, a read-only
database or directory, a full disk, a probe killed between transforms. On
PostgreSQL: `ledger db upgrade` killed inside its migration transaction.

Read-only and full are made for real, not simulated inside SQLite: in a private
mount namespace (tests/case_kinds.py: a user namespace's, or root's own), a
read-only bind mount and a small tmpfs. They vanish with the namespace's last
process, so a failed test leaves no mount behind. Read-only is also made with
permission bits, for a user they bind: the test's own, or, as root, nobody.
Where either cannot be made the case skips, saying why, or under
LEDGER_REQUIRE_ALL fails.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from ledger.record import LEGACY_FIELDS
from ledger.storage.revisions import HEAD

from .case_kinds import mount_namespace, unprivileged
from .conftest import (
    CORPUS,
    CORPUS_COMPILE,
    CORPUS_SIBLINGS,
    CORPUS_STATES,
    compile_records_of_corpus,
    query,
    run_cli,
    write_json,
)

LEDGER = Path(sys.executable).with_name("ledger")
GOOD = compile_records_of_corpus()[0]
COUNTS_SQL = "SELECT (SELECT count(*) FROM compile_records) AS c, (SELECT count(*) FROM instrument_records) AS i"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k != "LEDGER_DB"}


def _ledger_counts(db: Path) -> tuple[int, int]:
    """The counts as the ledger reads them (`ledger sql`), not through a connection
    of the test's own: a read-write sqlite3 connection would quietly roll back a hot
    journal and hide that the ledger cannot."""
    result = run_cli("sql", COUNTS_SQL, "--csv", "--db", db)
    assert result.exit_code == 0, result.output
    return tuple(int(n) for n in result.stdout.splitlines()[1].split(","))


def _big_tree(root: Path, files: int, per_file: int) -> Path:
    """A legacy tree of files x per_file distinct compile records (the shape of
    bench/_common.py legacy_records)."""
    transforms = ("jit", "grad", "vag", "vmap", "vmap_vag", "laxmap_vag", "pyloop_vag")
    tags = ("census-cold", "census-warm", "census-warm2", "smoke", "cache-warm")
    for f in range(files):
        records = []
        for j in range(per_file):
            i = f * per_file + j
            records.append(dict(
                GOOD, transform=transforms[i % 7], compile_s=1.0 + (i % 997) / 7, trace_s=0.5 + (i % 13) / 3,
                cache_dir="" if i % 5 == 0 else f"/tmp/cache{i % 17}", tag=tags[i % 5], hostname=f"node{i % 50}",
                timestamp=f"2026-07-{1 + i % 28:02d}T00:00:00.{i}"))
        write_json(root / "local_cpu" / f"f{f:02d}.json", records)
    return root


# -- processes we start, and their readers ------------------------------------------------

def _group_alive(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group `pgid`."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.mark.alone  # kills a command inside its transaction, found by polling
@pytest.mark.slow
def test_import_killed_mid_transaction_leaves_nothing_partial(tmp_path, db):
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    before_sha = _sha(db)
    before_size = db.stat().st_size
    tree = _big_tree(tmp_path / "big", files=20, per_file=5_000)
    # A ledger written by `ledger import` is in WAL mode: the open transaction's pages
    # go to the -wal file, and nothing reaches the database file before the commit.
    wal = Path(f"{db}-wal")

    # its own session: the group is the import and its forked readers, and only they
    proc = subprocess.Popen([LEDGER, "import", tree, "--db", db], env=_env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        # Inside the transaction, with rows of it already written out: SQLite's page
        # cache has spilled megabytes of new rows into the WAL.
        deadline = time.monotonic() + 120
        while not (wal.exists() and wal.stat().st_size > 4_000_000):
            assert proc.poll() is None, f"the import ended before it could be killed: {proc.stderr.read()}"
            assert time.monotonic() < deadline, "the import never got inside its transaction"
            time.sleep(0.002)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        if Path("/proc/self/stat").exists():
            # the forked readers do not outlive it, waiting for work for ever
            deadline = time.monotonic() + 10
            while _group_alive(proc.pid):
                assert time.monotonic() < deadline, f"readers left running: {_group_alive(proc.pid)}"
                time.sleep(0.05)
    finally:
        _kill_group(proc.pid)
        proc.stderr.close()

    assert wal.stat().st_size > 4_000_000  # killed inside the transaction: its pages, uncommitted
    # the ledger itself reads the database as it was, and the file is byte for byte
    # what it was: nothing of the killed import is left
    assert _ledger_counts(db) == (CORPUS_COMPILE, CORPUS_SIBLINGS)
    assert db.stat().st_size == before_size and _sha(db) == before_sha

    again = subprocess.run([LEDGER, "import", tree, "--db", db], env=_env(), capture_output=True, text=True, check=False)
    assert again.returncode == 0, again.stderr
    summary = again.stdout.strip().splitlines()[-1]
    assert summary.startswith("100000 records in 20 files: 100000 compile rows added (")
    assert summary.endswith(", 0 instrument records added, 0 already present")
    assert _ledger_counts(db) == (CORPUS_COMPILE + 100_000, CORPUS_SIBLINGS)
    assert query(db, "PRAGMA integrity_check") == [("ok",)]
    states = dict(query(db, f"SELECT cache_state, count(*) FROM compile_records WHERE id > {CORPUS_COMPILE} GROUP BY 1"))
    assert summary.split("added (")[1].split(")")[0] == ", ".join(
        f"{s} {states.get(s, 0)}" for s in ("cold", "warm", "none", "unknown"))


# -- PostgreSQL: a migration killed inside its transaction ------------------------------------

PG_ROWS_SQL = "SELECT count(*), md5(string_agg(r::text, chr(10) ORDER BY r.id)) FROM compile_records r"
PG_COLUMNS_SQL = ("SELECT column_name, data_type FROM information_schema.columns"
                  " WHERE table_schema = 'public' AND table_name = 'compile_records' ORDER BY ordinal_position")


@pytest.mark.alone  # kills a command inside its transaction, found by polling
def test_migration_killed_on_postgresql_rolls_back(pg_db):
    """`ledger db upgrade` from 0001, SIGKILLed while its one migration transaction is
    open and has written (0002's DDL done, 0003's backfill under way): the server rolls
    it all back. The database is at 0001 with the 0001 schema and the same rows, and
    the next upgrade runs from there and backfills."""
    import psycopg

    assert run_cli("db", "upgrade", "0001", "--db", pg_db).exit_code == 0
    # 200k legacy rows (the corpus 2250 times): the upgrade takes seconds, not
    # milliseconds, so it is caught inside its transaction every time
    copies = 2_250
    cols = list(LEGACY_FIELDS)
    legacy = [tuple(r.get(c) for c in cols) for r in compile_records_of_corpus()]
    with psycopg.connect(pg_db.conninfo) as con, \
            con.cursor().copy(f"COPY compile_records ({', '.join(cols)}) FROM STDIN") as copy:
        for _ in range(copies):
            for row in legacy:
                copy.write_row(row)
    rows, columns = query(pg_db, PG_ROWS_SQL), query(pg_db, PG_COLUMNS_SQL)
    assert rows[0][0] == copies * CORPUS_COMPILE and "cache_state" not in {c for c, _ in columns}

    # Inside: the upgrade's backend runs 0003's backfill UPDATE, after 0002's DDL in the
    # same transaction (a transaction id: it has written).
    inside = ("SELECT pid, state, left(query, 60) FROM pg_stat_activity WHERE datname = current_database()"
              " AND pid <> pg_backend_pid() AND backend_xid IS NOT NULL"
              " AND query LIKE 'UPDATE compile_records SET (cache_state, cache_state_source)%'")
    proc = subprocess.Popen([LEDGER, "db", "upgrade", "--db", str(pg_db)], env=_env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        with psycopg.connect(pg_db.conninfo, autocommit=True) as watcher:
            deadline = time.monotonic() + 120
            while not (seen := watcher.execute(inside).fetchall()):
                assert proc.poll() is None, f"the upgrade ended before it could be killed: {proc.stderr.read()}"
                assert time.monotonic() < deadline, "the upgrade never got inside its transaction"
                time.sleep(0.005)
            os.kill(proc.pid, signal.SIGKILL)
            assert proc.wait(timeout=30) == -signal.SIGKILL
            # the server notices the lost client when its backend next reads from it
            # (after the statement under way) and ends the transaction unfinished
            deadline = time.monotonic() + 120
            while watcher.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (seen[0][0],)).fetchall():
                assert time.monotonic() < deadline, f"the killed upgrade's backend never ended: {seen}"
                time.sleep(0.05)
    finally:
        _kill_group(proc.pid)
        proc.stderr.close()

    # seen: the upgrade's backend as it was when killed
    assert query(pg_db, "SELECT version_num FROM alembic_version") == [("0001",)], seen
    assert query(pg_db, PG_COLUMNS_SQL) == columns, seen
    assert query(pg_db, PG_ROWS_SQL) == rows, seen
    assert query(pg_db, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == [(3,)]  # 0001's, and alembic's

    again = subprocess.run([LEDGER, "db", "upgrade", "--db", str(pg_db)], env=_env(), capture_output=True, text=True, check=False)
    assert (again.returncode, again.stdout, again.stderr) == (0, f"at revision {HEAD}\n", "")
    states = dict(query(pg_db, "SELECT cache_state, count(*) FROM compile_records GROUP BY 1"))
    assert states == {s: n * copies for s, n in CORPUS_STATES.items()}


@pytest.mark.alone  # kills a command inside its transaction, found by polling
@pytest.mark.jax
def test_probe_killed_between_transforms_keeps_the_finished_ones(tmp_path, db):
    """The `ledger probe` process itself dies (SIGKILL, as from the OOM killer) while
    tracing its third transform: the two measured before it are committed rows.
    (tests/test_probes_orchestrate.py covers a probe *child* that dies, at the level
    of the records handed over; this is the ledger's own process and its database.)"""
    (tmp_path / "probe_killer.py").write_text(textwrap.dedent('''
        import os
        import signal
        import numpy as np
        import jax
        import jax.numpy as jnp

        def killed_in_grad(cell):
            @jax.custom_vjp
            def fn(x):
                return jnp.sum(x * x)
            def fwd(x):
                return fn(x), x
            def bwd(res, g):
                os.kill(os.getpid(), signal.SIGKILL)
            fn.defvjp(fwd, bwd)
            return fn, np.ones(4, np.float32)
    '''))
    r = subprocess.run([LEDGER, "probe", "--objective", "probe_killer:killed_in_grad", "--transforms", "jit,vmap,grad",
                        "--tag", "killed", "--db", db], cwd=tmp_path, env=_env(), capture_output=True, text=True, check=False)
    assert r.returncode == -signal.SIGKILL, r.stderr
    result = run_cli("sql", "SELECT transform, status, compile_s > 0 FROM compile_records ORDER BY id", "--csv", "--db", db)
    assert (result.exit_code, result.stdout) == (0, "transform,status,compile_s > 0\njit,ok,1\nvmap,ok,1\n")
    assert query(db, "PRAGMA integrity_check") == [("ok",)]
    # and the ledger takes the next write
    write_json(tmp_path / "more.json", [dict(GOOD, tag="after-the-kill")])
    assert run_cli("import", tmp_path / "more.json", "--db", db).exit_code == 0
    assert _ledger_counts(db) == (3, 0)


# -- read-only and full, for real -----------------------------------------------------------

def _in_namespace(tmp_path: Path, setup: str, *ledger_args, after: str = "") -> tuple[int, str, str]:
    """Run `setup` (shell; mounts), then `ledger ledger_args...`, then `after`, in a
    private mount namespace; returns the ledger's (exit code, stdout, stderr)."""
    namespace, why = mount_namespace()
    assert namespace is not None, why  # the case is marked namespace: conftest checked
    (tmp_path / "ns").mkdir(exist_ok=True)
    out, err, rc = tmp_path / "ns" / "out", tmp_path / "ns" / "err", tmp_path / "ns" / "rc"
    script = f'''
        {setup}
        rc=0; "$LEDGER" "$@" >"$OUT" 2>"$ERR" || rc=$?
        echo "$rc" >"$RC"
        {after}
    '''
    env = dict(_env(), LEDGER=str(LEDGER), OUT=str(out), ERR=str(err), RC=str(rc))
    r = subprocess.run([*namespace, "sh", "-ec", script, "sh", *map(str, ledger_args)],
                       env=env, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0 and rc.exists(), f"the namespace script failed: {r.stderr}"
    return int(rc.read_text()), out.read_text(), err.read_text()


def _read_only_mount(target: Path) -> str:
    # one command a line: under sh -e a failed mount stops the script
    return f'''mount --bind "{target}" "{target}"
        mount -o remount,ro,bind "{target}"'''


@pytest.fixture
def own_dir(tmp_path):
    """A directory of the user that permission bits bind (case_kinds.unprivileged):
    not root, tmp_path; root, a fresh one in /tmp that the test gives to nobody, as
    pytest's tmp_path is root's alone."""
    if os.geteuid() != 0:
        yield tmp_path / "own"
        return
    own = Path(tempfile.mkdtemp(prefix="ledger-unprivileged-"))
    try:
        yield own / "own"
    finally:
        shutil.rmtree(own)


def _as_unprivileged(own: Path, read_only: Path, mode: int, *ledger_args) -> tuple[int, str, str]:
    """`ledger ledger_args...` as that user, everything under `own` theirs, with
    `read_only` made `mode` for the run; returns (exit code, stdout, stderr)."""
    prefix, why = unprivileged()
    assert prefix is not None, why  # the case is marked unprivileged: conftest checked
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        for path in [own.parent, own, *own.rglob("*")]:
            os.chown(path, nobody.pw_uid, nobody.pw_gid)
    before = read_only.stat().st_mode
    read_only.chmod(mode)
    try:
        r = subprocess.run([*prefix, LEDGER, *map(str, ledger_args)], env=dict(_env(), HOME=str(own)), cwd=own,
                           capture_output=True, text=True, timeout=300, check=False)
    finally:
        read_only.chmod(before)
    return r.returncode, r.stdout, r.stderr


def _assert_one_line_error(code: int, stderr: str, *words: str) -> str:
    assert code == 1, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in stderr, stderr
    assert any(w in lines[0] for w in words), lines[0]
    return lines[0]


@pytest.fixture
def corpus_db(tmp_path) -> Path:
    db = tmp_path / "data" / "ledger.db"  # a directory of its own, to make read-only
    db.parent.mkdir()
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    return db


READ_ONLY_WORDS = ("readonly", "read-only", "unable to open")
WRITES = {"import": lambda corpus: ["import", corpus], "pins update": lambda corpus: ["pins", "update"]}
# Read-only two ways: a read-only mount, which binds root too, and permission bits,
# which bind everyone else (as root the ledger runs as nobody).
HOW = [pytest.param("mount", marks=pytest.mark.namespace), pytest.param("permissions", marks=pytest.mark.unprivileged)]


@pytest.mark.slow
@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("where", ["file", "directory"])
@pytest.mark.parametrize("command", list(WRITES))
def test_write_to_a_read_only_database_is_one_line(tmp_path, own_dir, corpus_db, how, where, command):
    if how == "mount":
        db, args = corpus_db, [*WRITES[command](CORPUS), "--db", corpus_db]
        target = db if where == "file" else db.parent
        before = _sha(db)
        code, _, stderr = _in_namespace(tmp_path, _read_only_mount(target), *args)
    else:
        # the ledger and the corpus copied where the user can read them
        shutil.copytree(corpus_db.parent, own_dir / "data")
        shutil.copytree(CORPUS, own_dir / "corpus")
        db = own_dir / "data" / "ledger.db"
        args = [*WRITES[command](own_dir / "corpus"), "--db", db]
        target = db if where == "file" else db.parent
        before = _sha(db)
        code, _, stderr = _as_unprivileged(own_dir, target, 0o444 if where == "file" else 0o555, *args)
    _assert_one_line_error(code, stderr, *READ_ONLY_WORDS)
    assert _sha(db) == before and not Path(f"{db}-journal").exists()


READS = {"sql": ["sql", COUNTS_SQL, "--csv"], "runs": ["runs"], "report": ["report"], "export": ["export"]}


@pytest.mark.slow
@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("command", list(READS))
def test_a_wal_ledger_in_a_folder_the_reader_cannot_write_is_read(tmp_path, own_dir, corpus_db, how, command):
    """A group's shared ledger, read-only to most: SQLite cannot make the -shm file a WAL
    reader needs beside it, and every read command failed with "attempt to write a
    readonly database" (or "unable to open database file")."""
    assert corpus_db.read_bytes()[18:20] == b"\x02\x02"  # written in WAL mode, as every write leaves it
    if how == "mount":
        db = corpus_db
        code, stdout, stderr = _in_namespace(tmp_path, _read_only_mount(db.parent), *READS[command], "--db", db)
    else:
        shutil.copytree(corpus_db.parent, own_dir / "data")
        db = own_dir / "data" / "ledger.db"
        code, stdout, stderr = _as_unprivileged(own_dir, db.parent, 0o555, *READS[command], "--db", db)
    assert (code, stderr) == (0, ""), stderr
    if command == "sql":
        assert stdout == f"c,i\n{CORPUS_COMPILE},{CORPUS_SIBLINGS}\n"
    assert sorted(p.name for p in db.parent.iterdir()) == ["ledger.db"]


@pytest.mark.slow
@pytest.mark.parametrize("how", HOW)
def test_new_database_in_a_read_only_directory_is_one_line(tmp_path, own_dir, how):
    if how == "mount":
        ro = tmp_path / "ro"
        ro.mkdir()
        code, _, stderr = _in_namespace(tmp_path, _read_only_mount(ro), "import", CORPUS, "--db", ro / "new.db")
    else:
        ro = own_dir / "ro"
        shutil.copytree(CORPUS, own_dir / "corpus")
        ro.mkdir()
        code, _, stderr = _as_unprivileged(own_dir, ro, 0o555, "import", own_dir / "corpus", "--db", ro / "new.db")
    _assert_one_line_error(code, stderr, *READ_ONLY_WORDS)
    assert list(ro.iterdir()) == []


@pytest.mark.slow
@pytest.mark.namespace
def test_full_disk_is_one_line_and_leaves_the_database_as_it_was(tmp_path, corpus_db):
    before = _sha(corpus_db)
    tree = _big_tree(tmp_path / "big", files=4, per_file=5_000)  # ~8 MB of JSON for a 1 MB disk
    disk = tmp_path / "disk"
    disk.mkdir()
    db = disk / "ledger.db"
    after_read, left = tmp_path / "after_read.db", tmp_path / "left.txt"
    code, stdout, stderr = _in_namespace(
        tmp_path,
        f'''mount -t tmpfs -o size=1m tmpfs "{disk}"
            cp "{corpus_db}" "{db}"''',
        "import", tree, "--db", db,
        # the next command (`ledger sql`) on the same full disk, then the database as
        # it left it, copied out before the tmpfs goes with the namespace
        after=f'''"$LEDGER" sql "{COUNTS_SQL}" --csv --db "{db}" >"{tmp_path}/sql.out" 2>"{tmp_path}/sql.err" || true
            cp "{db}" "{after_read}"
            ls -a "{disk}" >"{left}"''',
    )
    line = _assert_one_line_error(code, stderr, "full")
    assert "database or disk is full" in line and stdout == ""
    # the next ledger command reads the database as it was: nothing partial
    assert (tmp_path / "sql.err").read_text() == ""
    assert (tmp_path / "sql.out").read_text() == f"c,i\n{CORPUS_COMPILE},{CORPUS_SIBLINGS}\n"
    assert _sha(after_read) == before
    assert "ledger.db-journal" not in left.read_text().split()


# -- a server that refuses the connection ------------------------------------------------

REFUSED_URL = "postgresql+psycopg://u:secretpw@127.0.0.1:1/x"  # port 1: nothing listens


def _refused(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LEDGER, *args], env={**_env(), "LEDGER_DB": REFUSED_URL},
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("args", [["sql", "select 1"], ["pins", "list"]], ids=["sql", "pins list"])
def test_unreachable_server_is_one_line_without_the_password(args):
    r = _refused(*args)
    line = _assert_one_line_error(r.returncode, r.stderr, "connection failed")
    assert line.startswith("error: cannot open postgresql+psycopg://u:***@127.0.0.1:1/x: connection failed: "), line
    assert "secretpw" not in r.stderr + r.stdout and r.stdout == ""


@pytest.mark.slow
def test_sql_and_pins_list_say_the_same_of_an_unreachable_server():
    assert _refused("sql", "select 1").stderr == _refused("pins", "list").stderr


# -- stdout that refuses the output ------------------------------------------------------

WRITERS = {
    "sql": ["sql", "SELECT 1"],
    "sql --csv": ["sql", "--csv", COUNTS_SQL],
    "export": ["export"],
    "report": ["report"],
    "pins list": ["pins", "list"],
    "check": ["check"],
}


@pytest.mark.slow
@pytest.mark.parametrize("args", WRITERS.values(), ids=WRITERS.keys())
def test_output_to_a_full_device_is_one_line(corpus_db, args):
    # the real entry point: Python's own flush of stdout at exit fails here too
    with open("/dev/full", "w") as full:
        r = subprocess.run([LEDGER, *args], env={**_env(), "LEDGER_DB": str(corpus_db)}, stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    assert r.stderr == "error: cannot write the output: No space left on device\n" and r.returncode == 1, r.stderr


@pytest.mark.slow
def test_output_to_a_closed_pipe_stays_quiet(corpus_db):
    many = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300000) SELECT i FROM n"
    for args in (["sql", "--csv", many], ["sql", "SELECT 1"]):
        reader, writer = os.pipe()
        os.close(reader)  # nobody reads: the first write is EPIPE
        try:
            r = subprocess.run([LEDGER, *args], env={**_env(), "LEDGER_DB": str(corpus_db)}, stdout=writer,
                               stderr=subprocess.PIPE, text=True, timeout=120, check=False)
        finally:
            os.close(writer)
        assert r.stderr == "" and r.returncode == 1, (args, r.returncode, r.stderr)


# A command that writes without flushing leaves its output to the interpreter's flush
# at exit (none of today's does: Click's echo flushes). Its error there is the same.
UNFLUSHED = """
import sys
from ledger.cli import commands, main

@commands.app.command("unflushed")
def unflushed():
    sys.stdout.write("x\\n")

sys.argv = ["ledger", "unflushed"]
main()
"""


@pytest.mark.slow
def test_output_refused_at_the_last_flush_is_one_line_or_quiet_for_a_pipe():
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-c", UNFLUSHED], env=_env(), stdout=full, stderr=subprocess.PIPE,
                           text=True, timeout=120, check=False)
    assert (r.returncode, r.stderr) == (1, "error: cannot write the output: No space left on device\n")
    reader, writer = os.pipe()
    os.close(reader)
    try:
        r = subprocess.run([sys.executable, "-c", UNFLUSHED], env=_env(), stdout=writer, stderr=subprocess.PIPE,
                           text=True, timeout=120, check=False)
    finally:
        os.close(writer)
    assert (r.returncode, r.stderr) == (1, "")
