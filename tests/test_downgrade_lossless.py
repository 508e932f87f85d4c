"""Downgrades are lossless: a ledger with every kind of row goes down to each older
revision and back up, and every table is what it was, row for row (SQLite and
PostgreSQL). What a revision would drop is kept aside (migrations/ledger_stash.py)."""

from __future__ import annotations

import random
import shutil

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ledger.record import COMPILE_FIELDS, DURATION_FIELDS
from ledger.storage.revisions import REVISIONS

from .conftest import CORPUS, PgDb, query, run_cli, write_json

# Derived, not kept: rebuilt from upto 0 by the next check (0009's docstring).
DERIVED = {"cache_cells", "cache_cells_state", "alembic_version"}
OLDER = list(REVISIONS[:-1])
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


def round_trip(db, down_to: str) -> None:
    down = run_cli("db", "downgrade", down_to, "--db", db)
    assert down.exit_code == 0, down.output
    up = run_cli("db", "upgrade", "--db", db)
    assert up.exit_code == 0, up.output


@pytest.fixture(scope="module")
def sqlite_ledger(tmp_path_factory):
    path = tmp_path_factory.mktemp("lossless")
    every_kind_of_row(path / "ledger.db", path, seed=1)
    return path / "ledger.db"


@pytest.mark.slow
@pytest.mark.parametrize("down_to", OLDER)
def test_down_to_each_revision_and_back_keeps_every_table(sqlite_ledger, tmp_path, down_to):
    db = tmp_path / "ledger.db"
    shutil.copy(sqlite_ledger, db)
    before = tables(db)
    assert before["pins"] and before["pin_history"] and before["verdicts"] and before["predictions"]
    assert query(db, "SELECT count(*) FROM compile_records WHERE function IS NOT NULL AND sweep_id IS NOT NULL")[0][0]
    round_trip(db, down_to)
    assert tables(db) == before


@pytest.mark.slow
# no shrinking: each example builds a ledger and migrates it (seconds); the seed says enough
@settings(max_examples=4, deadline=None, database=None, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n=st.integers(1, 8), down_to=st.sampled_from(OLDER))
def test_any_generated_ledger_survives_a_round_trip(tmp_path_factory, seed, n, down_to):
    path = tmp_path_factory.mktemp("gen")
    db = path / "ledger.db"
    every_kind_of_row(db, path, seed=seed, n=n)
    before = tables(db)
    round_trip(db, down_to)
    assert tables(db) == before


@pytest.mark.slow
@pytest.mark.parametrize("down_to", ["0010", "0009", "0005", "0001"])
def test_postgresql_down_and_back_keeps_every_table(pg_db, tmp_path, down_to):
    assert run_cli("db", "upgrade", "--db", pg_db).exit_code == 0
    every_kind_of_row(pg_db, tmp_path, seed=2)
    before = tables(pg_db)
    round_trip(pg_db, down_to)
    assert tables(pg_db) == before
