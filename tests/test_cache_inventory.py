"""`ledger cache DIR`: a real cache dir made by a recorded program, read against what the
test reads from the files itself; synthetic entries for what JAX writes on a slow compile
(its whole seconds inside the compressed entry) and for eviction's -atime files."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import time
import zlib
from pathlib import Path

import pytest

from .conftest import query, run_cli
from .helpers import recorded
from .ledgers import made_quiet

PROGRAM = """
import jax, jax.numpy as jnp

@jax.jit
def loss(x):
    return jnp.sum(jnp.sin(x) ** 2)

print(float(loss(jnp.arange(8.0))))
"""
PERSIST = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1"}


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        h.update(p.name.encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def _entry(dir_path: Path, key: str, seconds: int, size: int = 5000) -> Path:
    """An entry as JAX writes it without zstandard: zlib of 4 big-endian bytes of compile
    seconds, then the executable."""
    path = dir_path / f"{key}-cache"
    path.write_bytes(zlib.compress(seconds.to_bytes(4, "big") + bytes(range(256)) * (size // 256)))
    return path


@pytest.mark.jax
@pytest.mark.slow
def test_a_recorded_programs_cache_dir_inventoried_as_the_files_and_rows_say(tmp_path):
    (tmp_path / "fit.py").write_text(PROGRAM)
    db, cache = tmp_path / "ledger.db", tmp_path / "cache"
    for _ in range(2):  # cold, then warm
        out = recorded(tmp_path, db, sys.executable, "fit.py", env=PERSIST)
        assert out.returncode == 0, out.stderr
    made_quiet(db)
    before = (_digest(cache), db.read_bytes())
    result = run_cli("cache", str(cache), "--json", "--db", db)
    assert result.exit_code == 0, result.output
    assert (_digest(cache), db.read_bytes()) == before  # read-only: the dir and the ledger as they were
    inv = json.loads(result.output)
    files = sorted(p for p in cache.iterdir() if p.name.endswith("-cache"))
    assert [e["key"] + "-cache" for e in inv["entries"]] == [p.name for p in files]
    assert [e["bytes"] for e in inv["entries"]] == [p.stat().st_size for p in files]
    header = [int.from_bytes(zlib.decompress(p.read_bytes())[:4], "big") for p in files]
    assert [e["jax_compile_s"] for e in inv["entries"]] == header
    # every entry was compiled once and hit once: the ledger's rows say so
    warm = dict(query(db, "SELECT cache_key, count(*) FROM compile_records WHERE cache_state = 'warm' GROUP BY 1"))
    assert {e["key"]: e["hits"] for e in inv["entries"]} == {e["key"]: warm.get(e["key"], 0) for e in inv["entries"]}
    loss = next(e for e in inv["entries"] if e["function"] == "jit_loss")
    assert loss["hits"] == 1 and loss["saved_s"] > 0 and loss["dead"] == [] and loss["saved_unknown"] == 0
    # one definition of seconds saved: the warm run's, as `ledger runs` says it, is the dir's
    warm_run = json.loads(run_cli("runs", "--json", "--db", db).output)[0]
    assert warm_run["warm"] == warm_run["compiles"] == sum(warm.values())
    assert warm_run["saved_s"] == pytest.approx(inv["totals"]["saved_s"], abs=1e-5)
    assert inv["totals"]["entries"] == len(files) and inv["totals"]["bytes"] == sum(p.stat().st_size for p in files)


def test_jax_recorded_seconds_atime_and_dead_weight_from_synthetic_entries(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    _entry(cache, "jit_fit-aaaa", 7)
    old = _entry(cache, "jit_old-bbbb", 2, size=20000)
    (cache / "jit_fit-aaaa-atime").write_bytes(time.time_ns().to_bytes(8, "little"))
    (cache / ".lockfile").write_bytes(b"")
    month_ago = time.time() - 40 * 86400
    import os

    os.utime(old, (month_ago, month_ago))
    result = run_cli("cache", str(cache), "--json")
    assert result.exit_code == 0, result.output
    inv = json.loads(result.output)
    assert inv["ledger"] is None and not (tmp_path / "none.db").exists()
    entries = {e["key"]: e for e in inv["entries"]}
    assert set(entries) == {"jit_fit-aaaa", "jit_old-bbbb"}  # not the -atime file, not the lock
    assert (entries["jit_fit-aaaa"]["jax_compile_s"], entries["jit_old-bbbb"]["jax_compile_s"]) == (7, 2)
    assert entries["jit_fit-aaaa"]["last_used"] is not None and entries["jit_fit-aaaa"]["dead"] == []
    assert entries["jit_old-bbbb"]["dead"] == ["unused"]  # no ledger: never called "never hit"
    assert inv["totals"]["jax_compile_s"] == 9 and inv["totals"]["dead_entries"] == 1
    text = run_cli("cache", str(cache)).output.splitlines()
    assert text[0] == f"cache dir {cache}: 2 entries, 0.00 MB; JAX recorded 9 s of compiles in them (whole seconds)"
    assert text[1].startswith("no ledger here")


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "missing", "error: no cache dir at {}"),
    (lambda p: (p / "f").write_text("x") and p / "f", "error: no cache dir at {}: it is a file"),
])
def test_not_a_dir_is_one_line(tmp_path, make, message):
    target = make(tmp_path)
    result = run_cli("cache", str(target), "--db", tmp_path / "l.db")
    assert (result.exit_code, result.output.strip()) == (1, message.format(target))


def test_a_corrupt_entry_is_said_and_the_rest_are_read(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    _entry(cache, "jit_ok-cccc", 3)
    (cache / "jit_bad-dddd-cache").write_bytes(b"not compressed at all")
    inv = json.loads(run_cli("cache", str(cache), "--json").output)
    assert {e["key"]: (e["jax_compile_s"], e["unread"]) for e in inv["entries"]} == {
        "jit_bad-dddd": (None, "unreadable: error"), "jit_ok-cccc": (3, None)}


def test_an_entry_is_credited_with_the_hits_of_its_own_dir_and_host_only(tmp_path, any_db, monkeypatch):
    from ledger.storage import sqlite_file

    from .ledgers import add, rec

    cache, copy = tmp_path / "cache", tmp_path / "copied-cache"
    cache.mkdir()
    key = "jit_loss-" + "a" * 64
    entry = _entry(cache, key, 3)
    month_ago = time.time() - 30 * 86400
    os.utime(entry, (month_ago, month_ago))
    here = socket.gethostname()
    link = tmp_path / "link"
    link.symlink_to(cache)
    mine = [rec(cache_key=key, cache_dir=str(cache), hostname=here, cache_state="cold", compile_s=4.0,
                timestamp="2026-07-01T10:00:00"),
            rec(cache_key=key, cache_dir=str(link), hostname=here, cache_state="warm", compile_s=1.0,
                timestamp="2026-07-02T10:00:00")]  # the same dir, through a link
    elsewhere = [rec(cache_key=key, cache_dir=str(cache), hostname="node7", cache_state="warm", compile_s=0.5,
                     timestamp=f"{time.strftime('%Y-%m-%d')}T00:00:00"),  # another node's /tmp of the same path
                 rec(cache_key=key, cache_dir=str(copy), hostname=here, cache_state="warm", compile_s=0.5,
                     timestamp=f"{time.strftime('%Y-%m-%d')}T00:00:01")]  # a copy of the dir
    add(any_db, tmp_path, *mine, *elsewhere)
    inv = json.loads(run_cli("cache", str(link), "--json", "--db", any_db).output)
    (item,) = inv["entries"]
    assert (item["hits"], item["saved_s"], item["last_used"][:10]) == (1, 3.0, "2026-07-02")
    assert inv["totals"]["ledger_rows"] == 2 and inv["cache_dir"] == str(cache)
    pruned = run_cli("cache", "prune", str(cache), "--unused-days", "7", "--db", any_db)
    assert pruned.output.startswith("removed jit_loss aaaaaaaaaaaa: "), pruned.output  # used elsewhere, not here
    assert query(any_db, "SELECT cache_dir, hits FROM cache_prunes") == [(str(cache), 1)]
    _entry(cache, key, 3)
    monkeypatch.setattr(sqlite_file, "filesystem_type", lambda path, mounts=None: "nfs4")
    shared = json.loads(run_cli("cache", str(cache), "--json", "--db", any_db).output)
    assert shared["entries"][0]["hits"] == 2  # on a network filesystem every node reads this one dir
