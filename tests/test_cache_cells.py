"""The kept cache cells (ledger/watch/cells.py, revision 0009) against a from-scratch
recompute, after any sequence of imports, probe rows, merges, deletes, updates and
inserts into old ids, on both backends; and the stale-state bugs they exist to stop,
each as a real check."""

from __future__ import annotations

import sqlite3
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.storage.open import open_ledger
from ledger.storage.writer import add_compile_record
from ledger.watch import cells

from .conftest import pg_database, query, run_cli
from .test_pins import add, rec

BACKENDS = ["sqlite", "postgresql"]

# Small domains, so cells collide, timestamps tie and every state meets every other.
records = st.builds(
    rec,
    transform=st.sampled_from(["jit", "grad"]),
    hostname=st.sampled_from(["node1", "node2"]),
    cache_dir=st.sampled_from(["", "/c1", "/c2"]),
    cache_state=st.sampled_from(["warm", "cold", "none", "unknown"]),
    status=st.sampled_from(["ok", "ok", "failed"]),
    timestamp=st.sampled_from(["2026-07-01T10:00:00", "2026-07-02T10:00:00", "2026-07-03T10:00:00"]),
    mixed_precision=st.booleans(),
    compile_s=st.sampled_from([0.5, 2.0, 9.0]),
    tag=st.sampled_from(["a", "b", "c", "d"]),  # tells otherwise equal records apart
)
write = st.one_of(
    st.tuples(st.just("import"), st.lists(records, min_size=1, max_size=4)),
    st.tuples(st.just("probe"), records),
    st.tuples(st.just("merge"), st.lists(records, min_size=1, max_size=3)),
    st.tuples(st.just("delete"), st.integers(0, 7)),
    st.tuples(st.just("update"), st.integers(0, 7), st.sampled_from(["status = 'failed'", "cache_state = 'warm'",
                                                                    "cache_state = 'cold'", "cache_dir = '/c3'"])),
    st.tuples(st.just("fill-gap"), records),
)
# each write, and whether a check folds the cells after it (and they are held to a
# recompute there), so writes land both between folds and in batches
operations = st.lists(st.tuples(write, st.booleans()), min_size=1, max_size=8)


@contextmanager
def fresh(backend: str):
    if backend == "postgresql":
        with pg_database() as db:
            yield db
    else:
        with tempfile.TemporaryDirectory() as tmp:
            yield Path(tmp) / "ledger.db"


def _ids(engine) -> list[int]:
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(sa.text("SELECT id FROM compile_records ORDER BY id"))]


def _raw_insert(engine, record: dict, row_id: int) -> None:
    """A person's ad-hoc INSERT at an id of their choosing."""
    cols = ["id", *(c for c in record if c not in ("trace_s", "first_s", "steady_s", "ndim"))]
    with engine.begin() as conn:
        conn.execute(sa.text(f"INSERT INTO compile_records ({', '.join(cols)}) VALUES"
                             f" ({', '.join(':' + c for c in cols)})"), {**record, "id": row_id})


def apply(op: tuple, db, engine, tmp: Path) -> None:
    kind, *args = op
    ids = _ids(engine)
    if kind == "import":
        add(db, tmp, *args[0])
    elif kind == "probe":
        # a probe's row carries its run id, so it is never the same record as an imported one
        add_compile_record(engine, {**args[0], "cache_state_source": "measured_events", "run_id": f"run{len(ids)}"})
    elif kind == "merge":
        source = tmp / f"source{len(ids)}.db"
        add(source, tmp, *args[0])
        assert run_cli("merge", source, "--db", db).exit_code == 0
    elif kind in ("delete", "update") and ids:
        with engine.begin() as conn:
            what = "DELETE FROM compile_records" if kind == "delete" else f"UPDATE compile_records SET {args[1]}"
            conn.execute(sa.text(f"{what} WHERE id = :id"), {"id": ids[args[0] % len(ids)]})
    elif kind == "fill-gap" and ids:
        gaps = sorted(set(range(1, ids[-1])) - set(ids))
        if gaps:
            _raw_insert(engine, args[0], gaps[0])


def assert_cells_match_a_recompute(engine) -> None:
    with engine.begin() as conn:
        cells.fold(conn)
    with engine.connect() as conn:
        assert cells.stored(conn) == cells.summarize(conn)
        top = conn.execute(sa.text("SELECT COALESCE(MAX(id), 0) FROM compile_records")).scalar()
        assert conn.execute(sa.text("SELECT upto FROM cache_cells_state")).scalar() == top


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_kept_cells_equal_a_recompute_after_any_writes(backend, ops):
    with fresh(backend) as db, tempfile.TemporaryDirectory() as tmp:
        assert run_cli("db", "upgrade", "--db", db).exit_code == 0
        with open_ledger(str(db), "write") as ledger:
            for op, check_after in ops:
                apply(op, db, ledger.engine, Path(tmp))
                if check_after:
                    assert_cells_match_a_recompute(ledger.engine)
            assert_cells_match_a_recompute(ledger.engine)


# -- the stale states a kept summary could show, each through a real check --------------

def _check(db) -> str:
    return run_cli("check", "--db", db).output


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deleted_cold_row_is_no_longer_a_went_cold(backend, tmp_path):
    with fresh(backend) as db:
        add(db, tmp_path, rec(), rec(cache_state="cold", compile_s=9.0, timestamp="2026-07-02T10:00:00"))
        assert _check(db).startswith("went-cold ")
        with open_ledger(str(db), "write") as ledger, ledger.engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM compile_records WHERE cache_state = 'cold'"))
        assert _check(db) == "check run 2 (tolerance 1.5x): 0 ok, 0 regression, 0 inconclusive, 0 went-cold\n"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_row_marked_failed_afterwards_leaves_its_cell(backend, tmp_path):
    with fresh(backend) as db:
        add(db, tmp_path, rec(), rec(cache_state="cold", compile_s=9.0, timestamp="2026-07-02T10:00:00"))
        assert _check(db).startswith("went-cold ")
        with open_ledger(str(db), "write") as ledger, ledger.engine.begin() as conn:
            conn.execute(sa.text("UPDATE compile_records SET status = 'failed' WHERE cache_state = 'cold'"))
        assert _check(db) == "check run 2 (tolerance 1.5x): 0 ok, 0 regression, 0 inconclusive, 0 went-cold\n"


def test_a_row_inserted_below_the_fold_is_folded(tmp_path):
    db = tmp_path / "ledger.db"
    add(db, tmp_path, rec(), rec(tag="gone", timestamp="2026-07-02T10:00:00"),
        rec(tag="warm again", timestamp="2026-07-03T10:00:00"))
    con = sqlite3.connect(db)
    with con:
        con.execute("DELETE FROM compile_records WHERE tag = 'gone'")
    con.close()
    assert _check(db) == "check run 1 (tolerance 1.5x): 0 ok, 0 regression, 0 inconclusive, 0 went-cold\n"
    assert query(db, "SELECT upto FROM cache_cells_state") == [(3,)]
    con = sqlite3.connect(db)
    with con:  # a cold row at the freed id 2, newer than everything: the cell's newest
        con.execute("INSERT INTO compile_records (id, transform, dataset_class, model_type, instrument, n_batch,"
                    " batch_size, hardware, jax_version, cache_dir, mixed_precision, hostname, timestamp, cache_state,"
                    " status, compile_s) SELECT 2, transform, dataset_class, model_type, instrument, n_batch,"
                    " batch_size, hardware, jax_version, cache_dir, mixed_precision, hostname, '2026-07-04T10:00:00',"
                    " 'cold', 'ok', 9.0 FROM compile_records WHERE id = 1")
    con.close()
    assert query(db, "SELECT upto FROM cache_cells_state") == [(0,)]  # the insert trigger reset the fold
    assert _check(db).startswith("went-cold ")


def test_a_check_folds_only_the_new_rows_and_the_cells_say_so(tmp_path):
    db = tmp_path / "ledger.db"
    add(db, tmp_path, rec(), rec(transform="grad", cache_state="cold"))
    _check(db)
    assert query(db, "SELECT upto FROM cache_cells_state") == [(2,)]
    assert query(db, "SELECT n_cold, first_cold IS NOT NULL FROM cache_cells ORDER BY n_cold") == [(0, 0), (1, 1)]
    add(db, tmp_path, rec(transform="grad", cache_state="cold", timestamp="2026-07-02T10:00:00"))
    _check(db)
    assert query(db, "SELECT upto FROM cache_cells_state") == [(3,)]
    assert query(db, "SELECT n_cold FROM cache_cells ORDER BY n_cold") == [(0,), (2,)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_triggers_are_there_at_head_and_gone_below_0009(backend):
    with fresh(backend) as db:
        assert run_cli("db", "upgrade", "--db", db).exit_code == 0
        sql = ("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name" if backend == "sqlite" else
               "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY tgname")
        names = ["cache_cells_on_delete", "cache_cells_on_insert"] + (
            ["cache_cells_on_truncate"] if backend == "postgresql" else []) + ["cache_cells_on_update"]
        assert [r[0] for r in query(db, sql)] == names
        assert run_cli("db", "downgrade", "0008", "--db", db).exit_code == 0
        assert query(db, sql) == []
        assert run_cli("db", "upgrade", "--db", db).exit_code == 0
        assert [r[0] for r in query(db, sql)] == names

