"""`ledger cache prune`: real cache dirs made by real probes, hashed around a dry run and
read after a prune; a pruned entry's next cold compile explained as pruned by explain,
check and predict; synthetic entries (as JAX writes them) for the order, the protection,
JAX's lock and the files that are never an entry's."""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import socket
import sqlite3
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from ledger.cache import prune

from .conftest import query, run_cli
from .ledgers import add, rec

LEDGER = Path(sys.executable).with_name("ledger")
MONTH_AGO = time.time() - 30 * 86400


def _ledger(*args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_COMPILATION_CACHE_DIR")}
    return subprocess.run([LEDGER, *map(str, args)], capture_output=True, text=True, env=env, check=False)


def _probe(cache: Path, db: Path) -> str:
    out = _ledger("probe", "-o", "toy", "-t", "jit,grad", "--cache-dir", cache, "--db", db)
    assert out.returncode == 0, out.stderr
    return ",".join(r[0] for r in query(db, "SELECT cache_state FROM compile_records ORDER BY id DESC LIMIT 2"))


def _hashes(*paths: Path) -> dict[str, str]:
    """Every file under the paths (a file itself), by name: its bytes' sha256."""
    files = [q for p in paths for q in ([p] if p.is_file() else sorted(p.rglob("*")))]
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files if f.is_file()}


def _key(function: str, c: str) -> str:
    return f"{function}-{c * 64}"


def _entry(cache: Path, key: str, seconds: int, size: int = 5000, when: float = MONTH_AGO) -> Path:
    """An entry as JAX writes it without zstandard (zlib of 4 bytes of seconds, then the
    executable: random, so its size on disk is about ``size``), written at ``when``."""
    path = cache / f"{key}-cache"
    path.write_bytes(zlib.compress(seconds.to_bytes(4, "big") + os.urandom(size)))
    os.utime(path, (when, when))
    return path


@pytest.mark.jax
def test_a_dry_run_changes_nothing_and_is_what_the_prune_then_removes(tmp_path):
    cache, db = tmp_path / "jax-cache", tmp_path / "ledger.db"
    assert (_probe(cache, db), _probe(cache, db)) == ("cold,cold", "warm,warm")
    args = ("cache", "prune", cache, "--unused-days", "0", "--max-size", "0", "--db", db)
    before = _hashes(cache, db)
    dry = run_cli(*args, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert _hashes(cache, db) == before  # neither the dir nor the ledger changed, byte for byte
    assert query(db, "SELECT count(*) FROM cache_prunes") == [(0,)]
    real = run_cli(*args)
    assert real.exit_code == 0, real.output
    planned = dry.output.splitlines()
    done = real.output.splitlines()
    assert [ln.replace("would remove", "removed", 1) for ln in planned[:-1]] == done[:-2]
    assert done[-1] == f"recorded in {db} (cache_prunes)"
    removed = sorted(ln.split()[1] for ln in done[:-2])
    assert sorted(k.rsplit("-", 1)[0] for k, in query(db, "SELECT cache_key FROM cache_prunes")) == removed
    assert [p.name for p in cache.iterdir()] == []  # every entry went, their -atime files with them
    freed = sum(b for b, in query(db, "SELECT bytes FROM cache_prunes"))
    assert re.fullmatch(rf"removed {len(removed)} entries, {freed / 1e6:.2f} MB freed, \d+ s of compiles given up"
                        r" \(JAX's seconds\)", done[-2])


@pytest.mark.jax
@pytest.mark.jax_legs  # an entry's file name is JAX's (no -cache suffix on the floor): run on both legs
def test_a_pruned_entry_compiles_cold_and_explain_check_and_predict_say_pruned(tmp_path, any_db):
    cache, db = tmp_path / "jax-cache", any_db
    assert (_probe(cache, db), _probe(cache, db)) == ("cold,cold", "warm,warm")
    pruned = _ledger("cache", "prune", cache, "--unused-days", "0", "--db", db)  # the installed entry point
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.splitlines()[-2].startswith("removed 2 entries, ")
    (when,), = set(query(db, "SELECT pruned_at FROM cache_prunes"))
    cause = f"pruned: entry removed by ledger cache prune at {when} (unused 0+ days)"

    said = _ledger("predict", "-o", "toy", "-t", "jit", "--cache-dir", cache, "--db", db)
    assert said.returncode == 1, said.stderr
    assert said.stdout.splitlines()[1].startswith(f"jit: cold ({cause}); expected cold compile ")
    assert _probe(cache, db) == "cold,cold"

    (cold_id,), = query(db, "SELECT max(id) FROM compile_records WHERE transform = 'jit'")
    (warm_id,), = query(db, "SELECT max(id) FROM compile_records WHERE transform = 'jit' AND cache_state = 'warm'")
    explained = run_cli("explain", cold_id, "--db", db)
    assert explained.exit_code == 0, explained.output
    assert explained.output.splitlines()[3] == f"cause: {cause}"
    assert run_cli("pins", "update", "--db", db).exit_code == 0
    # one root cause: the two transforms' cells in one line
    (line, _) = run_cli("check", "--db", db).output.splitlines()
    assert line.startswith("went-cold     2 cells of `objective toy`: cold: entries removed by ledger cache prune; ")
    checked = run_cli("check", "--verbose", "--db", db)  # a line per cell
    assert checked.exit_code == 1, checked.output
    went_cold = [ln for ln in checked.output.splitlines() if ln.startswith("went-cold") and " jit " in ln]
    assert len(went_cold) == 1 and went_cold[0].endswith(f"row {cold_id} is cold: {cause} (last warm row {warm_id})")


def _evidence(db: Path, tmp_path: Path, cache: Path, keys: dict[str, tuple[float, float]]) -> None:
    """For each key: a cold row of ``cold`` s and a warm one of ``warm`` s (saved: the difference)."""
    rows = [rec(cache_key=k, cache_dir=str(cache), model_type=k[:5], cache_state=state, compile_s=s,
                timestamp=f"2026-07-0{1 + n}T10:00:00", hostname=socket.gethostname())
            for k, (cold, warm) in keys.items() for n, (state, s) in enumerate([("cold", cold), ("warm", warm)])]
    add(db, tmp_path, *rows)


def test_max_size_removes_least_saved_per_byte_first_and_never_a_recent_entry(tmp_path):
    cache, db = tmp_path / "cache", tmp_path / "ledger.db"
    cache.mkdir()
    big, low, none, recent = _key("jit_big", "a"), _key("jit_low", "b"), _key("jit_none", "c"), _key("jit_new", "d")
    for key in (big, low, none):
        _entry(cache, key, 3)
    _entry(cache, recent, 4, when=time.time())  # no hits, but used today
    (cache / f"{low}-atime").write_bytes(int(MONTH_AGO * 1e9).to_bytes(8, "little"))
    _evidence(db, tmp_path, cache, {big: (10.0, 0.1), low: (2.0, 0.5)})
    result = run_cli("cache", "prune", cache, "--max-size", "0", "--db", db)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    reason = "unused 7+ days; to fit --max-size 0.00 MB, least saved per byte"
    assert [ln.split(":")[0] for ln in lines[:3]] == ["removed jit_none cccccccccccc", "removed jit_low bbbbbbbbbbbb",
                                                       "removed jit_big aaaaaaaaaaaa"]
    assert all(ln.endswith(f"3 s of compile given up ({reason})") for ln in lines[:3])
    assert lines[4] == (f"the dir's entries stay at {(cache / f'{recent}-cache').stat().st_size / 1e6:.2f} MB,"
                        " above --max-size 0.00 MB: 1 entries used within 7 days are kept")
    assert sorted(p.name for p in cache.iterdir()) == [f"{recent}-cache"]
    assert query(db, "SELECT cache_key, hits, round(saved_s, 2), reason FROM cache_prunes ORDER BY id") == [
        (none, 0, 0.0, reason), (low, 1, 1.5, reason), (big, 1, 9.9, reason)]


def test_max_size_stops_once_the_dir_fits_and_unused_days_alone_spares_recent_use(tmp_path):
    cache, db = tmp_path / "cache", tmp_path / "ledger.db"  # none there: the files alone
    cache.mkdir()
    old = _entry(cache, _key("jit_a", "a"), 1)
    _entry(cache, _key("jit_b", "b"), 2, when=MONTH_AGO - 86400)  # the older: it goes first
    recent = _entry(cache, _key("jit_c", "c"), 1, when=time.time() - 86400)
    fits, mb = old.stat().st_size + recent.stat().st_size, f"{old.stat().st_size / 1e6:.2f} MB"
    out = run_cli("cache", "prune", cache, "--max-size", str(fits)).output.splitlines()
    assert out[0].startswith("removed jit_b bbbbbbbbbbbb: ") and out[1].startswith("removed 1 entries, ")
    assert out[2] == "no ledger (--db, LEDGER_DB or ./ledger.db): nothing recorded, every entry saved 0 s per byte"
    assert not db.exists()
    assert run_cli("cache", "prune", cache, "--unused-days", "2").output.splitlines()[:2] == [
        f"removed jit_a aaaaaaaaaaaa: {mb}, 1 s of compile given up (unused 2+ days)",
        f"removed 1 entries, {mb} freed, 1 s of compiles given up (JAX's seconds)"]
    assert [p.name for p in cache.iterdir()] == [recent.name]
    again = run_cli("cache", "prune", cache, "--unused-days", "2")
    assert (again.exit_code, again.output.splitlines()[0]) == (0, "nothing to prune: 1 entries, none unused for 2 days")
    big = run_cli("cache", "prune", cache, "--max-size", "1.5GB")
    assert big.output.splitlines()[0] == f"nothing to prune: 1 entries, {recent.stat().st_size / 1e6:.2f} MB, within --max-size 1500.00 MB"


def test_temp_files_the_lock_and_other_files_are_never_removed(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    entry = _entry(cache, _key("jit_a", "a"), 1)
    (cache / f"{_key('jit_a', 'a')}-atime").write_bytes(int(MONTH_AGO * 1e9).to_bytes(8, "little"))
    kept = {".lockfile": b"", f"_temp_{_key('jit_b', 'b')}": b"half", "notes.txt": b"mine", "jit_c-cccc-cache": b"x"}
    for name, data in kept.items():
        (cache / name).write_bytes(data)
        os.utime(cache / name, (MONTH_AGO, MONTH_AGO))
    result = run_cli("cache", "prune", cache, "--unused-days", "0")
    assert result.output.splitlines()[0].startswith("removed jit_a aaaaaaaaaaaa: "), result.output
    assert not entry.exists() and sorted(p.name for p in cache.iterdir()) == sorted(kept)


def test_an_entry_is_removed_only_under_jaxs_lock(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    entry = _entry(cache, _key("jit_a", "a"), 1)
    monkeypatch.setattr(prune, "LOCK_TIMEOUT_S", 0.2)
    with open(cache / ".lockfile", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a JAX process inside get, put or its eviction
        result = run_cli("cache", "prune", cache, "--unused-days", "0")
        assert entry.exists()
    assert result.output.splitlines()[:2] == [
        (f"not removed jit_a aaaaaaaaaaaa ({entry.stat().st_size / 1e6:.2f} MB): JAX's lock of the dir is held"
         " (a prune waits 0.2 s for it in all)"),
        "removed 0 entries, 0.00 MB freed, 0 s of compiles given up (JAX's seconds)"]
    assert run_cli("cache", "prune", cache, "--unused-days", "0").exit_code == 0
    assert not entry.exists()  # the lock free: removed


def test_an_entry_rewritten_after_the_plan_stays(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    entry = _entry(cache, _key("jit_a", "a"), 1)
    real_plan = prune.plan

    def plan_then_write(*args, **kw):
        out = real_plan(*args, **kw)
        _entry(cache, _key("jit_a", "a"), 1, size=9000, when=time.time())  # a writer, between plan and removal
        return out

    monkeypatch.setattr(prune, "plan", plan_then_write)
    result = run_cli("cache", "prune", cache, "--unused-days", "0")
    first = result.output.splitlines()[0]
    assert first.startswith("not removed jit_a ") and first.endswith(" MB): rewritten since the plan") and entry.exists()


@pytest.mark.parametrize("args, message", [
    ((), "give --unused-days N, --max-size SIZE or both: prune removes nothing unasked"),
    (("--max-size", "5X"), "--max-size must be a size such as 500M, 2G, 1.5GB or 1000 (bytes), not '5X'"),
    (("--max-size", "0.5"), "--max-size must be a whole number of bytes, not '0.5' (0.5 bytes)"),
    (("--max-size", "-1"), "--max-size must be a size such as 500M, 2G, 1.5GB or 1000 (bytes), not '-1'"),
    (("--max-size", "1\n2"), "--max-size must be a size such as 500M, 2G, 1.5GB or 1000 (bytes), not '1\\n2'"),
    (("--max-size", "1'G"), "--max-size must be a size such as 500M, 2G, 1.5GB or 1000 (bytes), not \"1'G\""),
    (("--max-size", "9" * 400), "--max-size must be a size such as 500M, 2G, 1.5GB or 1000 (bytes), not '"
     + "9" * 400 + "'"),
    (("--unused-days", "-1"), "--unused-days must be a whole number of days from 0 to 100000, not '-1'"),
    (("--unused-days", "1.5"), "--unused-days must be a whole number of days from 0 to 100000, not '1.5'"),
    (("--unused-days", "9" * 30), f"--unused-days must be a whole number of days from 0 to 100000, not '{'9' * 30}'"),
    (("--unused-days", "3\n"), "--unused-days must be a whole number of days from 0 to 100000, not '3\\n'"),
])
def test_bad_input_is_one_line_exit_2_and_removes_nothing(tmp_path, args, message):
    cache = tmp_path / "cache"
    cache.mkdir()
    _entry(cache, _key("jit_a", "a"), 1)
    before = _hashes(cache)
    result = run_cli("cache", "prune", cache, *args, "--db", tmp_path / "none.db")
    assert (result.exit_code, result.output) == (2, f"error: {message}\n")
    assert _hashes(cache) == before and not (tmp_path / "none.db").exists()


def test_a_missing_dir_is_one_line_exit_1(tmp_path):
    result = run_cli("cache", "prune", tmp_path / "missing", "--unused-days", "1", "--db", tmp_path / "l.db")
    assert (result.exit_code, result.output) == (1, f"error: no cache dir at {tmp_path / 'missing'}\n")


@pytest.mark.parametrize("text, size", [("1000", 1000), ("0", 0), ("500M", 500 * 10**6), ("2G", 2 * 10**9),
                                        ("1.5GB", 15 * 10**8), ("3GiB", 3 * 2**30), ("10 kb", 10**4),
                                        ("1000b", 1000), (".5k", 500)])
def test_sizes(text, size):
    assert prune.parse_size(text) == size


def test_the_inventory_keeps_its_words_beside_prune(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    _entry(cache, _key("jit_a", "a"), 1)
    short = run_cli("cache", cache, "--json")
    long = run_cli("cache", "inventory", cache, "--json")
    assert short.exit_code == 0 and short.output == long.output
    assert run_cli("cache", "--json", cache).output == short.output
    listed = run_cli("cache", "--help").output
    assert "inventory" in listed and "prune" in listed


# -- a prune leaves a true record, whatever stops it (issue 31) ----------------------------


def _old_entries(cache: Path, n: int) -> list[Path]:
    cache.mkdir(exist_ok=True)
    return [_entry(cache, _key(f"jit_{i}", "abcdef0123456789"[i % 16]), 1 + i % 3) for i in range(n)]


def _refusing(db) -> None:
    """A ledger that refuses every cache_prunes row (as a read-only one does), by a trigger."""
    if isinstance(db, Path):
        con = sqlite3.connect(db)
        con.execute("CREATE TRIGGER refuse BEFORE INSERT ON cache_prunes BEGIN SELECT RAISE(ABORT, 'read-only'); END")
        con.commit()
        con.close()
        return
    import psycopg

    with psycopg.connect(db.conninfo) as con:
        con.execute("CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$"
                    " BEGIN RAISE EXCEPTION 'read-only'; END $$")
        con.execute("CREATE TRIGGER refuse BEFORE INSERT ON cache_prunes FOR EACH ROW EXECUTE FUNCTION refuse()")


def test_a_ledger_that_refuses_the_record_refuses_the_prune_whole(tmp_path, any_db):
    cache, db = tmp_path / "cache", any_db
    entries = _old_entries(cache, 3)
    add(db, tmp_path, rec(cache_key="jit_other-" + "f" * 64))
    _refusing(db)
    before = _hashes(cache)
    result = run_cli("cache", "prune", cache, "--unused-days", "0", "--db", db)
    assert result.exit_code == 1
    assert result.output.startswith("error: the ledger refused to record a removal, so the prune stopped: ")
    assert result.output.endswith("; nothing was removed\n") and len(result.output.splitlines()) == 1
    assert _hashes(cache) == before and all(e.exists() for e in entries)


@pytest.mark.slow
def test_a_ledger_locked_past_the_busy_timeout_removes_nothing(tmp_path, monkeypatch):
    cache, db = tmp_path / "cache", tmp_path / "ledger.db"
    _old_entries(cache, 3)
    add(db, tmp_path, rec())
    before = _hashes(cache)
    monkeypatch.setenv("LEDGER_BUSY_TIMEOUT", "0.2")
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("BEGIN EXCLUSIVE")
    try:
        result = run_cli("cache", "prune", cache, "--unused-days", "0", "--db", db)
    finally:
        con.execute("COMMIT")
        con.close()
    assert result.exit_code == 1 and len(result.output.splitlines()) == 1, result.output
    assert result.output.startswith("error: ") and "database is locked" in result.output
    assert _hashes(cache) == before
    assert query(db, "SELECT count(*) FROM cache_prunes") == [(0,)]


def test_an_entry_that_cannot_go_is_a_line_and_the_rest_go_recorded(tmp_path, any_db, monkeypatch):
    cache, db = tmp_path / "cache", any_db
    entries = _old_entries(cache, 4)
    stuck = entries[1]  # another user's entry in a sticky dir: the system refuses its unlink
    (cache / f"{entries[2].name.removesuffix('-cache')}-atime").mkdir()  # an -atime "file" that is a dir
    foreign = cache / os.fsdecode(b"jit_\xff-" + b"e" * 64 + b"-cache")  # a name that is not UTF-8: not JAX's
    foreign.write_bytes(b"x")
    os.utime(foreign, (MONTH_AGO, MONTH_AGO))
    add(db, tmp_path, rec())
    real_unlink = Path.unlink

    def unlink(self, *args, **kw):
        if self == stuck:
            raise PermissionError(1, "Operation not permitted")
        return real_unlink(self, *args, **kw)

    monkeypatch.setattr(Path, "unlink", unlink)
    result = run_cli("cache", "prune", cache, "--unused-days", "0", "--db", db)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert f"not removed jit_1 bbbbbbbbbbbb ({stuck.stat().st_size / 1e6:.2f} MB): cannot remove it: Operation not permitted" in lines
    assert any(ln.startswith("removed jit_2 ") and ln.endswith("; its atime file stays: Is a directory") for ln in lines)
    assert lines[-2].startswith("removed 3 entries, ")
    gone = sorted(e.name.removesuffix("-cache") for e in entries if not e.exists())
    assert len(gone) == 3 and stuck.exists() and foreign.exists()
    assert sorted(k for k, in query(db, "SELECT cache_key FROM cache_prunes")) == gone  # each removal, and no other


def test_a_held_jax_lock_is_waited_for_once_per_prune_not_per_entry(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    entries = _old_entries(cache, 20)
    monkeypatch.setattr(prune, "LOCK_TIMEOUT_S", 0.2)
    with open(cache / ".lockfile", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a job suspended by SLURM inside JAX's lock
        started = time.monotonic()
        result = run_cli("cache", "prune", cache, "--unused-days", "0")
        took = time.monotonic() - started
    lines = result.output.splitlines()
    assert sum(ln.endswith(": JAX's lock of the dir is held (a prune waits 0.2 s for it in all)") for ln in lines) == 20
    assert took < 20 * 0.2 / 4 and all(e.exists() for e in entries)  # one wait, not one per entry


def test_max_size_counts_jaxs_entries_only(tmp_path):
    cache = tmp_path / "cache"
    entries = _old_entries(cache, 2)
    (cache / "core.12345").write_bytes(b"\0" * 10**7)  # a core dump: never pruned, never counted
    os.utime(cache / "core.12345", (MONTH_AGO, MONTH_AGO))
    fits = sum(e.stat().st_size for e in entries)
    result = run_cli("cache", "prune", cache, "--max-size", str(fits))
    assert result.output.splitlines()[0] == f"nothing to prune: 3 entries, {fits / 1e6:.2f} MB, within --max-size {fits / 1e6:.2f} MB"
    assert all(e.exists() for e in entries)


@pytest.mark.parametrize("command", [("cache", "prune"), ("cache",)])
def test_a_db_that_is_not_there_is_refused_not_read_as_no_ledger(tmp_path, command):
    cache = tmp_path / "cache"
    entries = _old_entries(cache, 2)
    args = ("--unused-days", "0") if "prune" in command else ()
    result = run_cli(*command, cache, *args, "--db", tmp_path / "ledgr.db")
    assert (result.exit_code, result.output) == (1, f"error: no ledger database at {tmp_path / 'ledgr.db'}\n")
    assert all(e.exists() for e in entries) and not (tmp_path / "ledgr.db").exists()


@pytest.mark.parametrize("command", [("cache", "prune"), ("cache",)])
def test_an_empty_dir_argument_is_refused(tmp_path, command):
    here = _entry(tmp_path, _key("jit_here", "a"), 1)  # the current folder holds an entry
    result = run_cli(*command, "", "--unused-days", "0")
    assert (result.exit_code, result.output) == (
        2, "error: the cache dir is an empty path: give the dir (. for the current one)\n")
    assert here.exists()


def test_too_large_a_number_of_unused_days_for_the_inventory_is_one_line(tmp_path):
    cache = tmp_path / "cache"
    _old_entries(cache, 1)
    result = run_cli("cache", cache, "--unused-days", "1" + "0" * 400)
    assert result.exit_code == 2 and result.output.startswith("error: --unused-days must be a whole number of days")
    assert len(result.output.splitlines()) == 1
