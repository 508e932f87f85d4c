"""The record contract (ledger/record.py) holds the table, the probe's record and the
export to one list of fields: a field added on one side only fails here, instead of
being dropped by the child-process reader or moved into provenance by the importer."""

from __future__ import annotations

import json
import re

import pytest
import sqlalchemy as sa

from ledger.record import COMPILE_FIELDS, PROBE_RECORD_FIELDS, blank_record
from ledger.storage.models import compile_records

from .conftest import CORPUS, query, run_cli

_SA = {str: sa.Text, float: sa.Float, int: sa.Integer, bool: sa.Boolean}


def test_table_columns_are_the_contract():
    columns = {c.name: type(c.type) for c in compile_records.columns}
    # the id: 64-bit on PostgreSQL, SQLite's INTEGER PRIMARY KEY (its rowid) there
    from sqlalchemy.dialects import postgresql, sqlite

    ident = compile_records.c.id.type
    assert (ident.compile(dialect=sqlite.dialect()), ident.compile(dialect=postgresql.dialect())) == (
        "INTEGER", "BIGINT")
    columns.pop("id")
    assert columns.pop("record_key") is sa.BigInteger
    assert columns.pop("cell_id") is sa.BigInteger  # derived from the row (revision 0018), not a record's field
    assert list(columns) == list(COMPILE_FIELDS)
    assert columns == {name: _SA[kind] for name, kind in COMPILE_FIELDS.items()}


def test_migrated_table_has_the_contract_columns(db):
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    names = [r[1] for r in query(db, "PRAGMA table_info(compile_records)")]
    assert set(names) == {"id", "record_key", "cell_id", *COMPILE_FIELDS}


def test_probe_record_is_the_contract_less_record_kind():
    assert set(PROBE_RECORD_FIELDS) == set(COMPILE_FIELDS) - {"record_kind"}
    assert list(blank_record()) == list(PROBE_RECORD_FIELDS)


@pytest.mark.slow
def test_export_writes_every_contract_field_and_reimports_without_provenance(db, tmp_path):
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    exported = json.loads(run_cli("export", "--db", db).output)
    compile_recs = [r for r in exported if "compile_s" in r]
    assert compile_recs and all(list(r) == list(COMPILE_FIELDS) for r in compile_recs)
    header = run_cli("export", "--format", "csv", "--db", db).output.splitlines()[0]
    assert header.split(",") == list(COMPILE_FIELDS)
    # every exported field is a column again: nothing lands in provenance
    (tmp_path / "export.json").write_text(json.dumps(compile_recs))
    again = tmp_path / "again.db"
    assert run_cli("import", tmp_path / "export.json", "--db", again).exit_code == 0
    assert query(again, "SELECT count(*) FROM compile_records WHERE provenance IS NOT NULL") == [(0,)]


@pytest.mark.jax
def test_a_real_probe_record_lands_field_for_field(db):
    """In process and through a child process (--isolate): the record the probe hands
    over has exactly the contract's fields, and each lands in its own column."""
    result = run_cli("probe", "-o", "toy", "-t", "jit,grad", "--isolate", "--steady-calls", "1",
                     "--model-type", "contract", "--db", db)
    assert result.exit_code == 0, result.output
    from ledger.probes import ProbeSpec, run_probe

    handed: list[dict] = []
    run_probe(ProbeSpec.make(objective="toy", transforms="jit", steady_calls=1), on_record=handed.append)
    assert [list(r) for r in handed] == [list(PROBE_RECORD_FIELDS)]
    names = list(PROBE_RECORD_FIELDS)
    stored = query(db, f"SELECT {', '.join(names)} FROM compile_records ORDER BY id")
    assert [r[names.index("transform")] for r in stored] == ["jit", "grad"]
    for row in stored:
        filled = {n for n, v in zip(names, row) if v is not None}
        # what a probe always measures is stored, not dropped on the way
        assert {"trace_s", "compile_s", "first_s", "steady_s", "cache_state", "hostname",
                "host_cpu_count", "jax_version", "model_type", "run_id"} <= filled
        assert row[names.index("model_type")] == "contract"


# -- a recorded row's identity (revision 0012): which compile of which process ----------
RECORDED = {"transform": "recorded", "compile_s": 0.25, "hardware": "local_cpu", "hostname": "node1",
            "jax_version": "0.10.2", "mixed_precision": False, "timestamp": "2026-12-03T15:39:00",
            "run_id": "b51badee556f", "cache_state": "cold", "function": "jit_caustic",
            "input_signature": "f32[3] -> f32[3]", "process_index": 0, "cache_key": "jit_caustic-abc"}
PROBE = {"transform": "vag", "compile_s": 9.9, "hostname": "n1", "timestamp": "2026-12-01T10:00:00",
         "run_id": "r1", "phase": "cold", "cache_state": "cold"}


def test_a_row_without_pid_and_compile_index_keeps_the_key_it_had():
    """The keys compile_row gave before 0012 (computed then, written here): every
    existing row, probe rows and recorded rows alike, keeps its record_key, so a merge
    or a re-import across the revision finds the rows it already has."""
    from ledger.record_validation import compile_row

    assert compile_row(RECORDED)["record_key"] == -1306406742385409069
    assert compile_row(PROBE)["record_key"] == 3214504420565790325
    assert compile_row(dict(RECORDED, function_kind="jit"))["record_key"] == -1306406742385409069


def test_two_workers_compiling_the_same_thing_in_the_same_second_are_two_rows(db):
    from ledger.record_validation import compile_row
    from ledger.storage.open import open_ledger
    from ledger.storage.writer import add_compile_record

    a = dict(RECORDED, function_kind="jit", pid=4101, compile_index=0)
    b = dict(a, pid=4102)  # a second multiprocessing worker, also process_index 0
    keys = {compile_row(r)["record_key"] for r in (RECORDED, a, b, dict(a, compile_index=1))}
    assert len(keys) == 4
    with open_ledger(str(db), "write") as ledger:
        add_compile_record(ledger.engine, a)
        add_compile_record(ledger.engine, b)
    assert query(db, "SELECT function, function_kind, pid, compile_index FROM compile_records ORDER BY id") == [
        ("jit_caustic", "jit", 4101, 0), ("jit_caustic", "jit", 4102, 0)]
    # the same compile of the same process is one row: an import of it again adds nothing
    (db.parent / "again.json").write_text(json.dumps([a, b]))
    result = run_cli("import", db.parent / "again.json", "--db", db)
    assert result.exit_code == 0, result.output
    assert query(db, "SELECT count(*) FROM compile_records") == [(2,)]


def test_function_kind_pid_and_compile_index_are_validated():
    from ledger.record_validation import RecordError, compile_row

    for bad, says in ((dict(RECORDED, function_kind="lazy"), "function_kind 'lazy' is not one of eager, jit"),
                      (dict(RECORDED, pid=-1), "pid is negative (-1)"),
                      (dict(RECORDED, compile_index=-3), "compile_index is negative (-3)"),
                      (dict(RECORDED, compile_index="0"), "compile_index is not an integer ('0')"),
                      (dict(RECORDED, pid=1.5), "pid is not an integer (1.5)")):
        with pytest.raises(RecordError, match=f"^{re.escape(says)}$"):
            compile_row(bad)
    assert compile_row(dict(RECORDED, function_kind="eager", pid=0, compile_index=0))["compile_index"] == 0


def test_compile_counter_counts_each_process_from_zero():
    import os

    from ledger.compile_counter import CompileCounter

    counter = CompileCounter()
    me = os.getpid()
    assert [counter.next() for _ in range(3)] == [(me, 0), (me, 1), (me, 2)]
    assert counter.next() == (me, 3)


@pytest.mark.fork
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # JAX's at-fork warning, when a test imported it
def test_a_forked_worker_counts_its_own_compiles_from_zero():
    """multiprocessing's fork (Linux's default before Python 3.14): the worker inherits
    the recording's counter as it stood, and its first compile is its own 0."""
    import os

    from ledger.compile_counter import CompileCounter

    counter = CompileCounter()
    me = os.getpid()
    assert [counter.next() for _ in range(3)] == [(me, 0), (me, 1), (me, 2)]
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the worker: two compiles, reported, and gone without pytest's teardown
        try:
            os.write(write, json.dumps([counter.next(), counter.next()]).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        seen = json.loads(f.read())
    os.waitpid(child, 0)
    assert seen == [[child, 0], [child, 1]]
    assert counter.next() == (me, 3)
