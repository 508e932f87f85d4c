"""The spool of `ledger record` belongs to the ledger that made it, and to nothing else.

A run dir is the ledger's only with the marker it wrote, naming the ledger it belongs to
(ledger/recorder/spool.py): a LEDGER_SPOOL_DIR that is a folder of the user's own keeps
every file and folder of theirs, a ledger never takes in another ledger's kept rows, a run
that is starting is never taken for abandoned, and a line the recorder never wrote is set
aside with one line, the rest taken in. The random interleavings of all of it:
tests/test_spool_property.py."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .case_kinds import LEDGER
from .conftest import query, run_cli
from .helpers import SPOOLS, program

PY = sys.executable


def tree(root: Path) -> dict[str, bytes | None]:
    """Every file and folder under root, with each file's bytes: what a user would miss."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def users_folder(tmp_path: Path) -> Path:
    """A scratch folder as cluster users point variables at: their own files and folders,
    one named like a run (32 hex digits) and one holding a .jsonl, with no marker."""
    scratch = tmp_path / "scratch"
    (scratch / "results").mkdir(parents=True)
    (scratch / "results" / "fit.npz").write_bytes(b"\x00\x01 not the ledger's")
    (scratch / "results" / "log.jsonl").write_text('{"step": 1, "loss": 0.5}\n')
    (scratch / "0123456789abcdef0123456789abcdef").mkdir()
    (scratch / "0123456789abcdef0123456789abcdef" / "w.jsonl").write_text('{"compile_index": 3}\n')
    (scratch / "empty").mkdir()
    (scratch / "notes.txt").write_text("mine\n")
    return scratch


def spooled(tmp_path: Path, db, *args: str, env=None, **kw) -> subprocess.CompletedProcess:
    """`ledger record --db DB -- python spools.py ARGS`: a run with no JAX in it."""
    prog = program(tmp_path, SPOOLS, "spools.py")
    return subprocess.run([str(LEDGER), "record", "--db", str(db), "--", PY, str(prog), *args], check=False,
                          capture_output=True, text=True, cwd=tmp_path, env={**os.environ, **(env or {})},
                          timeout=120, **kw)


def test_a_spool_dir_of_the_users_own_is_left_as_it_was(tmp_path, monkeypatch):
    scratch = users_folder(tmp_path)
    before = tree(scratch)
    monkeypatch.setenv("LEDGER_SPOOL_DIR", str(scratch))
    db = tmp_path / "ledger.db"
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    for args in (["check"], ["pins", "update"], ["import", str(tmp_path / "scratch" / "results" / "fit.npz")]):
        run_cli(*args, "--db", db)  # each command that writes (the import fails: not JSON)
    assert tree(scratch) == before
    assert query(db, "SELECT count(*) FROM compile_records") == [(0,)]


@pytest.mark.slow  # about 0.2 s of CPU here: too near the fast tier's 0.3 s on a slower CI machine
def test_a_recorded_run_in_the_users_folder_leaves_the_folder_and_nothing_else(tmp_path):
    scratch = users_folder(tmp_path)
    before, db = tree(scratch), tmp_path / "ledger.db"
    out = spooled(tmp_path, db, "3", env={"LEDGER_SPOOL_DIR": str(scratch)})
    assert (out.returncode, out.stdout) == (0, "spooled 3\n"), out.stderr
    assert query(db, "SELECT count(*) FROM compile_records") == [(3,)]
    assert tree(scratch) == before  # the run's own dir came and went; the folder stays
    empty = tmp_path / "empty-scratch"
    empty.mkdir()
    assert spooled(tmp_path, db, "1", env={"LEDGER_SPOOL_DIR": str(empty)}).returncode == 0
    assert empty.is_dir() and list(empty.iterdir()) == []  # theirs, even once empty


def _hold(db: Path, release: threading.Event, held: threading.Event) -> None:
    con = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    con.execute("BEGIN EXCLUSIVE")
    held.set()
    release.wait(120)
    con.execute("COMMIT")
    con.close()


@pytest.mark.slow
def test_rows_kept_for_one_ledger_are_never_taken_into_another(tmp_path, monkeypatch):
    shared = tmp_path / "shared-spool"
    shared.mkdir()
    monkeypatch.setenv("LEDGER_SPOOL_DIR", str(shared))
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    for db in (a, b):
        assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    release, held = threading.Event(), threading.Event()
    locker = threading.Thread(target=_hold, args=(a, release, held))
    locker.start()
    held.wait()
    try:  # A is locked past the program's end: its rows are kept in the shared spool
        out = spooled(tmp_path, a, "4", env={"LEDGER_BUSY_TIMEOUT": "0.2"})
    finally:
        release.set()
        locker.join()
    assert out.returncode == 0 and "4 compiles kept in " in out.stderr, out.stderr
    taken = run_cli("pins", "update", "--db", b)
    assert "took in" not in taken.stderr
    assert query(b, "SELECT count(*) FROM compile_records") == [(0,)]
    assert run_cli("check", "--db", a).stderr.startswith("ledger: took in 4 compiles kept from `ledger record` run ")
    assert query(a, "SELECT count(*) FROM compile_records") == [(4,)]
    assert list(shared.iterdir()) == []  # taken in once, and gone


# A writing command lands between the run's spool dir being made and its ingester
# starting: by the program's code path, not by luck (7 of 338 starts beside a loop once).
BETWEEN = """
import sys
from ledger import command
from ledger.recorder import ingester
from ledger.recorder.argv import run

original = ingester.start_ingester
def start(*args, **kwargs):
    command.check(db=sys.argv[1])  # a writer in between: it takes in kept runs first
    return original(*args, **kwargs)
ingester.start_ingester = start
run(["--db", sys.argv[1], "--", sys.executable, sys.argv[2], "2"])
"""


@pytest.mark.slow  # a subprocess that holds the run lock: over the fast tier's 0.3 s of CPU
def test_a_writer_between_the_runs_start_and_its_ingester_takes_nothing(tmp_path):
    db = tmp_path / "ledger.db"
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    prog, between = program(tmp_path, SPOOLS, "spools.py"), program(tmp_path, BETWEEN, "between.py")
    out = subprocess.run([PY, str(between), str(db), str(prog)], check=False, capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert (out.returncode, out.stdout) == (0, "spooled 2\n"), out.stderr
    assert query(db, "SELECT count(*) FROM compile_records") == [(2,)]


def test_a_bad_spool_line_is_set_aside_and_the_rest_taken_in(tmp_path):
    db = tmp_path / "ledger.db"
    out = spooled(tmp_path, db, "3", "bad")
    assert (out.returncode, out.stdout) == (0, "spooled 3\n"), out.stderr
    said = out.stderr.splitlines()
    assert len(said) == 1 and said[0].startswith("ledger record: 3 compiles recorded into "), out.stderr
    assert "; set aside " in said[0] and "a line in it is not the recorder's (pid is null)" in said[0]
    assert query(db, "SELECT count(*) FROM compile_records") == [(3,)]
    kept = list(Path(f"{db}.spool").rglob("*.set-aside"))
    assert len(kept) == 1 and '{"compile_index":[1]}' in kept[0].read_text()
    check = run_cli("check", "--db", db)
    assert check.exception is None or isinstance(check.exception, SystemExit), check.exception
    assert "Traceback" not in check.output and "took in" not in check.stderr


@pytest.mark.slow
def test_a_kept_run_with_a_bad_line_is_taken_in_by_the_next_writer_and_named(tmp_path):
    db = tmp_path / "ledger.db"
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    release, held = threading.Event(), threading.Event()
    locker = threading.Thread(target=_hold, args=(db, release, held))
    locker.start()
    held.wait()
    try:
        out = spooled(tmp_path, db, "2", "bad", env={"LEDGER_BUSY_TIMEOUT": "0.2"})
    finally:
        release.set()
        locker.join()
    assert "2 compiles kept in " in out.stderr, out.stderr
    taken = run_cli("pins", "update", "--db", db)
    assert taken.exit_code == 0, taken.output
    lines = taken.stderr.splitlines()
    assert lines[0].startswith("ledger: took in 2 compiles kept from `ledger record` run ")
    assert lines[1].startswith("ledger: set aside ") and lines[1].endswith(
        ".jsonl.set-aside: a line in it is not the recorder's (pid is null); its other lines were taken in")
    assert query(db, "SELECT count(*) FROM compile_records") == [(2,)]
    again = run_cli("check", "--db", db)
    assert "set aside" not in again.stderr and "took in" not in again.stderr


def test_a_reader_waits_for_a_killed_programs_rows(tmp_path):
    db = tmp_path / "ledger.db"
    proc = subprocess.Popen([str(LEDGER), "record", "--db", str(db), "--", PY,
                             str(program(tmp_path, SPOOLS, "spools.py")), "3", "wait"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert proc.stdout.readline() == "spooled 3\n"
        time.sleep(0.05)
        proc.kill()
    finally:
        proc.kill()
        proc.communicate()
    out = run_cli("sql", "--db", db, "--csv", "SELECT count(*) AS n FROM compile_records")
    assert (out.exit_code, out.output) == (0, "n\n3\n")


def test_an_argument_that_is_not_utf8_leaves_every_compile_recorded(tmp_path):
    db = tmp_path / "ledger.db"
    prog = program(tmp_path, SPOOLS, "spools.py")
    out = subprocess.run([str(LEDGER), "record", "--db", str(db), "--", PY, str(prog), "3", b"caf\xe9.npz"],
                         check=False, capture_output=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert b"refused" not in out.stderr and out.stderr.startswith(b"ledger record: 3 compiles recorded into ")
    commands = {c for c, in query(db, "SELECT command FROM compile_records")}
    assert len(commands) == 1 and commands.pop().endswith(" 3 'caf\\xe9.npz'")
