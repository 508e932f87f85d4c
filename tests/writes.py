"""The writes the property tests of kept state replay (tests/test_cache_cells.py,
tests/test_cell_ids.py, and the carried states' tests/test_streaks.py, tests/test_churn.py): every writer of compile rows (import, a probe's row, merge) and a
person's SQL (deletes, updates, inserts into old ids, copies of rows), on a fresh ledger of either backend."""

from __future__ import annotations

import tempfile
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from hypothesis import strategies as st

from ledger.storage.writer import add_compile_record

from .conftest import pg_database, run_cli
from .ledgers import add, rec

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
    st.tuples(st.just("pins")),
)
# each write, and whether a check folds the cells after it (and they are held to a
# recompute there), so writes land both between folds and in batches
operations = st.lists(st.tuples(write, st.booleans()), min_size=1, max_size=8)


@contextmanager
def fresh(backend: str):
    if backend == "postgresql":  # at head: each case upgrades (a no-op then) or adds through add()
        with pg_database(at_head=True) as db:
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


def copy_by_hand(engine, row_id: int, *changes: str) -> None:
    """A person's copy of a row with columns changed (each "column = expression"), in one
    INSERT ... SELECT: its cell id copied with the rest, whatever the changes."""
    from ledger.storage.models import compile_records

    changed = dict(c.split(" = ", 1) for c in changes)
    cols = [c.name for c in compile_records.columns if c.name not in ("id", "record_key")]
    picked = [changed.get(c, c) for c in cols]
    with engine.begin() as conn:
        conn.execute(sa.text(f"INSERT INTO compile_records ({', '.join(cols)}) SELECT {', '.join(picked)}"
                             " FROM compile_records WHERE id = :id"), {"id": row_id})


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
    elif kind == "pins":
        assert run_cli("pins", "update", "--db", db).exit_code == 0
    elif kind == "copy" and ids:
        copy_by_hand(engine, ids[args[0] % len(ids)], args[1])
    elif kind == "fill-gap" and ids:
        gaps = sorted(set(range(1, ids[-1])) - set(ids))
        if gaps:
            _raw_insert(engine, args[0], gaps[0])


def each_check_says_what_every_row_says(backend: str, batches: list[list[dict]], tmp: Path) -> None:
    """Import each batch into a fresh ledger and check: every check's findings, facts and
    all (what it carried from the check before included), equal those of a check that
    reads every row."""
    from ledger.storage.open import open_ledger
    from ledger.watch.check import run_check, stored_findings

    from .helpers import said_from_nothing, said_with_facts

    with fresh(backend) as db:
        for batch in batches:
            add(db, tmp, *batch)
            with open_ledger(str(db), "write") as ledger:
                result = run_check(ledger.engine)
                with ledger.engine.connect() as conn:
                    said = said_with_facts(stored_findings(conn, result.run_id))
                assert said == said_from_nothing(ledger.engine)
