"""The check's cache findings on real compiles: cache-off, cache-not-reused (three
fresh dirs; entries never written by design; a dir that lost its entries) and
jax-changed, each on SQLite and PostgreSQL. The installed `ledger` in subprocesses,
real JAX cache dirs; the jax bump from real probe rows with their key components,
moved to a new jax version."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.report.text import significant

from .conftest import query, write_json

LEDGER = shutil.which("ledger", path=str(Path(sys.executable).parent)) or "ledger"
# the probe's own defaults make every compile cacheable; a job may not
ENV = {k: v for k, v in os.environ.items()
       if k not in ("XLA_FLAGS", "JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS")}
ALWAYS = "0 ok, 0 regression, 0 inconclusive, 0 went-cold"


def ledger(*args, env=None, ok=(0,)):
    run = subprocess.run([LEDGER, *map(str, args)], capture_output=True, text=True, env=env or ENV, check=False)
    assert run.returncode in ok, (args, run.returncode, run.stdout, run.stderr)
    return run


def probe(db, tag, cache_dir=None, transforms=("jit",), env=None):
    dirs = ("--cache-dir", cache_dir) if cache_dir is not None else ()
    ledger("probe", "--objective", "toy", *(a for t in transforms for a in ("-t", t)), *dirs, "--tag", tag,
           "--db", db, env=env)
    return [r[0] for r in query(db, f"SELECT id FROM compile_records WHERE tag = '{tag}' ORDER BY id")]


@pytest.mark.jax
def test_a_pinned_warm_cell_probed_without_a_cache_dir_is_cache_off(any_db, tmp_path):
    cache = tmp_path / "cache"
    (cold,) = probe(any_db, "a", cache)
    (warm,) = probe(any_db, "b", cache)
    assert query(any_db, "SELECT cache_state FROM compile_records ORDER BY id") == [("cold",), ("warm",)]
    ledger("pins", "update", "--allow-loaded", "--db", any_db)  # a busy 2-core CI box is "loaded"
    (off,) = probe(any_db, "nocache")  # the job lost its cache setting
    check = ledger("check", "--db", any_db, ok=(1,))
    finding, summary = check.stdout.splitlines()
    assert finding.startswith("cache-off ") and " imaging/toy/synthetic jit (n_batch 8, batch_size 4): " in finding
    assert f": row {off} compiled with no cache dir, " in finding and "x pin " in finding
    assert finding.endswith(f": no cache dir since row {off} (cache_state none); the cell was warm under"
                            f" cache dir {cache} (last warm row {warm})")
    assert summary == f"check run 1 (tolerance 1.5x): {ALWAYS}, 1 cache-off"
    assert query(any_db, "SELECT verdict, row_id, pin_id FROM verdicts") == [("cache-off", off, 1)]
    assert query(any_db, "SELECT exit_code FROM check_runs") == [(1,)]
    explain = ledger("explain", off, "--db", any_db).stdout.splitlines()
    assert explain[-1] == (f"cause: cache-off: no cache dir since row {off} (cache_state none); the cell was warm"
                           f" under cache dir {cache} (last warm row {warm})")
    assert cold < warm < off
    # the report marks the cell, and a millisecond compile keeps its digits
    (w, c), = query(any_db, f"SELECT (SELECT compile_s FROM compile_records WHERE id = {warm}),"
                            f" (SELECT compile_s FROM compile_records WHERE id = {cold})")
    line = next(ln for ln in ledger("report", "--db", any_db).stdout.splitlines() if "| toy |" in ln or "toy /" in ln)
    assert line.startswith(f"| imaging / toy / synthetic | jit | {significant(w)}")
    assert f" | {significant(c)}" in line and " | cache-off | b | " in line
    assert significant(w) != f"{w:.2f}"  # a warm toy compile is milliseconds: 0.00 said nothing


@pytest.mark.jax
def test_three_cold_probes_on_three_fresh_dirs_fail_naming_the_dirs(any_db, tmp_path):
    dirs = [tmp_path / f"job{i}" for i in range(3)]  # a cache under each job's own $TMPDIR
    ids = [probe(any_db, f"job{i}", d)[0] for i, d in enumerate(dirs)]
    assert query(any_db, "SELECT DISTINCT cache_state FROM compile_records") == [("cold",)]
    check = ledger("check", "--db", any_db, ok=(1,))
    finding, summary = check.stdout.splitlines()
    assert finding.startswith("cache-not-reused local_cpu/")
    assert finding.endswith(f": row {ids[2]}: each run used a new directory: 3 cold runs in 3 distinct cache dirs"
                            f" ({', '.join(map(str, dirs))})")
    assert summary == f"check run 1 (tolerance 1.5x): {ALWAYS}, 1 cache-not-reused"
    assert query(any_db, "SELECT verdict, row_id, pin_id FROM verdicts") == [("cache-not-reused", ids[2], None)]
    assert ledger("explain", ids[2], "--db", any_db).stdout.splitlines()[-1] == "this fails the check"


@pytest.mark.jax
def test_entries_never_written_by_design_are_reported_and_do_not_fail(any_db, tmp_path):
    env = {**ENV, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "60"}  # nothing this small is ever written
    ids = [probe(any_db, t, tmp_path / "cache", env=env)[0] for t in ("a", "b")]
    assert query(any_db, "SELECT cache_state, cache_files_after, cache_min_compile_time_s FROM compile_records") == [
        ("cold", 0, 60.0)] * 2
    check = ledger("check", "--db", any_db)
    finding, summary = check.stdout.splitlines()
    assert finding.startswith("cache-not-reused local_cpu/")
    assert f": row {ids[1]}: 2 cold runs in {tmp_path / 'cache'}, never warm: the entries were never written, by" \
           " design: every compile (" in finding
    assert finding.endswith(" s) was under jax_persistent_cache_min_compile_time_secs 60, so there is nothing to"
                            " reuse [does not fail]")
    assert summary == f"check run 1 (tolerance 1.5x): {ALWAYS}, 1 cache-not-reused"
    assert query(any_db, "SELECT exit_code FROM check_runs") == [(0,)]


@pytest.mark.jax
def test_a_dir_that_lost_its_entries_fails(any_db, tmp_path):
    cache = tmp_path / "cache"
    first = probe(any_db, "a", cache)[0]
    shutil.rmtree(cache)  # a scratch purge between two jobs
    second = probe(any_db, "b", cache)[0]
    check = ledger("check", "--db", any_db, ok=(1,))
    assert check.stdout.splitlines()[0].endswith(
        f": row {second}: the same dir lost its entries: row {first} left 1 entries in {cache},"
        f" row {second} found 0 before its compile")


# -- a jax bump, from real probe rows moved to a new jax version ----------------------------

@pytest.fixture(scope="module")
def real_rows(tmp_path_factory) -> list[dict]:
    """A cold and a warm probe of two transforms: four real rows with key components."""
    tmp = tmp_path_factory.mktemp("bump")
    db = tmp / "ledger.db"
    for tag in ("cold", "warm"):
        probe(db, tag, tmp / "cache", transforms=("jit", "grad"))
    con_rows = query(db, "SELECT * FROM compile_records ORDER BY id")
    names = [r[1] for r in query(db, "PRAGMA table_info(compile_records)")]
    rows = [dict(zip(names, r)) for r in con_rows]
    assert [(r["transform"], r["cache_state"]) for r in rows] == [
        ("jit", "cold"), ("grad", "cold"), ("jit", "warm"), ("grad", "warm")]
    assert all("jax_lib version" in json.loads(r["cache_key_components"]) for r in rows)
    return [{k: v for k, v in r.items() if k not in ("id", "record_key") and v is not None} for r in rows]


def bumped(row: dict, jax: str, when: str, run: str) -> dict:
    """The row as a probe under another jax would write it: another jaxlib hash in
    the key's components, so another key."""
    parts = json.loads(row["cache_key_components"])
    parts["jax_lib version"] = hashlib.sha256(jax.encode()).hexdigest()
    return {**row, "jax_version": jax, "jaxlib_version": jax, "cache_key_components": json.dumps(parts),
            "cache_key": "bumped-" + hashlib.sha256((row["cache_key"] + jax).encode()).hexdigest(),
            "timestamp": when, "run_id": run, "mixed_precision": bool(row["mixed_precision"]),
            "x64": None if row["x64"] is None else bool(row["x64"])}


def imported(db, tmp_path, name, rows) -> list[int]:
    before = query(db, "SELECT coalesce(max(id), 0) FROM compile_records")[0][0]
    ledger("import", write_json(tmp_path / f"{name}.json", rows), "--db", db)
    return [r[0] for r in query(db, f"SELECT id FROM compile_records WHERE id > {before} ORDER BY id")]


@pytest.mark.jax
def test_a_jax_bump_is_reported_and_does_not_fail(any_db, tmp_path, real_rows):
    ledger("db", "upgrade", "--db", any_db)
    imported(any_db, tmp_path, "real", [{**r, "mixed_precision": bool(r["mixed_precision"]), "x64": None if r["x64"] is None else bool(r["x64"])}
                                        for r in real_rows])
    old, host = real_rows[0]["jax_version"], real_rows[0]["hostname"]
    new = "9.9.0"
    colds = [r for r in real_rows if r["cache_state"] == "cold"]
    first = imported(any_db, tmp_path, "bump1", [bumped(r, new, "2099-01-01T00:00:00", "bump1") for r in colds])
    check = ledger("check", "--db", any_db)
    assert check.stdout.splitlines() == [
        (f"jax-changed   jax {old} → {new} on local_cpu/{host}: 2 cells of `objective toy` recompile once (rows {first[0]}, {first[1]});"
         " expected after a bump, does not fail"),
        f"check run 1 (tolerance 1.5x): {ALWAYS}, 2 jax-changed"]
    assert query(any_db, "SELECT verdict, count(*) FROM verdicts GROUP BY verdict") == [("jax-changed", 2)]
    explain = ledger("explain", first[0], "--db", any_db).stdout.splitlines()
    assert explain[-1].startswith(f"cause: jax-changed: jax {old} → {new}: the first compile under the new jax is cold")

    # still cold on its second run under the new jax: an ordinary went-cold
    (again,) = imported(any_db, tmp_path, "bump2", [bumped(colds[0], new, "2099-01-02T00:00:00", "bump2")])
    lines = ledger("check", "--db", any_db, ok=(1,)).stdout.splitlines()
    assert lines[0].startswith(f"went-cold     local_cpu/{host} jax {new} imaging/toy/synthetic jit (n_batch 8, batch_size 4),"
                             " cache dir ")
    assert f": row {again} is cold: " in lines[0] and f"(still cold after 2 runs under jax {new}; " in lines[0]
    # the other cell's jax-changed was said by check run 1: counted, not listed again
    assert lines[1] == "1 finding in 1 line unchanged since check run 1: ledger check --verbose lists them"
    assert lines[2] == f"check run 2 (tolerance 1.5x): {ALWAYS.replace('0 went-cold', '1 went-cold')}, 1 jax-changed"

    # warm under the new jax: nothing left to say
    warms = [r for r in real_rows if r["cache_state"] == "warm"]
    imported(any_db, tmp_path, "bump3", [bumped(r, new, "2099-01-03T00:00:00", "bump3") for r in warms])
    assert ledger("check", "--db", any_db).stdout == f"check run 3 (tolerance 1.5x): {ALWAYS}\n"


# -- the batch shape is part of the cell -------------------------------------------------

def _shapes(db, tmp_path):
    """A sweep over n_batch 4 and 8: a warm row of each, the n_batch 8 one newer."""
    from .ledgers import add, rec

    return add(db, tmp_path, rec(transform="vmap_vag", n_batch=4, batch_size=2, compile_s=3.0),
               rec(transform="vmap_vag", n_batch=8, batch_size=2, compile_s=5.0, timestamp="2026-07-01T11:00:00"))


@pytest.mark.slow
def test_each_batch_shape_is_its_own_key_in_pins_check_and_report(db, tmp_path):
    from .ledgers import add, rec

    four, eight = _shapes(db, tmp_path)
    pins = ledger("pins", "update", "--db", db).stdout.splitlines()
    assert pins == [
        (f"new     local_cpu/node1 jax 0.10.2 imaging/mge/hst vmap_vag (n_batch 4, batch_size 2): row {four} 3s"
         " (t, 2026-07-01T10:00:00)"),
        (f"new     local_cpu/node1 jax 0.10.2 imaging/mge/hst vmap_vag (n_batch 8, batch_size 2): row {eight} 5s"
         " (t, 2026-07-01T11:00:00)"),
        "2 pins: 2 new, 0 repinned, 0 unchanged"]
    # 4.8 s is fine for n_batch 8, 1.6x for n_batch 4: judged by its own shape's pin
    (slow,) = add(db, tmp_path, rec(transform="vmap_vag", n_batch=4, batch_size=2, compile_s=4.8,
                                    timestamp="2026-07-02T10:00:00"))
    check = ledger("check", "--db", db, ok=(1,)).stdout.splitlines()
    assert check[0].startswith(f"regression    local_cpu/node1 jax 0.10.2 imaging/mge/hst vmap_vag (n_batch 4,"
                               f" batch_size 2): row {slow} compile_s 4.8s vs pin 3s")
    report = ledger("report", "--db", db).stdout
    assert "| imaging / mge / hst (n_batch 4, batch_size 2) | vmap_vag | 4.80 | - | - | 3.00 | regression |" in report
    assert "| imaging / mge / hst (n_batch 8, batch_size 2) | vmap_vag | 5.00 | - | - | 5.00 | - |" in report


def _forget_what_was_kept(db) -> None:
    import sqlite3

    con = sqlite3.connect(db)
    with con:
        for (name,) in con.execute("SELECT name FROM sqlite_master WHERE name LIKE '\\_ledger\\_stash%' ESCAPE '\\'"
                                   " AND type = 'table'").fetchall():
            con.execute(f'DROP TABLE "{name}"')
    con.close()


@pytest.mark.slow
def test_0008_splits_existing_pins_by_their_source_rows_shape(db, tmp_path):
    from .conftest import migrate

    four, eight = _shapes(db, tmp_path)
    ledger("pins", "update", "--db", db)
    migrate(db, "downgrade", "0007")  # as a 0007 ledger had it: one pin for both shapes
    _forget_what_was_kept(db)  # a ledger that never was at 0008: nothing kept aside to put back
    assert query(db, "SELECT row_id, pin_key FROM pins") == [
        (four, '["local_cpu","node1","0.10.2",false,"warm","imaging","mge","hst","vmap_vag"]')]
    migrate(db, "upgrade", "0008")
    assert query(db, "SELECT row_id, n_batch, batch_size, pin_key FROM pins") == [
        (four, 4, 2, '["local_cpu","node1","0.10.2",false,"warm","imaging","mge","hst","vmap_vag",4,2]')]
    assert query(db, "SELECT DISTINCT pin_key FROM pin_history") == query(db, "SELECT pin_key FROM pins")
    migrate(db, "upgrade", "head")  # 0011 and 0015: the cell gains function, input_signature and variant, NULL here
    assert query(db, "SELECT pin_key FROM pins") == [
        ('["local_cpu","node1","0.10.2",false,"warm","imaging","mge","hst","vmap_vag",null,null,null,4,2]',)]
    assert query(db, "SELECT DISTINCT pin_key FROM pin_history") == query(db, "SELECT pin_key FROM pins")
    assert ledger("pins", "update", "--db", db).stdout.splitlines()[-1] == "2 pins: 1 new, 0 repinned, 1 unchanged"
    assert query(db, "SELECT row_id FROM pins ORDER BY id") == [(four,), (eight,)]


@pytest.mark.slow
def test_0008_removes_a_pin_whose_source_row_is_gone_and_says_so(db, tmp_path):
    from .conftest import migrate

    four, _ = _shapes(db, tmp_path)
    ledger("pins", "update", "--db", db)
    migrate(db, "downgrade", "0007")
    _forget_what_was_kept(db)
    con = __import__("sqlite3").connect(db)
    with con:
        con.execute("DELETE FROM compile_records WHERE id = ?", (four,))
    con.close()
    migrate(db, "upgrade", "head")
    assert query(db, "SELECT count(*) FROM pins") == [(0,)]
    assert query(db, "SELECT action, old_row_id, old_compile_s FROM pin_history WHERE action <> 'pin'") == [
        ("unpinned-0008", four, 3.0)]


@pytest.mark.slow
def test_a_kept_pin_whose_row_was_deleted_below_0008_stays_gone(db, tmp_path):
    """What a downgrade kept aside comes back, except a pin whose source row an older
    tool deleted in between (migrations/ledger_stash.PINS_OF_ROWS)."""
    from .conftest import migrate

    four, eight = _shapes(db, tmp_path)
    ledger("pins", "update", "--db", db)
    assert query(db, "SELECT row_id FROM pins ORDER BY id") == [(four,), (eight,)]
    migrate(db, "downgrade", "0007")
    con = __import__("sqlite3").connect(db)
    with con:
        con.execute("DELETE FROM compile_records WHERE id = ?", (four,))
    con.close()
    migrate(db, "upgrade", "head")
    assert query(db, "SELECT row_id FROM pins") == [(eight,)]
    assert query(db, "SELECT count(*) FROM pins p LEFT JOIN compile_records r ON r.id = p.row_id"
                     " WHERE r.id IS NULL") == [(0,)]
