"""`ledger merge` of a source changed by hand or by an older writer: every row is checked
by the record contract's one validator (ledger/record_validation.py), as `ledger import`
checks a record, on a SQLite and a PostgreSQL destination (`any_db`).

The properties, whatever a source row holds:
  - a refused row is one line naming the source, the row's id and the field, exit 1,
    and the destination is as it was (every row of every table);
  - what is merged passes the validator, and `ledger check`, `pins update`, `report`
    (markdown and HTML) and `export` run on it without a traceback.

The named cases are the ones found by hand (each merged with exit 0 before); the
hypothesis property writes arbitrary values into a source row's columns.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import uuid
import warnings

import pytest
from hypothesis import event, example, given, reject, settings
from hypothesis import strategies as st

from ledger.record import COMPILE_FIELDS, INSTRUMENT_COLUMNS
from ledger.record_validation import INT64, compile_row, instrument_row

from .conftest import CORPUS, PgDb, examples, query, run_cli, write_json
from .helpers import SETTINGS, STAMP
from .helpers import no_exception as _no_exception

CPU, GPU = CORPUS / "local_cpu", CORPUS / "local_gpu_NVIDIA_A100_80GB_PCIe"
TABLES = ("compile_records", "instrument_records", "pins", "pin_history", "check_runs", "verdicts",
          "cache_prunes")


def _fingerprint(db) -> list:
    return [query(db, f"SELECT * FROM {t} ORDER BY id") for t in TABLES]


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """A node's ledger: local_cpu imported and pinned, in rollback-journal mode so a copy
    of the file alone is the whole ledger."""
    path = tmp_path_factory.mktemp("node") / "node.db"
    assert run_cli("import", CPU, "--db", path).exit_code == 0
    assert run_cli("pins", "update", "--db", path).exit_code == 0
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode = DELETE")
    con.close()
    return path


def _source(node, tmp_path, sql: str, params=()) -> tuple:
    """A copy of the node with one change; (path, the changed row's id)."""
    src = tmp_path / f"src-{uuid.uuid4().hex[:8]}.db"
    shutil.copy(node, src)
    con = sqlite3.connect(src)
    try:
        with con:
            con.execute(sql, params)
    finally:
        con.close()
    return src


def _pinned_row(node) -> int:
    return query(node, "SELECT min(row_id) FROM pins")[0][0]


def _sibling(node) -> int:
    return query(node, "SELECT min(id) FROM instrument_records")[0][0]


# (table, column, SQL value, the validator's words)
REFUSED = [
    ("compile_records", "compile_s", "'slow'", "compile_s is not a number ('slow')"),
    ("compile_records", "compile_s", "9e999", "compile_s is not a finite number (inf)"),
    ("compile_records", "first_s", "x'00ff'", r"first_s is not a number (b'\x00\xff')"),
    ("compile_records", "cache_state", "'bogus-state'", "cache_state 'bogus-state' is not one of cold, warm, none, unknown"),
    ("compile_records", "status", "'weird'", "status 'weird' is not one of ok, failed"),
    ("compile_records", "ndim", "'many'", "ndim is not an integer ('many')"),
    ("compile_records", "ndim", "1e300", f"ndim is out of the 64-bit integer range ({repr(int(1e300))[:57]}...)"),
    ("compile_records", "mixed_precision", "'yes'", "mixed_precision is not true/false ('yes')"),
    ("compile_records", "tag", "CAST(x'41ff42' AS TEXT)", "tag is not storable text (a NUL character or invalid UTF-8)"),
    ("compile_records", "hostname", "'a' || char(0) || 'b'", "hostname is not storable text (a NUL character or invalid UTF-8)"),
    ("compile_records", "record_key", "'abc'", "record_key is not a 64-bit integer ('abc')"),
    ("instrument_records", "record_json", "'not json'", "record_json is not JSON"),
    ("instrument_records", "record_json", "'[1, 2]'", "record_json is not a JSON object"),
    ("instrument_records", "record_json", "'{\"blob_mb\": NaN}'",
     "record_json holds NaN or Infinity, which JSON (and SQLite's json functions) cannot read"),
    ("instrument_records", "record_json", "x'7b7d'", r"record_json is not text (b'{}')"),
    ("instrument_records", "hardware", "x'07'", r"hardware is not a string (b'\x07')"),
    # the tag and the cell are one line of printable text, at most 200 characters
    ("compile_records", "tag", "'line one' || char(10) || 'line two'",
     r"tag holds a control character ('\n'); a tag or cell value is one line of printable text"),
    ("compile_records", "transform", "'|' || char(13) || '|'",
     r"transform holds a control character ('\r'); a tag or cell value is one line of printable text"),
    ("compile_records", "dataset_class", "replace(hex(zeroblob(101)), '0', 'd')",
     "dataset_class is 202 characters long; a tag or cell value is at most 200"),
    # a timestamp is ISO 8601 with the T ("newest" is text order), a duration never negative
    ("compile_records", "timestamp", "'not a time'", f"{STAMP} ('not a time')"),
    ("compile_records", "timestamp", "'2026-12-03 19:00:00'", f"{STAMP} ('2026-12-03 19:00:00')"),
    ("compile_records", "timestamp", "'2026-12-03T19:00:00+0500'", f"{STAMP} ('2026-12-03T19:00:00+0500')"),
    ("compile_records", "timestamp", "20261203", f"{STAMP} ('20261203')"),  # TEXT affinity: stored as text
    ("compile_records", "compile_s", "-1", "compile_s is negative (-1.0)"),
    ("compile_records", "compile_s", "-1.5", "compile_s is negative (-1.5)"),
    ("compile_records", "trace_s", "-5e-324", "trace_s is negative (-5e-324)"),
    ("compile_records", "backend_compile_s", "-2", "backend_compile_s is negative (-2.0)"),
    ("compile_records", "steady_s", "-9e999", "steady_s is not a finite number (-inf)"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("table", "column", "value", "words"), REFUSED, ids=[f"{c}={v}" for _, c, v, _ in REFUSED])
def test_a_row_import_would_refuse_is_refused_in_one_line(any_db, node, tmp_path, table, column, value, words):
    row = _pinned_row(node) if table == "compile_records" else _sibling(node)
    src = _source(node, tmp_path, f"UPDATE {table} SET {column} = {value} WHERE id = ?", (row,))
    assert run_cli("import", GPU, "--db", any_db).exit_code == 0  # the destination has rows of its own
    before = _fingerprint(any_db)
    result = run_cli("merge", src, "--db", any_db)
    _no_exception(result)
    assert (result.exit_code, result.output) == (1, f"error: {src}: row {row}: {words}\n")
    assert _fingerprint(any_db) == before


# The same values in a JSON record: `ledger import` says the same words (one validator).
IN_JSON = {"compile_s": "slow", "cache_state": "bogus-state", "status": "weird", "ndim": "many",
           "mixed_precision": "yes"}


@pytest.mark.slow
@pytest.mark.parametrize("column", IN_JSON)
def test_import_refuses_the_same_values_in_the_same_words(db, tmp_path, column):
    from .conftest import compile_records_of_corpus

    rec = dict(compile_records_of_corpus()[0], **{column: IN_JSON[column]})
    path = write_json(tmp_path / "bad.json", [rec])
    result = run_cli("import", path, "--db", db)
    words = next(w for t, c, v, w in REFUSED if c == column and v == repr(IN_JSON[column]))
    assert (result.exit_code, result.output) == (1, f"error: {path}: record 0: {words}\n")


# Values import admits, at their edges: merged, and every command reads them.
# (Integers at the 32-bit edges: PostgreSQL's integer columns hold no more; see INT32_ON_PG.)
ADMITTED = [
    ("compile_s", "0"), ("compile_s", "5e-324"),
    ("compile_s", "1.7976931348623157e308"),  # report --html leaves it out of the chart (it crashed)
    ("compile_s", "NULL"), ("steady_s", "-0.0"), ("ndim", "-2147483648"), ("n_batch", "2147483647"),
    ("tag", "'it''s \"quoted\"'"), ("tag", "'<script>alert(1)</script>'"),
    ("hostname", "char(27) || '[31mred'"), ("hostname", "''"), ("transform", "'|'"),
    ("timestamp", "'2026-12-03T19:00:00.5+05:00'"), ("timestamp", "'2026-12-03T19:00:00Z'"), ("timestamp", "NULL"),
    ("provenance", "'{not json'"), ("cache_state", "NULL"),
    ("host_load_avg_1m", "1e300"), ("host_cpu_count", "0"), ("jax_version", "'\U0001f600'"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("column", "value"), ADMITTED,
                         ids=[f"{c}={v}" for c, v in (getattr(p, "values", p) for p in ADMITTED)])
def test_what_merge_admits_every_command_reads(any_db, node, tmp_path, column, value):
    src = _source(node, tmp_path, f"UPDATE compile_records SET {column} = {value}, record_key = NULL"
                                  " WHERE id IN (SELECT row_id FROM pins)")
    result = run_cli("merge", src, "--db", any_db)
    assert result.exit_code == 0, result.output
    _every_command_reads(any_db, tmp_path)


def _every_command_reads(db, tmp_path) -> None:
    for args in (("check",), ("pins", "update"), ("check", "--json"), ("report",),
                 ("report", "--html", tmp_path / "r.html"), ("export", "-o", tmp_path / "e.json"),
                 ("export", "-f", "csv", "-o", tmp_path / "e.csv")):
        with warnings.catch_warnings(record=True) as warned:  # what a user would see on stderr
            warnings.simplefilter("ignore")
            for shown in (UserWarning, RuntimeWarning):
                warnings.simplefilter("always", shown)
            result = run_cli(*args, "--db", db)
        _no_exception(result)
        assert [str(w.message) for w in warned] == [], args
        # check exits 1 on a regression it found; nothing else may fail
        assert result.exit_code in ((0, 1) if args[0] == "check" else (0,)), (args, result.output)
    # what export wrote goes back in: the rows were storable, and still are
    assert run_cli("import", tmp_path / "e.json", "--db", tmp_path / f"again-{uuid.uuid4().hex[:6]}.db").exit_code == 0


# -- the property ----------------------------------------------------------------------------

COLUMNS = ([("compile_records", c) for c in (*COMPILE_FIELDS, "record_key")]
           + [("instrument_records", c) for c in ("record_json", "record_kind", *INSTRUMENT_COLUMNS, "record_key")]
           + [("pins", c) for c in ("row_id", "pin_key", "compile_s")])
NAN, INF = float("nan"), float("inf")
values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([2**63, -(2**63) - 1, 10**400]).map(lambda n: ("literal", str(n))),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([INF, -INF, 1e308, -5e-324, -1.0]),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20),
    st.binary(max_size=12),
    st.binary(max_size=12).map(lambda b: ("text", b)),  # bytes stored as TEXT: not UTF-8 where they fail
    st.sampled_from(["1e999", "12", " 3 ", "0x10", "NaN", "-inf", "true", "{}", "[]", '{"a": NaN}', "null",
                     "warm", "cold", "ok", "failed", '{"serialize_s": 1}']),
)


def _set(src, table: str, column: str, row: int, value) -> None:
    con = sqlite3.connect(src)
    try:
        with con:
            if isinstance(value, tuple) and value[0] == "literal":  # beyond what sqlite3 binds
                con.execute(f"UPDATE {table} SET {column} = {value[1]} WHERE id = ?", (row,))
            elif isinstance(value, tuple):
                con.execute(f"UPDATE {table} SET {column} = CAST(? AS TEXT) WHERE id = ?", (value[1], row))
            else:
                con.execute(f"UPDATE {table} SET {column} = ? WHERE id = ?", (value, row))
            if table == "compile_records" and column not in ("tag", "record_key"):
                # a row of its own each time, so what is admitted lands in the destination
                con.execute("UPDATE compile_records SET tag = ?, record_key = NULL WHERE id = ?",
                            (uuid.uuid4().hex, row))
    except sqlite3.IntegrityError:  # a NOT NULL column
        reject()
    finally:
        con.close()


EXAMPLES = 150
# Known, and not merge's: the contract's integers are 64-bit, PostgreSQL's integer columns
# 32-bit, so a larger one is refused by the server, in one line but naming no row (as
# `ledger import` of the same value is). Nothing is written either way.
INT32_ON_PG = "error: database error: integer out of range\n"
_READY: set[str] = set()


def _raw_rows(db, table: str, columns) -> list[dict]:
    return [dict(zip(("id", *columns), r)) for r in query(db, f"SELECT id, {', '.join(columns)} FROM {table}")]


def _all_valid(db) -> None:
    """Every row of the destination passes the record contract's validator, read back as
    stored (SQLite's 0/1 for a boolean made true/false), with a 64-bit key."""
    for raw in _raw_rows(db, "compile_records", (*COMPILE_FIELDS, "record_key")):
        rec = {name: raw[name] for name in COMPILE_FIELDS}
        for name, kind in COMPILE_FIELDS.items():  # every boolean column (mixed_precision, x64)
            if kind is bool and type(rec[name]) is int:
                rec[name] = bool(rec[name])
        compile_row(rec)
        assert type(raw["record_key"]) is int and INT64[0] <= raw["record_key"] <= INT64[1]
    for raw in _raw_rows(db, "instrument_records", ("record_json", "hardware", "record_key")):
        rec = json.loads(raw["record_json"])
        assert isinstance(rec, dict)
        instrument_row(rec, default_hardware=raw["hardware"])
        assert type(raw["record_key"]) is int
    bad_pins = query(db, "SELECT count(*) FROM pins p LEFT JOIN compile_records r ON r.id = p.row_id"
                         " WHERE r.id IS NULL OR r.compile_s <> p.compile_s OR r.cache_state <> 'warm'")
    assert bad_pins == [(0,)]


@pytest.mark.slow
@given(where=st.sampled_from(COLUMNS), value=values)
@settings(**SETTINGS, max_examples=examples(EXAMPLES))
# CI's finds: a sibling row's own hardware column, not in its record_json, of invalid UTF-8 or a NUL
@example(where=("instrument_records", "hardware"), value=("text", b"\x80"))
@example(where=("instrument_records", "hardware"), value=("text", b"a\x00b"))
def test_any_value_in_a_source_row_is_merged_valid_or_refused_in_one_line(any_db, node, tmp_path, where, value):
    table, column = where
    if str(any_db) not in _READY:  # once per destination: hypothesis runs many examples in one call
        assert run_cli("db", "upgrade", "--db", any_db).exit_code == 0
        _READY.add(str(any_db))
    row = {"compile_records": _pinned_row, "instrument_records": _sibling, "pins": lambda n: 1}[table](node)
    src = tmp_path / f"src-{uuid.uuid4().hex[:8]}.db"
    shutil.copy(node, src)
    _set(src, table, column, row, value)
    before = _fingerprint(any_db)
    result = run_cli("merge", src, "--db", any_db)
    _no_exception(result)
    event(f"{table}: {'merged' if result.exit_code == 0 else 'refused'}")
    if result.exit_code == 0:
        _all_valid(any_db)
        return
    assert table != "pins", result.output  # a pin is a pointer: skipped with a warning, never a refusal
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    if result.output == INT32_ON_PG:
        assert isinstance(any_db, PgDb) and COMPILE_FIELDS.get(column) is int, result.output
    else:
        assert result.output.startswith(f"error: {src}: row {row}: {column} "), result.output
    assert _fingerprint(any_db) == before
    src.unlink()


@pytest.mark.slow
@given(where=st.sampled_from([w for w in COLUMNS if w[0] == "compile_records"]), value=values)
@settings(**SETTINGS, max_examples=examples(8))
def test_any_value_merge_admits_every_command_reads(any_db, node, tmp_path, where, value):
    """Fewer examples than above: each one merged runs seven commands on the result."""
    table, column = where
    row = _pinned_row(node)
    src = tmp_path / f"src-{uuid.uuid4().hex[:8]}.db"
    shutil.copy(node, src)
    _set(src, table, column, row, value)
    result = run_cli("merge", src, "--db", any_db)
    _no_exception(result)
    event("merged" if result.exit_code == 0 else "refused")
    if result.exit_code == 0:
        _every_command_reads(any_db, tmp_path)
    src.unlink()


# -- a bad timestamp and went-cold -----------------------------------------------------------

@pytest.mark.slow
def test_a_cold_row_with_a_bad_timestamp_is_refused_not_a_false_went_cold(db, tmp_path):
    """"Newest" is text order: a cold row stamped 'not a time' sorted after the cell's warm
    row from a real time, and `ledger check` said the cache went cold (exit 1) on a cell
    whose newest row is warm. The merge refuses the row instead."""
    from .ledgers import add, rec

    add(db, tmp_path, rec(timestamp="2026-07-03T10:00:00"))
    src = tmp_path / "src.db"
    (cold,) = add(src, tmp_path, rec(cache_state="cold", compile_s=60.0, timestamp="2026-07-01T10:00:00"))
    con = sqlite3.connect(src)
    with con:
        con.execute("UPDATE compile_records SET timestamp = 'not a time', record_key = NULL WHERE id = ?", (cold,))
    con.close()
    before = _fingerprint(db)
    result = run_cli("merge", src, "--db", db)
    assert (result.exit_code, result.output) == (1, f"error: {src}: row {cold}: {STAMP} ('not a time')\n")
    assert _fingerprint(db) == before
    check = run_cli("check", "--db", db)
    assert (check.exit_code, check.output) == (
        0, "check run 1 (tolerance 1.5x): 0 ok, 0 regression, 0 inconclusive, 0 went-cold\n")
