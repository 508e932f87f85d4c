"""Ledgers for tests to start from, built through the real commands (shared helpers:
a test module imports these, never another test module)."""

from __future__ import annotations

import random

from ledger.record import COMPILE_FIELDS, DURATION_FIELDS

from .conftest import CORPUS, PgDb, query, run_cli, write_json

# Derived, not kept by a downgrade: rebuilt from upto 0 by the next check (0009's docstring).
DERIVED = {"cache_cells", "cache_cells_state", "alembic_version"}

# One cell per model_type (the rest of the key held), on an unloaded host.
CELL = {"dataset_class": "imaging", "instrument": "hst", "n_batch": 1, "batch_size": 1, "mixed_precision": False,
        "host_cpu_count": 8, "host_load_avg_1m": 0.5, "host_load_avg_1m_after": 0.5}
RECORDED = {"function": "jit_loss", "input_signature": "f32[8]", "command": "python fit.py",
            "process_index": 0, "cache_not_persisted": "below-threshold", "function_kind": "jit"}


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


def _predictions(db, rnd: random.Random) -> None:
    from sqlalchemy import create_engine, insert

    from ledger.storage.models import predictions
    from ledger.storage.url import resolve_db_url

    rows = [{"cache_key": f"jit_loss-{rnd.randrange(10**6):x}", "predicted": state, "cause": cause,
             "expected_compile_s": 2.5, "expected_n": 3, "transform": "jit", "objective": "o",
             "mixed_precision": False, "hostname": "node1", "cache_dir": "/tmp/c", "after_row_id": 7,
             "created_at": "2026-07-04T10:00:00+00:00"}
            for state, cause in (("cold", "jax version"), ("warm", None), ("cold", None))]
    engine = create_engine(resolve_db_url(str(db)))
    with engine.begin() as conn:
        conn.execute(insert(predictions), rows)
    engine.dispose()


def tables(db) -> dict[str, list[tuple]]:
    """Every ledger table's rows, in id order (stash tables included: none may be left)."""
    names = [r[0] for r in query(db, "SELECT name FROM sqlite_master WHERE type = 'table'")] \
        if not isinstance(db, PgDb) else \
        [r[0] for r in query(db, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
    return {t: query(db, f"SELECT * FROM {t} ORDER BY 1") for t in sorted(set(names) - DERIVED)}
