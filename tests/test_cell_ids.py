"""Each row's cell id (revision 0018, ledger/storage/cell_ids.py): every writer gives its
rows theirs, rows share an id exactly when they share a cell, the migration gives old
rows the ids new rows of the same cell get, and an ad-hoc change of a key column moves
the row to its new cell; on both backends."""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
import tempfile
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.record import LEGACY_FIELDS, STATELESS_KEY
from ledger.rows import key_text
from ledger.storage import cell_ids
from ledger.storage.open import open_ledger
from ledger.watch.keys import key_join_sql, pinned_rows_sql

from .conftest import examples, query, run_cli
from .ledgers import add, rec
from .writes import BACKENDS, apply, copy_by_hand, fresh, records

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"


def _revision(name: str):
    sys.path.insert(0, str(MIGRATIONS))  # where alembic finds ledger_stash
    try:
        spec = importlib.util.spec_from_file_location(f"rev{name[:4]}", MIGRATIONS / "versions" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(MIGRATIONS))


@pytest.mark.parametrize("revision", ["0018_cell_ids", "0025_cell_ids_checked_on_insert"])
@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_the_migration_and_the_writers_make_one_key_text(dialect, revision):
    """Old rows (0018's data step) and new rows (the writers) of one cell meet in one id
    only if both make its key alike, and 0025's trigger keeps a row's id only where its
    key is that one: each revision's frozen cell is today's."""
    rev = _revision(revision)
    assert tuple(rev.NAMES) == STATELESS_KEY == cell_ids.CELL_COLUMNS
    for table in ("", "compile_records", "NEW"):
        assert rev.key_sql(dialect, table) == cell_ids.key_sql(dialect, table)
    assert getattr(rev, "OWN_IDS", cell_ids.OWN_IDS) == cell_ids.OWN_IDS  # the setting the writers make


def _cells_hold(engine) -> None:
    """Every row has a cell whose values are the row's own, and rows share an id exactly
    when they share those values."""
    cols = ", ".join(f"r.{c}" for c in STATELESS_KEY)
    cell_cols = ", ".join(f"c.{c}" for c in STATELESS_KEY)
    with engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT r.id, r.cell_id, {cols}, {cell_cols} FROM compile_records r"
                                    " LEFT JOIN cells c ON c.id = r.cell_id")).all()
    n = len(STATELESS_KEY)
    by_values: dict[str, set] = {}
    for r in rows:
        assert r[1] is not None, f"row {r[0]} has no cell"
        mine = dict(zip(STATELESS_KEY, r[2:2 + n], strict=True))
        cell = dict(zip(STATELESS_KEY, r[2 + n:], strict=True))
        assert key_text(mine, STATELESS_KEY) == key_text(cell, STATELESS_KEY), f"row {r[0]} is in another cell"
        by_values.setdefault(key_text(mine, STATELESS_KEY), set()).add(r[1])
    assert all(len(ids) == 1 for ids in by_values.values())
    assert len({i for ids in by_values.values() for i in ids}) == len(by_values)
    with engine.connect() as conn:  # the cell's key is the one its rows' values make, in SQL
        d = conn.dialect.name
        assert conn.execute(sa.text(f"SELECT r.id FROM compile_records r JOIN cells c ON c.id = r.cell_id"
                                    f" WHERE c.key <> {cell_ids.key_sql(d, 'r')}")).all() == []


# the writes of test_cache_cells (import, probe, merge, ad-hoc deletes, updates and inserts)
# and ad-hoc updates of the cell's own columns, a hostile value among them
KEY_CHANGES = [
    "hostname = 'node2'", "transform = 'grad'", "mixed_precision = NOT mixed_precision", "variant = 2",
    "input_signature = 'f32[3]\n''quoted'''", "function = NULL"]
key_update = st.tuples(st.just("update"), st.integers(0, 7), st.sampled_from(KEY_CHANGES))
# a row copied by INSERT ... SELECT with a key column changed: its cell id copied too (revision 0025)
key_copy = st.tuples(st.just("copy"), st.integers(0, 7), st.sampled_from(KEY_CHANGES))
# legacy-only records: the importer's fast path (whole files checked a column at a time)
legacy = st.tuples(records, st.integers(1, 3)).map(
    lambda r: {k: v for k, v in r[0].items() if k in LEGACY_FIELDS} | {"n_batch": r[1]})
writes = st.one_of(
    st.tuples(st.just("import"), st.lists(records, min_size=1, max_size=4)),
    st.tuples(st.just("import"), st.lists(legacy, min_size=1, max_size=4)),
    st.tuples(st.just("probe"), records),
    st.tuples(st.just("merge"), st.lists(records, min_size=1, max_size=3)),
    st.tuples(st.just("fill-gap"), records),
    st.tuples(st.just("pins")),
    key_update,
    key_copy,
)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=examples(20), suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(ops=st.lists(writes, min_size=1, max_size=8))
def test_rows_share_a_cell_id_exactly_when_they_share_a_cell_after_any_writes(backend, ops):
    """What the writers give holds after each write; what a person's SQL did (an INSERT
    without an id, a key column changed) holds after the next `ledger check`."""
    with fresh(backend) as db, tempfile.TemporaryDirectory() as tmp:
        assert run_cli("db", "upgrade", "--db", db).exit_code == 0
        with open_ledger(str(db), "write") as ledger:
            by_hand = False
            for op in ops:
                apply(op, db, ledger.engine, Path(tmp))
                by_hand |= op[0] in ("fill-gap", "update", "copy")
                if not by_hand:  # every writer's rows have their cells as written, before any check
                    _cells_hold(ledger.engine)
            assert run_cli("check", "--db", db).exit_code in (0, 1)
            _cells_hold(ledger.engine)
            _pins_meet_their_rows_through_cells(ledger.engine)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_row_copied_by_hand_into_another_key_is_judged_against_that_keys_pin(backend, tmp_path):
    """A copy by INSERT ... SELECT with a key column changed carries the old row's cell id,
    which revision 0025 clears (after an import and a merge, which set its look aside for
    their batches): the copy is judged against its own key's pin, not the old key's."""
    with fresh(backend) as db:
        jit, _ = add(db, tmp_path, rec(), rec(transform="grad", compile_s=1.0))
        source = tmp_path / "source.db"
        add(source, tmp_path, rec(tag="merged", timestamp="2026-07-02T10:00:00"))
        assert run_cli("merge", source, "--db", db).exit_code == 0
        assert run_cli("pins", "update", "--db", db).exit_code == 0
        with open_ledger(str(db), "write") as ledger:
            copy_by_hand(ledger.engine, jit, "transform = 'grad'", "compile_s = 100.0", "tag = 'copy'",
                         "timestamp = '2026-07-03T10:00:00'")
        (copy,) = query(db, "SELECT max(id) FROM compile_records")[0]
        assert query(db, f"SELECT cell_id FROM compile_records WHERE id = {copy}") == [(None,)]
        assert run_cli("check", "--db", db).exit_code == 1
        (grad_pin,) = query(db, "SELECT id FROM pins WHERE transform = 'grad'")[0]
        assert query(db, "SELECT row_id, pin_id FROM verdicts WHERE verdict = 'regression'") == [(copy, grad_pin)]
        with open_ledger(str(db), "read") as ledger:
            _cells_hold(ledger.engine)


def _pins_meet_their_rows_through_cells(engine) -> None:
    """check's join of rows to pins (through the cell id) pairs exactly
    what the comparability key pairs."""
    with engine.connect() as conn:
        d = conn.dialect.name
        through = conn.execute(sa.text(f"SELECT r.id, p.id FROM {pinned_rows_sql(d)}")).all()
        direct = conn.execute(sa.text(f"SELECT r.id, p.id FROM compile_records r JOIN pins p"
                                      f" ON {key_join_sql('r', 'p', d)}")).all()
    assert sorted(through) == sorted(direct)


@pytest.mark.slow
def test_the_upgrade_gives_old_rows_the_cells_new_rows_of_them_get(tmp_path):
    db = tmp_path / "l.db"
    huge = "f32[" + "9," * 200_000 + "3]"  # a signature of 400 kB: a key of any length
    add(db, tmp_path, rec(), rec(transform="grad"), rec(input_signature=huge, tag="h"),
        rec(hostname="node'\nb", tag="q"))
    assert run_cli("db", "downgrade", "0017", "--db", db).exit_code == 0  # the rows, as before 0018
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    before = query(db, "SELECT id, cell_id FROM compile_records ORDER BY id")
    assert len({c for _, c in before}) == 4 and all(c is not None for _, c in before)
    # the same four cells again, written now: each meets its old id
    add(db, tmp_path, rec(tag="x"), rec(transform="grad", tag="x"), rec(input_signature=huge, tag="hx"),
        rec(hostname="node'\nb", tag="qx"))
    after = query(db, "SELECT cell_id FROM compile_records ORDER BY id")
    assert [c for (c,) in after[4:]] == [c for _, c in before]
    assert query(db, "SELECT count(*) FROM cells") == [(4,)]


@pytest.mark.slow
def test_a_blob_that_spells_a_text_is_its_cell_at_the_upgrade(tmp_path):
    """The upgrade numbers cells by their values as SQLite returns them (0018's one pass),
    where a BLOB and the text it spells are two; SQL's key text makes them one cell: the
    upgrade makes the cells from the key text then, numbered in the order of first rows."""
    db = tmp_path / "l.db"
    add(db, tmp_path, rec(transform="grad"), rec(), rec(tag="b"))
    assert run_cli("db", "downgrade", "0017", "--db", db).exit_code == 0
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE compile_records SET hardware = CAST(hardware AS BLOB) WHERE tag = 'b'")
    con.close()
    assert query(db, "SELECT typeof(hardware) FROM compile_records ORDER BY id") == [("text",), ("text",), ("blob",)]
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    assert query(db, "SELECT id, cell_id FROM compile_records ORDER BY id") == [(1, 1), (2, 2), (3, 2)]
    assert query(db, "SELECT id, transform FROM cells ORDER BY id") == [(1, "grad"), (2, "jit")]
    add(db, tmp_path, rec(tag="new"))  # a writer's row of that cell meets its id
    assert query(db, "SELECT cell_id FROM compile_records WHERE tag = 'new'") == [(2,)]


def test_a_row_inserted_by_hand_gets_its_cell_at_the_next_check(tmp_path):
    db = tmp_path / "l.db"
    add(db, tmp_path, rec())
    con = sqlite3.connect(db)
    with con:
        con.execute("INSERT INTO compile_records (transform, compile_s, hostname, hardware, jax_version,"
                    " mixed_precision, cache_state, status, timestamp) SELECT transform, 3.0, hostname, hardware,"
                    " jax_version, mixed_precision, 'warm', 'ok', '2026-07-09T10:00:00' FROM compile_records")
        con.execute("UPDATE compile_records SET hostname = 'elsewhere' WHERE id = 1")
    con.close()
    assert query(db, "SELECT id, cell_id FROM compile_records ORDER BY id") == [(1, None), (2, None)]
    assert run_cli("check", "--db", db).exit_code == 0
    (a,), (b,) = query(db, "SELECT cell_id FROM compile_records ORDER BY id")
    assert a is not None and b is not None and a != b
    assert query(db, f"SELECT hostname FROM cells WHERE id = {a}") == [("elsewhere",)]
