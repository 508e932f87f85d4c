"""The record contract (ledger/record.py) holds the table, the probe's record and the
export to one list of fields: a field added on one side only fails here, instead of
being dropped by the child-process reader or moved into provenance by the importer."""

from __future__ import annotations

import json

import sqlalchemy as sa

from ledger.record import COMPILE_FIELDS, PROBE_RECORD_FIELDS, blank_record
from ledger.storage.models import compile_records

from .conftest import CORPUS, query, run_cli

_SA = {str: sa.Text, float: sa.Float, int: sa.Integer, bool: sa.Boolean}


def test_table_columns_are_the_contract():
    columns = {c.name: type(c.type) for c in compile_records.columns}
    assert columns.pop("id") is sa.Integer and columns.pop("record_key") is sa.BigInteger
    assert list(columns) == list(COMPILE_FIELDS)
    assert columns == {name: _SA[kind] for name, kind in COMPILE_FIELDS.items()}


def test_migrated_table_has_the_contract_columns(db):
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    names = [r[1] for r in query(db, "PRAGMA table_info(compile_records)")]
    assert set(names) == {"id", "record_key", *COMPILE_FIELDS}


def test_probe_record_is_the_contract_less_record_kind():
    assert set(PROBE_RECORD_FIELDS) == set(COMPILE_FIELDS) - {"record_kind"}
    assert list(blank_record()) == list(PROBE_RECORD_FIELDS)


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


def test_a_real_probe_record_lands_field_for_field(db):
    """In process and through a child process (--isolate): the record the probe hands
    over has exactly the contract's fields, and each lands in its own column."""
    result = run_cli("probe", "-o", "toy", "-t", "jit,grad", "--isolate", "--steady-calls", "1",
                     "--model-type", "contract", "--db", db)
    assert result.exit_code == 0, result.output
    from probes import ProbeSpec, run_probe

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
