"""`ledger merge`: per-node ledgers into one, idempotent, sources never changed, pins by
their sticky rule, conflicts reported, all or nothing. The destination is a SQLite
file and a PostgreSQL database (`any_db`)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import zlib
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from ledger.merge import scratch as merge_scratch
from ledger.merge.predictions import COLUMNS
from ledger.merge.prunes import COLUMNS as PRUNE_COLUMNS
from ledger.predict.store import SCORED_SQL, save
from ledger.record import COMPARABILITY_KEY
from ledger.record_validation import TIMESTAMP_FORM
from ledger.storage.models import cache_prunes, predictions
from ledger.storage.open import open_ledger
from ledger.storage.revisions import HEAD

from .conftest import (
    CORPUS,
    CORPUS_COMPILE,
    CORPUS_SIBLINGS,
    CORPUS_STATES,
    PgDb,
    compile_records_of_corpus,
    db_at,
    insert_legacy,
    jax_platform,
    query,
    run_cli,
    write_json,
)
from .ledgers import add, rec

CPU, GPU = CORPUS / "local_cpu", CORPUS / "local_gpu_NVIDIA_A100_80GB_PCIe"
LEDGER = Path(sys.executable).with_name("ledger")
STATES_SQL = "SELECT cache_state, count(*) FROM compile_records GROUP BY cache_state ORDER BY cache_state"
COUNTS_SQL = "SELECT (SELECT count(*) FROM compile_records), (SELECT count(*) FROM instrument_records)"


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _node(path, *trees, pin=True):
    """A per-node ledger: some of the corpus, pinned."""
    for tree in trees:
        assert run_cli("import", tree, "--db", path).exit_code == 0
    if pin:
        assert run_cli("pins", "update", "--db", path).exit_code == 0
    return path


@pytest.mark.slow
def test_two_nodes_merged_twice_give_their_union_once(any_db, tmp_path):
    a = _node(tmp_path / "a.db", CPU)
    b = _node(tmp_path / "b.db", *(p for p in CORPUS.iterdir() if p.name != "local_cpu"))
    before = _sha(a), _sha(b)
    first = run_cli("merge", a, b, "--db", any_db)
    assert first.exit_code == 0, first.output
    assert query(any_db, COUNTS_SQL) == [(CORPUS_COMPILE, CORPUS_SIBLINGS)]
    assert dict(query(any_db, STATES_SQL)) == CORPUS_STATES
    again = run_cli("merge", a, b, "--db", any_db)
    assert again.exit_code == 0
    assert again.output.splitlines()[-1] == f"2 ledgers merged into {any_db}: 0 compile rows added"
    assert query(any_db, COUNTS_SQL) == [(CORPUS_COMPILE, CORPUS_SIBLINGS)]
    assert (_sha(a), _sha(b)) == before


@pytest.mark.slow
def test_merged_pins_are_the_pins_of_the_whole(any_db, tmp_path):
    """Pinning each node and merging gives the pins that pinning the union gives."""
    a = _node(tmp_path / "a.db", CPU)
    b = _node(tmp_path / "b.db", *(p for p in CORPUS.iterdir() if p.name != "local_cpu"))
    assert run_cli("merge", a, b, "--db", any_db).exit_code == 0
    whole = _node(tmp_path / "whole.db", CORPUS)
    pins_sql = "SELECT pin_key, compile_s, tag, timestamp FROM pins ORDER BY pin_key"
    assert query(any_db, pins_sql) == query(whole, pins_sql) and len(query(whole, pins_sql)) == 25
    # each merged pin points at the same measurement, under the destination's row id
    moved = query(any_db, "SELECT count(*) FROM pins p JOIN compile_records r ON r.id = p.row_id"
                          " WHERE r.compile_s = p.compile_s AND r.tag = p.tag AND r.cache_state = 'warm'")
    assert moved == [(25,)]
    assert query(any_db, "SELECT action, count(*) FROM pin_history GROUP BY action") == [("merge", 25)]
    assert query(any_db, "SELECT count(*) FROM verdicts") == [(0,)]


@pytest.mark.slow
def test_a_key_pinned_on_both_sides_keeps_this_ledgers_pin_and_says_so(tmp_path, db):
    (rec,) = [r for r in compile_records_of_corpus() if r["tag"] == "cache-warm"]
    here = _node(db, write_json(tmp_path / "here.json", [rec]))
    later = dict(rec, compile_s=rec["compile_s"] * 3, timestamp="2026-09-01T00:00:00")
    there = _node(tmp_path / "there.db", write_json(tmp_path / "there.json", [later]))
    result = run_cli("merge", there, "--db", here)
    assert result.exit_code == 0
    (conflict,) = [line for line in result.output.splitlines() if "conflict" in line]
    assert conflict.startswith("  conflict: pin local_cpu/") and conflict.endswith(
        f": {later['compile_s']:.4g}s in the source, {rec['compile_s']:.4g}s here"
        " (kept; `ledger pins update --repin` moves it)")
    assert query(here, "SELECT compile_s FROM pins") == [(rec["compile_s"],)]
    assert query(here, "SELECT count(*) FROM compile_records") == [(2,)]


@pytest.mark.slow
def test_the_same_row_with_another_cache_state_is_a_conflict(tmp_path, db):
    (rec,) = [r for r in compile_records_of_corpus() if r["tag"] == "cache-warm"]
    _node(db, write_json(tmp_path / "here.json", [rec]), pin=False)
    there = _node(tmp_path / "there.db", write_json(tmp_path / "there.json", [dict(rec, cache_state="unknown")]),
                  pin=False)
    result = run_cli("merge", there, "--db", db)
    assert result.exit_code == 0
    assert f"  conflict: row vag 'cache-warm' {rec['timestamp']}: cache_state unknown in the source, warm here (kept)" \
        in result.output.splitlines()
    assert query(db, "SELECT cache_state FROM compile_records") == [("warm",)]


@pytest.mark.slow
def test_an_older_source_is_upgraded_in_a_copy_and_left_byte_identical(tmp_path, db):
    old = db_at(tmp_path / "old.db", "0001")
    insert_legacy(old, compile_records_of_corpus())
    before = _sha(old)
    result = run_cli("merge", old, "--db", db)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (  # no predictions table before 0010: none to carry
        f"merged {old} (at 0001: merged from a copy brought to {HEAD}): {CORPUS_COMPILE} compile rows added,"
        " 0 already here; 0 instrument records added, 0 already here; 0 predictions added, 0 already here;"
        " 0 cache prunes added, 0 already here; 0 recorded processes added, 0 already here; pins: 0 taken, 0 the same, 0 differ")
    assert _sha(old) == before and query(old, "SELECT version_num FROM alembic_version") == [("0001",)]
    assert dict(query(db, STATES_SQL)) == CORPUS_STATES  # backfilled in the copy
    # the same rows imported from their files are the same identities: nothing more
    assert run_cli("import", CORPUS, "--db", db).output.strip().endswith(
        f"0 compile rows added (cold 0, warm 0, none 0, unknown 0), {CORPUS_SIBLINGS} instrument records added,"
        f" {CORPUS_COMPILE} already present")


@pytest.mark.slow
def test_refusals_are_one_line_and_write_nothing(tmp_path, db):
    good = _node(tmp_path / "good.db", CPU)
    newer = _node(tmp_path / "newer.db", GPU)
    con = sqlite3.connect(newer)
    with con:
        con.execute("UPDATE alembic_version SET version_num = '9999'")
    con.close()
    (tmp_path / "junk.db").write_bytes(b"not a database at all, not even close" * 10)
    cases = {
        str(newer): f"{newer} is at revision 9999, which this ledger does not know",
        str(tmp_path / "missing.db"): f"no ledger database at {tmp_path / 'missing.db'}",
        str(tmp_path / "junk.db"): f"cannot read {tmp_path / 'junk.db'}: file is not a database",
    }
    for bad, message in cases.items():
        result = run_cli("merge", good, bad, "--db", db)  # the good one first: all or nothing
        assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
        assert message in result.output
        assert not db.exists() or query(db, "SELECT count(*) FROM compile_records") == [(0,)]
    itself = run_cli("merge", good, "--db", good)
    assert (itself.exit_code, itself.output) == (1, f"error: {good} is the destination: a ledger is not merged into itself\n")


@pytest.mark.slow
def test_the_installed_command_merges(tmp_path):
    a = _node(tmp_path / "a.db", CPU)
    out = subprocess.run([LEDGER, "merge", a, "--db", tmp_path / "all.db"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout.splitlines()[-1] == f"1 ledgers merged into {tmp_path / 'all.db'}: 78 compile rows added"


@pytest.mark.slow
def test_a_server_ledger_merges_into_a_file(any_db, tmp_path):
    """A node that wrote to a server (or a file) gathered into a laptop's file."""
    _node(any_db, CORPUS)
    here = tmp_path / "laptop.db"
    result = run_cli("merge", any_db, "--db", here)
    assert result.exit_code == 0, result.output
    assert query(here, COUNTS_SQL) == [(CORPUS_COMPILE, CORPUS_SIBLINGS)]
    assert query(here, "SELECT count(*) FROM pins") == [(25,)]


# -- a locked source, signals, the self-merge check, a pin without its row -----------------

# Holds a SQLite file's lock (BEGIN EXCLUSIVE) from another process until its stdin closes.
HOLD_SQLITE = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None);"
               " c.execute('BEGIN EXCLUSIVE'); print('held', flush=True); sys.stdin.readline()")
# Holds a lock on the pins table of a PostgreSQL database, likewise.
PG_LOCK_PINS = ("import psycopg, sys; c = psycopg.connect(sys.argv[1]);"
                " c.execute('LOCK TABLE pins IN ACCESS EXCLUSIVE MODE'); print('held', flush=True); sys.stdin.readline()")


@contextmanager
def _held(hold: list):
    """The process `hold` (HOLD_SQLITE, PG_LOCK_PINS) holds its lock while the block runs,
    or until the block calls the release() it is given."""
    holder = subprocess.Popen(hold, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def release():
        if holder.poll() is None:
            holder.stdin.close()
            holder.wait(timeout=30)

    try:
        assert holder.stdout.readline() == "held\n"
        yield release
    finally:
        release()


def _sqlite_lock(path) -> list:
    return [sys.executable, "-c", HOLD_SQLITE, str(path)]


def _rollback_journal(path):
    """A source in SQLite's rollback-journal mode, where a writer's lock keeps readers out
    (in WAL mode a reader never waits)."""
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode = DELETE").fetchone() == ("delete",)
    con.close()
    return path


# exec the command with SIGINT at its default: the same process (its pid is the merge's)
_SIGINT_DEFAULT_EXEC = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"


@contextmanager
def _merge_process(tmp_path, *args, timeout="60"):
    """`ledger merge ARGS` as a process of its own, (process, its TMPDIR); killed on
    leaving if it still runs (a merge waiting for ever must fail the test, not hang it)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    env = dict(os.environ, TMPDIR=str(scratch), LEDGER_BUSY_TIMEOUT=timeout)
    env.pop("LEDGER_DB", None)
    # SIGINT at its default in the merge, as in a terminal: a suite started in the
    # background (nohup, `cmd &` in a script) passes it on ignored, and an ignored
    # signal stays ignored by design (ledger/merge/scratch.py)
    proc = subprocess.Popen([sys.executable, "-c", _SIGINT_DEFAULT_EXEC, LEDGER, "merge", *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield proc, scratch
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _wait_for(predicate, proc, what, limit=60.0):
    deadline = time.monotonic() + limit
    while not predicate():
        assert proc.poll() is None, f"the merge ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {what} after {limit} s"
        time.sleep(0.02)


def _fingerprint(db) -> list:
    return [query(db, f"SELECT * FROM {t} ORDER BY id") for t in ("compile_records", "instrument_records", "pins",
                                                                  "pin_history", "cache_prunes")]


def _watchers() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "ledger-merge-signals"]


def test_a_merge_returns_when_it_is_over_not_at_its_signal_watchers_next_poll(monkeypatch):
    """The watcher of SIGTERM and SIGINT is woken when the merge is over: with an hour's
    poll the scratch folder's context still ends at once (it waited up to 0.1 s, the
    poll, on every merge). An alarm fails the case instead of a hang."""
    monkeypatch.setattr(merge_scratch, "_POLL_S", 3600.0)

    def late(signum, frame):
        raise TimeoutError("the merge waited for its signal watcher's poll: the watcher was not woken")

    before = signal.signal(signal.SIGALRM, late)
    signal.alarm(10)
    try:
        with merge_scratch.scratch_dir() as path:
            assert path.is_dir() and _watchers() == ["ledger-merge-signals"]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
    assert not path.exists() and _watchers() == []


@pytest.mark.slow
def test_a_locked_source_is_given_up_after_the_busy_timeout_in_one_line(any_db, tmp_path):
    _node(any_db, CPU)
    before = _fingerprint(any_db)
    src = _rollback_journal(_node(tmp_path / "s.db", GPU))
    with _held(_sqlite_lock(src)), _merge_process(tmp_path, src, "--db", any_db, timeout="2") as (proc, scratch):
        started = time.monotonic()
        out, err = proc.communicate(timeout=60)  # it waited for ever, whatever the timeout
        took = time.monotonic() - started
    assert (proc.returncode, out, err) == (
        1, "", f"error: cannot read {src}: another process holds its lock; gave up after 2 s (LEDGER_BUSY_TIMEOUT)\n")
    assert took >= 2, took  # it waited the 2 s it was given (and then gave up: the exit above)
    assert _fingerprint(any_db) == before and list(scratch.iterdir()) == []


@pytest.mark.slow
def test_the_destination_is_not_locked_while_a_source_is_waited_for(any_db, tmp_path, monkeypatch):
    """The sources are read before the destination's write lock is taken: an import and a
    pins update on the destination go through while the merge waits for its source."""
    src = _rollback_journal(_node(tmp_path / "s.db", GPU))
    assert run_cli("db", "upgrade", "--db", any_db).exit_code == 0
    monkeypatch.setenv("LEDGER_BUSY_TIMEOUT", "5")  # for the import: it fails if the merge holds the lock
    with _held(_sqlite_lock(src)) as release, _merge_process(tmp_path, src, "--db", any_db) as (proc, scratch):
        # the copy's file is made just before the wait for the source's lock
        _wait_for(lambda: list(scratch.glob("ledger-merge-*/source-0.db")), proc, "snapshot of the source")
        if isinstance(any_db, PgDb):  # PostgreSQL lets writers overlap: no transaction of the merge is open
            assert query(any_db, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                                 " AND pid <> pg_backend_pid() AND xact_start IS NOT NULL") == [(0,)]
        imported = run_cli("import", CPU, "--db", any_db)
        assert imported.exit_code == 0, imported.output
        assert run_cli("pins", "update", "--db", any_db).exit_code == 0
        assert proc.poll() is None  # still waiting
        release()
        out, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (0, ""), err
    assert out.splitlines()[-1] == f"1 ledgers merged into {any_db}: 9 compile rows added"
    assert query(any_db, COUNTS_SQL) == [(78 + 9, CORPUS_SIBLINGS)]  # local_cpu's and the GPU's
    assert not list(scratch.iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_merge_stopped_by_a_signal_while_waiting_for_a_source_leaves_no_copy(any_db, tmp_path, sig):
    _node(any_db, CPU)
    before = _fingerprint(any_db)
    first, locked = _node(tmp_path / "a.db", GPU), _rollback_journal(_node(tmp_path / "b.db", GPU, pin=False))
    with _held(_sqlite_lock(locked)), _merge_process(tmp_path, first, locked, "--db", any_db) as (proc, scratch):
        # a full copy of the first source is there; the merge waits for the second's lock
        _wait_for(lambda: list(scratch.glob("ledger-merge-*/source-1.db")), proc, "snapshot of the second source")
        assert next(scratch.glob("ledger-merge-*/source-0.db")).stat().st_size > 0
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=10)  # at once: not after the 60 s busy timeout
    assert proc.returncode == 128 + sig
    assert err == (f"error: merge stopped by {signal.Signals(sig).name}: the destination has all of it or none"
                   " of it; its temporary copies are removed\n")
    assert out == "" and list(scratch.iterdir()) == []
    assert _fingerprint(any_db) == before


@pytest.mark.slow
def test_a_merge_stopped_inside_its_transaction_leaves_the_destination_as_it_was(any_db, tmp_path):
    """SIGTERM while the merge waits inside a C call for the destination (SQLite: its write
    lock; PostgreSQL: a lock on pins, taken after the compile rows went in): the copies go
    at once, and nothing of the merge is in the destination."""
    _node(any_db, CPU)
    before = _fingerprint(any_db)
    src = _node(tmp_path / "s.db", GPU)
    if isinstance(any_db, PgDb):
        hold = [sys.executable, "-c", PG_LOCK_PINS, any_db.conninfo]
        waiting = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                   " AND wait_event_type = 'Lock' AND query LIKE '% pins%'")
        stuck = lambda: query(any_db, waiting) == [(1,)]
    else:
        hold = _sqlite_lock(any_db)
        stuck = lambda: list(scratch.glob("ledger-merge-*/source-0.db"))
    with _held(hold), _merge_process(tmp_path, src, "--db", any_db) as (proc, scratch):
        _wait_for(stuck, proc, "a merge waiting for the destination")
        time.sleep(0.5)  # SQLite: past the snapshot, into BEGIN IMMEDIATE's wait
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 128 + signal.SIGTERM and err.startswith("error: merge stopped by SIGTERM"), err
    assert list(scratch.iterdir()) == []
    assert _fingerprint(any_db) == before


@pytest.mark.slow
def test_a_hard_link_or_a_url_to_the_destination_is_the_destination(tmp_path):
    dest = _node(tmp_path / "d.db", CPU)
    before = _sha(dest)
    (tmp_path / "hard.db").hardlink_to(dest)
    (tmp_path / "soft.db").symlink_to(dest)
    # {as given: as the message shows it}; cwd is tmp_path, so sqlite:///d.db is relative to it
    spellings = {tmp_path / "hard.db": tmp_path / "hard.db", tmp_path / "soft.db": dest, f"sqlite:///{dest}": dest,
                 "sqlite:///d.db": "d.db", f"sqlite:///{tmp_path / 'hard.db'}": tmp_path / "hard.db"}
    for source, shown in spellings.items():
        result = run_cli("merge", source, "--db", dest)
        assert (result.exit_code, result.output) == (
            1, f"error: {shown} is the destination: a ledger is not merged into itself\n"), source
    as_url = run_cli("merge", tmp_path / "hard.db", "--db", f"sqlite:///{dest}")
    assert as_url.exit_code == 1 and "is the destination" in as_url.output
    assert _sha(dest) == before


@pytest.mark.slow
def test_a_pin_whose_row_was_deleted_is_skipped_with_a_warning(any_db, tmp_path):
    """A source whose pinned row was deleted by hand (it gave KeyError: None): the pin
    has nothing to point at, so it is not merged, and says so; the rest merges."""
    src = _node(tmp_path / "s.db", CPU)
    con = sqlite3.connect(src)
    with con:
        # a key with another warm row, which `pins update` pins afterwards
        same_key = " AND ".join(f"r.{c} IS p.{c}" for c in COMPARABILITY_KEY)
        (row_id, pin_key), = con.execute(
            f"SELECT row_id, pin_key FROM pins p WHERE (SELECT count(*) FROM compile_records r WHERE {same_key}) > 1"
            " ORDER BY pin_key LIMIT 1")
        con.execute("DELETE FROM compile_records WHERE id = ?", (row_id,))
        pins_in_source = con.execute("SELECT count(*) FROM pins").fetchone()[0]
    con.close()
    result = run_cli("merge", src, "--db", any_db)
    assert result.exit_code == 0, result.output
    assert f"warning: {src}: pin {pin_key}: its row {row_id} is not in the source (deleted?); not merged" \
           " (`ledger pins update` pins that key from the merged rows)" in result.output.splitlines()
    assert query(any_db, "SELECT count(*) FROM pins") == [(pins_in_source - 1,)]
    assert query(any_db, "SELECT count(*) FROM pins WHERE pin_key = %s" if isinstance(any_db, PgDb)
                 else "SELECT count(*) FROM pins WHERE pin_key = ?", (pin_key,)) == [(0,)]
    # pinned anew from the merged rows by the pins' own rule
    assert run_cli("pins", "update", "--db", any_db).exit_code == 0
    assert query(any_db, "SELECT count(*) FROM pins") == [(pins_in_source,)]


# POSIX zone strings (no tz database needed): east of UTC is a negative offset there.
ZONES = {"UTC+14": "LINT-14", "UTC-8": "PST+8", "UTC+5:30": "IST-5:30"}


@pytest.mark.jax
def test_ledgers_written_in_three_zones_merge_in_real_time_order(tmp_path):
    """Three nodes probe one cell into one cache dir, one after another: cold at UTC+14,
    then warm at UTC-8 and at UTC+5:30. Merged (the first node last, so its row has the
    highest id), the newest row is the last one written, and check finds nothing. Under
    local clocks the UTC+14 node's cold row read 13 hours newer than the others, and
    check called the warm cell went-cold."""
    cache = tmp_path / "cache"
    dbs = {}
    for zone, tz in ZONES.items():
        dbs[zone] = tmp_path / f"node-{len(dbs)}.db"
        env = {**os.environ, "TZ": tz, "JAX_PLATFORMS": jax_platform()}
        done = subprocess.run([str(LEDGER), "probe", "-o", "toy", "-t", "jit", "--cache-dir", str(cache),
                               "--tag", zone, "--db", str(dbs[zone])], env=env, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, done.stderr
    merged = tmp_path / "merged.db"
    for zone in reversed(ZONES):
        assert run_cli("merge", dbs[zone], "--db", merged).exit_code == 0
    rows = query(merged, "SELECT tag, cache_state, timestamp FROM compile_records ORDER BY timestamp, id")
    assert [(tag, state) for tag, state, _ in rows] == [("UTC+14", "cold"), ("UTC-8", "warm"), ("UTC+5:30", "warm")]
    assert all(stamp.endswith("+00:00") for _, _, stamp in rows)
    assert query(merged, "SELECT tag FROM compile_records ORDER BY id") == [("UTC+5:30",), ("UTC-8",), ("UTC+14",)]
    check = run_cli("check", "--db", merged)
    assert (check.exit_code, check.output) == (
        0, "check run 1 (tolerance 1.5x): 0 ok, 0 regression, 0 inconclusive, 0 went-cold\n")


# -- predictions: carried once, still scored by the row that scored them -------------------

SCORED_BY_SQL = ("SELECT p.hostname, p.cache_key, p.predicted, r.tag, r.cache_state"
                 f" FROM ({SCORED_SQL.format(where='')}) s"
                 " JOIN predictions p ON p.id = s.prediction_id JOIN compile_records r ON r.id = s.row_id"
                 " ORDER BY p.hostname, p.cache_key")
# every column but the two that are positions in a ledger: id and after_row_id
PREDICTIONS_SQL = (f"SELECT {', '.join(c.name for c in predictions.c if c.name not in ('id', 'after_row_id'))}"
                   " FROM predictions ORDER BY hostname, cache_key")


def _row(path, host, cache_key, tag, state, minute):
    """One compile row of `host`, imported as `ledger import` takes it."""
    (rec,) = [r for r in compile_records_of_corpus() if r["tag"] == "cache-warm"]
    rec = dict(rec, hostname=host, cache_dir=f"/cache/{host}", cache_key=cache_key, tag=tag, cache_state=state,
               timestamp=f"2026-12-04T10:{minute:02d}:00+00:00")
    result = run_cli("import", write_json(path.with_name(f"{tag}.json"), [rec]), "--db", path)
    assert result.exit_code == 0, result.output


def _predict(path, host, cache_key, predicted):
    """A prediction stored as `ledger predict` stores it: after the rows there now."""
    pred = {"cache_key": cache_key, "predicted": predicted, "transform": "vag", "hostname": host,
            "cache_dir": f"/cache/{host}", "hardware": "local_cpu", "dataset_class": "imaging",
            "mixed_precision": False}
    if predicted == "cold":
        pred |= {"cause": "computation (program changed)", "expected_compile_s": 2.5, "expected_n": 3}
    with open_ledger(str(path), "write") as ledger:
        save(ledger.engine, [pred])


def _predicting_node(path, host):
    """k1: a cold row, then a warm prediction the next (warm) row holds; k2: a cold
    prediction nothing scored yet."""
    _row(path, host, "k1", f"{host}-first", "cold", 1)
    _predict(path, host, "k1", "warm")
    _predict(path, host, "k2", "cold")
    _row(path, host, "k1", f"{host}-second", "warm", 2)
    return path


@pytest.mark.slow
def test_predictions_arrive_once_and_stay_scored_by_their_row(any_db, tmp_path):
    """Merged after another node's rows, the first node's rows have other ids here: its
    prediction is still scored by its own later row, not by the row before it."""
    a = _predicting_node(tmp_path / "a.db", "node-a")
    b = _predicting_node(tmp_path / "b.db", "node-b")
    merged = run_cli("merge", b, a, "--db", any_db)
    assert merged.exit_code == 0, merged.output
    assert query(any_db, PREDICTIONS_SQL) == query(a, PREDICTIONS_SQL) + query(b, PREDICTIONS_SQL)
    assert query(any_db, SCORED_BY_SQL) == query(a, SCORED_BY_SQL) + query(b, SCORED_BY_SQL) == [
        ("node-a", "k1", "warm", "node-a-second", "warm"), ("node-b", "k1", "warm", "node-b-second", "warm")]
    again = run_cli("merge", a, b, "--db", any_db)
    assert again.exit_code == 0, again.output
    assert again.output.splitlines()[0] == (f"merged {a}: 0 compile rows added, 2 already here;"
                                            " 0 instrument records added, 0 already here;"
                                            " 0 predictions added, 2 already here; 0 cache prunes added, 0 already here;"
                                            " 0 recorded processes added, 0 already here;"
                                            " pins: 0 taken, 0 the same, 0 differ")
    assert len(query(any_db, PREDICTIONS_SQL)) == 4
    # k2's prediction is scored by a row merged later, as the node's own next row would
    _row(a, "node-a", "k2", "node-a-third", "cold", 3)
    assert run_cli("merge", a, "--db", any_db).output.startswith(
        f"merged {a}: 1 compile rows added, 2 already here; 0 instrument records added, 0 already here;"
        " 0 predictions added, 2 already here;")
    assert query(any_db, SCORED_BY_SQL)[:2] == query(a, SCORED_BY_SQL) == [
        ("node-a", "k1", "warm", "node-a-second", "warm"), ("node-a", "k2", "cold", "node-a-third", "cold")]


def test_every_column_of_a_prediction_is_read_and_checked():
    assert sorted(COLUMNS) == sorted(c.name for c in predictions.c)


@pytest.mark.slow
@pytest.mark.parametrize(("column", "value", "message"), [
    ("created_at", "not a time", f"created_at is not an ISO 8601 time {TIMESTAMP_FORM} ('not a time')"),
    ("expected_compile_s", -1, "expected_compile_s is negative (-1.0)"),
    ("predicted", "maybe", "predicted 'maybe' is not one of cold, warm, none, unknown"),
])
def test_a_bad_prediction_is_refused_in_one_line_and_nothing_is_written(tmp_path, db, column, value, message):
    _predicting_node(db, "here")
    good = _predicting_node(tmp_path / "good.db", "good")
    bad = _predicting_node(tmp_path / "bad.db", "bad")
    con = sqlite3.connect(bad)
    with con:
        con.execute(f"UPDATE predictions SET {column} = ? WHERE cache_key = 'k2'", (value,))
        (bad_id,) = con.execute("SELECT id FROM predictions WHERE cache_key = 'k2'").fetchone()
    con.close()
    before = _fingerprint(db), query(db, "SELECT * FROM predictions ORDER BY id")
    result = run_cli("merge", good, bad, "--db", db)
    assert (result.exit_code, result.output) == (1, f"error: {bad}: prediction {bad_id}: {message}\n")
    assert (_fingerprint(db), query(db, "SELECT * FROM predictions ORDER BY id")) == before


@pytest.mark.slow
def test_the_same_prediction_saying_otherwise_is_a_conflict(tmp_path, db):
    _predict(db, "node-a", "k1", "warm")
    con = sqlite3.connect(db)
    with con:
        (created_at,) = con.execute("SELECT created_at FROM predictions").fetchone()
    con.close()
    there = tmp_path / "there.db"
    _predict(there, "node-a", "k1", "cold")
    con = sqlite3.connect(there)
    with con:
        con.execute("UPDATE predictions SET created_at = ?", (created_at,))
    con.close()
    result = run_cli("merge", there, "--db", db)
    assert result.exit_code == 0, result.output
    assert f"  conflict: prediction vag on node-a {created_at}: predicted cold in the source, warm here (kept)" \
        in result.output.splitlines()
    assert query(db, "SELECT predicted FROM predictions") == [("warm",)]


# -- cache prunes: carried, once, and read by explain here --------------------------------

KEY_F, KEY_G = f"jit_f-{'a' * 64}", f"jit_g-{'b' * 64}"
# every column but the id, which the destination gives
PRUNES_SQL = (f"SELECT {', '.join(c.name for c in cache_prunes.c if c.name != 'id')}"
              " FROM cache_prunes ORDER BY entry")


def _pruned_node(path, tmp_path):
    """A node whose `ledger cache prune` removed three entries of a synthetic dir (KEY_F
    as jax 0.4.30 and as later JAX name it, KEY_G), between a warm row of KEY_F and the
    cold one that followed; (the node, the cause explain gives the cold row)."""
    cache = tmp_path / "jax-cache"
    cache.mkdir()
    for name, seconds in ((KEY_F, 3), (f"{KEY_F}-cache", 3), (f"{KEY_G}-cache", 7)):
        # as JAX writes an entry without zstandard: zlib of its compile seconds, then the executable
        (cache / name).write_bytes(zlib.compress(seconds.to_bytes(4, "big") + b"executable"))
    add(path, tmp_path, rec(cache_key=KEY_F, cache_dir=str(cache)))
    pruned = run_cli("cache", "prune", cache, "--unused-days", "0", "--db", path)
    assert pruned.exit_code == 0, pruned.output
    (when, reason), = set(query(path, "SELECT pruned_at, reason FROM cache_prunes"))
    after = (datetime.fromisoformat(when) + timedelta(minutes=1)).isoformat(timespec="seconds")
    add(path, tmp_path, rec(cache_key=KEY_F, cache_dir=str(cache), cache_state="cold", compile_s=9.0, timestamp=after))
    return path, f"pruned: entry removed by ledger cache prune at {when} ({reason})"


@pytest.mark.slow
def test_cache_prunes_arrive_once_with_every_column_and_explain_names_them_here(any_db, tmp_path):
    node, cause = _pruned_node(tmp_path / "node.db", tmp_path)
    assert len(query(node, PRUNES_SQL)) == 3
    merged = run_cli("merge", node, "--db", any_db)
    assert merged.exit_code == 0, merged.output
    assert merged.output.splitlines()[0] == (
        f"merged {node}: 2 compile rows added, 0 already here; 0 instrument records added, 0 already here;"
        " 0 predictions added, 0 already here; 3 cache prunes added, 0 already here; 0 recorded processes added, 0 already here; pins: 0 taken, 0 the same, 0 differ")
    again = run_cli("merge", node, "--db", any_db)
    assert again.exit_code == 0, again.output
    assert again.output.splitlines()[0] == (
        f"merged {node}: 0 compile rows added, 2 already here; 0 instrument records added, 0 already here;"
        " 0 predictions added, 0 already here; 0 cache prunes added, 3 already here; 0 recorded processes added, 0 already here; pins: 0 taken, 0 the same, 0 differ")
    assert query(any_db, PRUNES_SQL) == query(node, PRUNES_SQL)
    (cold,), = query(any_db, "SELECT id FROM compile_records WHERE cache_state = 'cold'")
    explained = run_cli("explain", cold, "--db", any_db)
    assert explained.exit_code == 0, explained.output
    assert explained.output.splitlines()[3] == f"cause: {cause}"


def test_every_column_of_a_cache_prune_is_read_and_checked():
    assert sorted(PRUNE_COLUMNS) == sorted(c.name for c in cache_prunes.c)


@pytest.mark.parametrize(("column", "value", "message"), [
    ("pruned_at", "not a time", f"pruned_at is not an ISO 8601 time {TIMESTAMP_FORM} ('not a time')"),
    ("last_used", "2026-12-03 19:00:00", f"last_used is not an ISO 8601 time {TIMESTAMP_FORM} ('2026-12-03 19:00:00')"),
    ("bytes", -1, "bytes is not a count from 0 to 2**63-1 (-1)"),
    ("bytes", 1e300, f"bytes is not a count from 0 to 2**63-1 ({str(int(1e300))[:57]}...)"),
    ("hits", "many", "hits is not an integer ('many')"),
    ("saved_s", 1e309, "saved_s is not a finite number (inf)"),
    ("jax_compile_s", -2.5, "jax_compile_s is negative (-2.5)"),
    ("cache_key", "k\x00", "cache_key is not storable text (a NUL character or invalid UTF-8)"),
])
@pytest.mark.slow
def test_a_bad_cache_prune_is_refused_in_one_line_and_nothing_is_written(any_db, tmp_path, column, value, message):
    add(any_db, tmp_path, rec(cache_key="kept"))  # the destination has rows of its own
    bad, _ = _pruned_node(tmp_path / "bad.db", tmp_path)
    con = sqlite3.connect(bad)
    with con:
        (bad_id,) = con.execute("SELECT max(id) FROM cache_prunes").fetchone()
        con.execute(f"UPDATE cache_prunes SET {column} = ? WHERE id = ?", (value, bad_id))
    con.close()
    before = _fingerprint(any_db), None if isinstance(any_db, PgDb) else _sha(any_db)
    result = run_cli("merge", bad, "--db", any_db)
    assert (result.exit_code, result.output) == (1, f"error: {bad}: cache prune {bad_id}: {message}\n")
    assert (_fingerprint(any_db), None if isinstance(any_db, PgDb) else _sha(any_db)) == before


PROCESSES_SQL = "SELECT run_id, hostname, pid, started, ended, wall_s, ended_by FROM recorded_processes ORDER BY pid"


def _processes_node(path, tmp_path):
    """A node with a recorded run's row and its two processes' times (revision 0016)."""
    from ledger.storage.models import recorded_processes

    add(path, tmp_path, rec(run_id="run-p", function="jit_loss", transform="recorded", call_site="fit.py:9 fit"))
    rows = [{"run_id": "run-p", "hostname": "node1", "pid": 100 + i, "started": "2026-07-01T10:00:00.500000+00:00",
             "ended": f"2026-07-01T10:00:2{i}.000000+00:00", "wall_s": 19.5 + i, "ended_by": ("exit", "gone")[i]}
            for i in range(2)]
    with open_ledger(str(path), "write") as ledger, ledger.engine.begin() as conn:
        conn.execute(recorded_processes.insert(), rows)
    return path


@pytest.mark.slow  # about 0.2 s of CPU here: too near the fast tier's 0.3 s on a slower CI machine
def test_recorded_processes_arrive_once_and_the_runs_time_reads_here_as_there(any_db, tmp_path):
    node = _processes_node(tmp_path / "node.db", tmp_path)
    for added, present in ((2, 0), (0, 2)):  # merged twice: nothing twice
        merged = run_cli("merge", node, "--db", any_db)
        assert merged.exit_code == 0, merged.output
        assert f"; {added} recorded processes added, {present} already here;" in merged.output.splitlines()[0]
    assert query(any_db, PROCESSES_SQL) == query(node, PROCESSES_SQL)
    assert query(any_db, "SELECT call_site FROM compile_records") == [("fit.py:9 fit",)]
    here, there = (json.loads(run_cli("runs", "--json", "--db", d).output)[0]["time"] for d in (any_db, node))
    assert here == there == {"wall_s": 20.5, "process_s": 40.0, "processes": 2, "ended_by": ["gone"]}


@pytest.mark.parametrize(("column", "value", "message"), [
    ("ended_by", "killed", "ended_by is not one of exit, gone, last seen ('killed')"),
    ("started", "yesterday", f"started is not an ISO 8601 time {TIMESTAMP_FORM} ('yesterday')"),
    ("wall_s", -1.0, "wall_s is negative (-1.0)"),
    ("pid", -3, "pid is not a count from 0 to 2**63-1 (-3)"),
])
def test_a_bad_recorded_process_is_refused_in_one_line_and_nothing_is_written(db, tmp_path, column, value, message):
    bad = _processes_node(tmp_path / "bad.db", tmp_path)
    con = sqlite3.connect(bad)
    with con:
        (bad_id,) = con.execute("SELECT id FROM recorded_processes WHERE pid = 101").fetchone()
        con.execute(f"UPDATE recorded_processes SET {column} = ? WHERE id = ?", (value, bad_id))
    con.close()
    result = run_cli("merge", bad, "--db", db)
    assert (result.exit_code, result.output) == (1, f"error: {bad}: recorded process {bad_id}: {message}\n")
    assert not db.exists() or query(db, "SELECT count(*) FROM compile_records") == [(0,)]
