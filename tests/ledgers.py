"""Ledgers for tests to start from, built through the real commands (shared helpers:
a test module imports these, never another test module)."""

from __future__ import annotations

import atexit
import random
import shutil
import sqlite3
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from ledger.record import COMPILE_FIELDS, DURATION_FIELDS, LEGACY_FIELDS

from .conftest import CORPUS, PgDb, insert_legacy, migrate, pg_renew_at_head, query, run_cli, write_json

# Derived, not kept by a downgrade: rebuilt from upto 0 by the next check (0009's docstring).
DERIVED = {"cache_cells", "cache_cells_state", "alembic_version"}

# One cell per model_type (the rest of the key held), on an unloaded host.
CELL = {"dataset_class": "imaging", "instrument": "hst", "n_batch": 1, "batch_size": 1, "mixed_precision": False,
        "host_cpu_count": 8, "host_load_avg_1m": 0.5, "host_load_avg_1m_after": 0.5}
RECORDED = {"function": "jit_loss", "input_signature": "f32[8]", "command": "python fit.py",
            "process_index": 0, "cache_not_persisted": "below-threshold", "function_kind": "jit", "variant": 0,
            "call_site": "fit.py:12 <module>",
            "test_id": "tests/test_fit.py::test_loss[f32]", "test_phase": "call", "git_commit": "3f2a9c1b" * 5}


def _value(name: str, kind: type, rnd: random.Random):
    if name in DURATION_FIELDS:
        return round(rnd.uniform(0.001, 9.0), 6)
    if kind is bool:
        return rnd.random() < 0.5
    if kind is int:
        return rnd.randrange(1, 64)
    if kind is float:
        return round(rnd.uniform(0.0, 100.0), 6)
    return f"{name}-{rnd.randrange(4)}"


def _record(rnd: random.Random, i: int, state: str, **fixed) -> dict:
    """A record with every field of the contract set (sweep, provenance, recorded)."""
    rec = {name: _value(name, kind, rnd) for name, kind in COMPILE_FIELDS.items()}
    rec.update(record_kind="compile", cache_state=state, cache_state_source="measured", status="ok",
               error=None, timestamp=f"2026-07-{1 + i // 24:02d}T{i % 24:02d}:00:00+00:00",
               hostname="node1", hardware="local_cpu", jax_version="0.10.2", pid=1000 + i, compile_index=i,
               run_id=f"run-{i}", phase="cold" if state == "cold" else "warm", **CELL)
    rec.update(fixed)
    return rec


def _import(db, tmp_path, name: str, records: list[dict]) -> None:
    result = run_cli("import", write_json(tmp_path / "in" / f"{name}.json", records), "--db", db)
    assert result.exit_code == 0, result.output


def every_kind_of_row(db, tmp_path, seed: int, n: int = 6) -> None:
    """Legacy, probe and recorded rows with every column set; pins with history
    (pinned, then repinned to faster rows); check runs with verdicts; predictions."""
    rnd = random.Random(seed)
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    cells = [dict(model_type=f"m{k}", transform="jit", **(RECORDED if k % 2 else
             {k2: None for k2 in RECORDED})) for k in range(n)]
    _import(db, tmp_path, "a", [_record(rnd, i, "warm", **c, compile_s=2.0) for i, c in enumerate(cells)])
    assert run_cli("pins", "update", "--db", db).exit_code == 0
    _import(db, tmp_path, "b", [_record(rnd, 30 + i, "warm", **c, compile_s=1.0) for i, c in enumerate(cells)])
    assert run_cli("pins", "update", "--db", db).exit_code == 0
    _import(db, tmp_path, "c", [_record(rnd, 60 + i, "cold", **c) for i, c in enumerate(cells[:2])])
    assert run_cli("check", "--db", db).exit_code in (0, 1)
    _predictions(db, rnd)
    _prunes(db, rnd)
    _processes(db, rnd)
    _test_pins(db, rnd)


def _processes(db, rnd: random.Random) -> None:
    """Two processes of one recorded run, one seen to its exit, one killed (revision 0016)."""
    from ledger.storage.models import recorded_processes

    rows = [{"run_id": "run-1", "hostname": "node1", "pid": 1000 + i, "started": "2026-07-01T01:00:00.250000+00:00",
             "ended": None if i else "2026-07-01T01:00:23.000000+00:00", "wall_s": None if i else 22.75,
             "ended_by": "last seen" if i else "exit"} for i in range(2)]
    rows[1]["ended"], rows[1]["wall_s"] = "2026-07-01T01:00:03.500000+00:00", round(rnd.uniform(1, 3), 6)
    _insert(db, recorded_processes, rows)


def _prunes(db, rnd: random.Random) -> None:
    """Two entries `ledger cache prune` removed (revision 0014)."""
    from ledger.storage.models import cache_prunes

    rows = [{"cache_dir": "/tmp/c", "cache_key": f"jit_loss-{rnd.randrange(10**6):x}", "entry": f"e{i}-cache",
             "bytes": rnd.randrange(1, 10**9), "jax_compile_s": 3.0, "hits": i, "saved_s": 2.5 * i,
             "last_used": None if i else "2026-07-02T10:00:00+00:00", "reason": "unused 40 days",
             "hostname": "node1", "pruned_at": "2026-07-05T10:00:00+00:00"} for i in range(2)]
    _insert(db, cache_prunes, rows)


def _test_pins(db, rnd: random.Random) -> None:
    """A test's compile counts as `pytest --ledger-pin` keeps them (revision 0017), and a
    test pinned compiling nothing."""
    from ledger.storage.models import test_pins

    rows = [{"test_id": test, "function": function, "compiles": n, "run_id": f"s{rnd.randrange(10**6):x}",
             "git_commit": None if n else "ab12", "pinned_at": "2026-07-06T10:00:00+00:00"}
            for test, function, n in (("t.py::test_a", "jit_loss", 2), ("t.py::test_a", "jit_add", 1),
                                       ("t.py::test_b[x]", "", 0))]
    _insert(db, test_pins, rows)


def _insert(db, table, rows: list[dict]) -> None:
    from sqlalchemy import create_engine, insert

    from ledger.storage.url import resolve_db_url

    engine = create_engine(resolve_db_url(str(db)))
    with engine.begin() as conn:
        conn.execute(insert(table), rows)
    engine.dispose()


def _predictions(db, rnd: random.Random) -> None:

    from ledger.storage.models import predictions

    rows = [{"cache_key": f"jit_loss-{rnd.randrange(10**6):x}", "predicted": state, "cause": cause,
             "expected_compile_s": 2.5, "expected_n": 3, "transform": "jit", "objective": "o",
             "mixed_precision": False, "hostname": "node1", "cache_dir": "/tmp/c", "after_row_id": 7,
             "created_at": "2026-07-04T10:00:00+00:00"}
            for state, cause in (("cold", "jax version"), ("warm", None), ("cold", None))]
    _insert(db, predictions, rows)


def tables(db) -> dict[str, list[tuple]]:
    """Every ledger table's rows, in id order (stash tables included: none may be left)."""
    names = [r[0] for r in query(db, "SELECT name FROM sqlite_master WHERE type = 'table'")] \
        if not isinstance(db, PgDb) else \
        [r[0] for r in query(db, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
    return {t: query(db, f"SELECT * FROM {t} ORDER BY 1") for t in sorted(set(names) - DERIVED)}


# -- rows one at a time: a record like the field's, imported; a corpus row copied ------------

BASE = {
    "transform": "jit", "trace_s": 0.5, "compile_s": 2.0, "first_s": 0.1, "steady_s": 0.01,
    "dataset_class": "imaging", "model_type": "mge", "instrument": "hst", "ndim": 15, "n_batch": 1,
    "batch_size": 1, "hardware": "local_cpu", "jax_version": "0.10.2", "cache_dir": "/tmp/jax-cache",
    "mixed_precision": False, "tag": "t", "hostname": "node1", "timestamp": "2026-07-01T10:00:00",
    "cache_state": "warm", "status": "ok", "host_cpu_count": 8, "host_load_avg_1m": 1.0,
}


def rec(**fields) -> dict:
    """A warm probe record of one cell (BASE), with `fields` changed."""
    return {**BASE, **fields}


_files = iter(range(10**6))


_HEAD: list[Path] = []


def _at_head(db: Path) -> None:
    """A new SQLite ledger at head: a copy of one the real revision chain built once in
    this process. The chain costs 70 ms of CPU a ledger, most of a fast case when a case
    starts two; a ledger's first write running the chain is tested where it is the
    subject (test_migrations.py, test_import.py, and every CLI case that writes to a
    new --db)."""
    if not _HEAD:
        where = Path(tempfile.mkdtemp(prefix="ledger-head-"))
        atexit.register(shutil.rmtree, where, True)
        _HEAD.append(migrate(where / "head.db", "upgrade", "head"))
    db.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_HEAD[0], db)


def at_head(db) -> None:
    """`db` made a fresh ledger at head on its backend, as add() starts one: a copy of one
    the chain built (for a case whose subject is not the revision chain)."""
    if isinstance(db, PgDb):
        pg_renew_at_head(db)
    else:
        _at_head(db)


def add(db, tmp_path, *records) -> list[int]:
    """Import the records (a real `ledger import`) into a SQLite file or a PostgreSQL
    database; returns the new rows' ids. A new SQLite file or an empty PostgreSQL
    database starts at head, a copy of one the chain built (_at_head, pg_renew_at_head)."""
    if isinstance(db, PgDb):  # a fresh PostgreSQL database has no tables yet: a copy at head
        if query(db, "SELECT to_regclass('alembic_version') IS NULL") == [(True,)]:
            pg_renew_at_head(db)
    elif not db.exists():
        _at_head(db)
    before = query(db, "SELECT coalesce(max(id), 0) FROM compile_records")[0][0] if _exists(db) else 0
    result = run_cli("import", write_json(tmp_path / "in" / f"r{next(_files)}.json", list(records)), "--db", db)
    assert result.exit_code == 0, result.output
    return [r[0] for r in query(db, f"SELECT id FROM compile_records WHERE id > {int(before)} ORDER BY id")]


def _exists(db) -> bool:
    return isinstance(db, PgDb) or db.exists()


def insert_legacy_any(any_db, records) -> None:
    """The legacy columns of `records` inserted as they are (no importer, no backfill), on
    a SQLite file or a PostgreSQL database: what an old ledger held."""
    if not isinstance(any_db, PgDb):
        return insert_legacy(any_db, records)
    import psycopg

    cols = list(LEGACY_FIELDS)
    with psycopg.connect(any_db.conninfo) as con:
        con.cursor().executemany(
            f"INSERT INTO compile_records ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))})",
            [tuple(r.get(c) for c in cols) for r in records])


def add_row(db, like_tag: str, like_transform: str, **changes) -> int:
    """A copy of one corpus row with `changes`: a new measurement of the same key."""
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    with con:
        src = dict(con.execute("SELECT * FROM compile_records WHERE tag = ? AND transform = ? ORDER BY id LIMIT 1",
                               (like_tag, like_transform)).fetchone())
        src.update(id=None, record_key=None, **changes)
        cols = list(src)
        cur = con.execute(f"INSERT INTO compile_records ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                          [src[c] for c in cols])
    con.close()
    return cur.lastrowid


def add_verdict(db, run_id: int, row_id: int, verdict: str) -> None:
    """A verdict on a row, under check run `run_id` (made if it is not there)."""
    con = sqlite3.connect(db)
    with con:
        con.execute("INSERT OR IGNORE INTO check_runs (id, checked_at, tolerance, exit_code) VALUES (?, ?, 1.5, 0)",
                    (run_id, f"2026-08-0{run_id}T00:00:00"))
        con.execute("INSERT INTO verdicts (check_run_id, row_id, verdict, checked_at) VALUES (?, ?, ?, 'x')",
                    (run_id, row_id, verdict))
    con.close()


START = datetime(2026, 7, 1, tzinfo=timezone.utc)
RECORDED_COLS = ("transform", "compile_s", "hardware", "jax_version", "cache_dir", "mixed_precision", "hostname",
                 "timestamp", "cache_state", "status", "run_id", "function", "input_signature", "command",
                 "function_kind", "pid", "compile_index")


def recorded_runs(db, runs: int, compiles: int, functions: int = 61) -> None:
    """A SQLite ledger at head holding `runs` recorded runs of one program of `compiles`
    compiles each: `functions` of its own, the rest eager primitives; one run in five
    cold. What one field likelihood script gave, recorded `runs` times."""
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    rnd = random.Random(0)
    rows = []
    for r in range(runs):
        state = "cold" if r % 5 == 0 else "warm"
        for i in range(compiles):
            own = i < functions
            rows.append(("recorded", (2.0 if state == "cold" else 0.05) * (1 + rnd.random()), "local_cpu", "0.10.2",
                         "/c", False, "node1", (START + timedelta(hours=r)).isoformat(), state, "ok",
                         f"run{r:05d}", f"jit_fn{i}" if own else f"jit_prim{i % 40}", f"f32[{i}]", "python fit.py",
                         "jit" if own else "eager", 1000 + r, i))
    con = sqlite3.connect(db)
    with con:
        con.executemany(f"INSERT INTO compile_records ({', '.join(RECORDED_COLS)})"
                        f" VALUES ({', '.join('?' * len(RECORDED_COLS))})", rows)
    con.close()


def made_quiet(db) -> None:
    """Every compile row of ``db`` measured on a quiet host (load 0): the tests' 2-core box,
    shared, is loaded more often than not, and a cold row on a loaded host has no cost
    (ledger/savings.py). For tests of what is saved, not of the loaded-host rule."""
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE compile_records SET host_load_avg_1m = 0")
    con.close()


def every_finding_kind(db, tmp_path) -> dict[str, int]:
    """A ledger with every finding kind: the rows each kind is found on, by its name."""
    t = iter(f"2026-07-{d:02d}T10:00:00" for d in range(1, 29))
    add(db, tmp_path, *(rec(transform=tr, timestamp=next(t)) for tr in ("jit", "grad", "vmap", "laxmap_vag", "pyloop_vag")))
    assert run_cli("pins", "update", "--db", db).exit_code == 0
    never = {"cache_state": "cold", "model_type": "knn", "cache_files_before": 3, "cache_files_after": 3,
             "cache_min_compile_time_s": 1.0, "compile_s": 0.5}
    ids = add(db, tmp_path,
              rec(compile_s=20.0, timestamp=next(t)),  # regression
              rec(transform="grad", cache_state="cold", compile_s=9.0, timestamp=next(t)),  # went-cold
              rec(transform="vmap", cache_dir="", cache_state="none", compile_s=9.0, timestamp=next(t)),  # cache-off
              rec(transform="vmap", cache_dir="", cache_state="none", compile_s=9.0, timestamp=next(t)),
              rec(transform="vag", model_type="knn", cache_state="cold", cache_dir="/j1", timestamp=next(t)),
              rec(transform="vag", model_type="knn", cache_state="cold", cache_dir="/j2", timestamp=next(t)),
              rec(**never, timestamp=next(t)), rec(**never, timestamp=next(t)),  # not reused, by design
              rec(transform="laxmap_vag", jax_version="0.10.3", cache_state="cold", timestamp=next(t)),  # jax bump
              rec(transform="pyloop_vag", jax_version="0.10.3", cache_state="cold", timestamp=next(t)),
              rec(transform="pyloop_vag", jax_version="0.10.3", cache_state="cold", timestamp=next(t)))
    return {"regression": ids[0], "went-cold": ids[1], "cache-off": ids[2], "cache-not-reused": ids[5],
            "by design": ids[7], "jax-changed": ids[8], "still cold": ids[10], "next": next(t)}
