"""`ledger import` and `ledger export`: idempotent, all or nothing, lossless."""

from __future__ import annotations

import json

import pytest

from .conftest import (
    CORPUS,
    CORPUS_COMPILE,
    CORPUS_FILES,
    CORPUS_RECORDS,
    CORPUS_SIBLINGS,
    CORPUS_STATES,
    compile_records_of_corpus,
    corpus_records,
    db_at,
    insert_legacy,
    query,
    run_cli,
    write_json,
)
from .helpers import STAMP

GOOD = compile_records_of_corpus()[0]


def _counts(db):
    return query(db, "SELECT (SELECT count(*) FROM compile_records), (SELECT count(*) FROM instrument_records)")[0]


def test_import_twice_adds_nothing(db):
    first = run_cli("import", CORPUS, "--db", db)
    second = run_cli("import", CORPUS, "--db", db)
    assert second.exit_code == 0
    assert second.output.strip() == (
        f"{CORPUS_RECORDS} records in {CORPUS_FILES} files: 0 compile rows added (cold 0, warm 0, none 0, unknown 0), "
        f"0 instrument records added, {CORPUS_RECORDS} already present"
    )
    assert first.exit_code == 0 and _counts(db) == (CORPUS_COMPILE, CORPUS_SIBLINGS)


@pytest.mark.slow
def test_import_after_a_downgrade_round_trip_adds_nothing(db):
    """0001 has no record_key: coming back, both tables' keys are recomputed, the
    sibling records' too (they were imported a second time: 4 became 8)."""
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    assert run_cli("db", "downgrade", "0001", "--db", db).exit_code == 0
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    again = run_cli("import", CORPUS, "--db", db)
    assert again.exit_code == 0 and again.output.strip().endswith(
        f"0 instrument records added, {CORPUS_RECORDS} already present")
    assert _counts(db) == (CORPUS_COMPILE, CORPUS_SIBLINGS)


def test_import_after_plain_insert_adds_nothing(db):
    db_at(db, "0001")
    insert_legacy(db, compile_records_of_corpus())
    db_at(db, "head")
    result = run_cli("import", CORPUS, "--db", db)
    assert result.exit_code == 0, result.output
    assert _counts(db) == (CORPUS_COMPILE, CORPUS_SIBLINGS)


BAD_INPUTS = [
    ("invalid JSON", '[{"transform": "jit",', "bad.json: invalid JSON: "),
    ("not a list", {"records": []}, "bad.json: not a list of records (top level is dict)"),
    ("record not object", [GOOD, 42], "bad.json: record 1: not an object (int)"),
    ("non-numeric timing", [GOOD, dict(GOOD, compile_s="17.9s", timestamp="x")], "bad.json: record 1: compile_s is not a number ('17.9s')"),
    ("boolean timing", [dict(GOOD, first_s=True)], "bad.json: record 0: first_s is not a number (True)"),
    ("NaN timing", '[{"compile_s": NaN}]', "bad.json: record 0: compile_s is not a finite number (nan)"),
    ("bad cache_state", [dict(GOOD, cache_state="lukewarm")], "bad.json: record 0: cache_state 'lukewarm' is not one of"),
    ("bad host_state", [dict(GOOD, host_state=[4, 0.5])], "bad.json: record 0: host_state is not an object"),
    ("int beyond 64 bits", [dict(GOOD, ndim=2**70)], "bad.json: record 0: ndim is out of the 64-bit integer range (1180591620717411303424)"),
    ("int too big for a float", '[{"compile_s": 1' + "0" * 400 + '}]', "bad.json: record 0: compile_s is not a finite number (1000"),
    ("lone surrogate in a tag", '[{"compile_s": 1.0, "tag": "\\ud800warm"}]', "bad.json: record 0: tag is not storable text"),
    ("NUL in a tag", [dict(GOOD, tag="x_cold\u0000zz")], "bad.json: record 0: tag is not storable text"),
    ("NaN in a sibling record", '[{"serialize_s": NaN}]', "bad.json: record 0: holds NaN or Infinity"),
    ("not UTF-8", b"[\xff]", "bad.json: not UTF-8 text"),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,content,message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_writes_nothing(tmp_path, db, name, content, message):
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    tree = tmp_path / "tree"
    write_json(tree / "local_cpu" / "a_good.json", [dict(GOOD, tag="new-one")])
    bad = write_json(tree / "local_cpu" / "bad.json", content)
    result = run_cli("import", tree, "--db", db)
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad.parent}/") and message in lines[0], lines
    assert _counts(db) == (CORPUS_COMPILE, CORPUS_SIBLINGS)  # not even the good file's record


@pytest.mark.slow  # 0.17-0.25 s of the fast tier's 0.3: a slower CI machine tips it over
def test_unreadable_entries_in_a_tree_are_reported_not_crashed_on(tmp_path, db):
    tree = tmp_path / "tree" / "local_cpu"
    write_json(tree / "a.json", [GOOD])
    (tree / "dir.json").mkdir()  # not a file: not imported
    (tree / "broken.json").symlink_to(tree / "gone.json")
    result = run_cli("import", tree.parent, "--db", db)
    assert (result.exit_code, result.output) == (1, f"error: {tree / 'broken.json'}: cannot read: No such file or directory\n")
    ok = run_cli("import", tree.parent, "--skip-invalid", "--db", db)
    assert ok.exit_code == 0 and _counts(db) == (1, 0)


def test_unparseable_provenance_is_kept_beside_extras(tmp_path, db):
    write_json(tmp_path / "in.json", [dict(GOOD, provenance="notjson", extra=1)])
    assert run_cli("import", tmp_path / "in.json", "--db", db).exit_code == 0
    (prov,), = query(db, "SELECT provenance FROM compile_records")
    assert json.loads(prov) == {"provenance": "notjson", "extra": 1}


def test_same_sibling_record_under_two_hardware_folders_is_two_rows(tmp_path, db):
    for hw in ("local_cpu", "local_gpu_X"):
        write_json(tmp_path / "tree" / hw / "export_probe.json", [{"serialize_s": 1.0, "tag": "e"}])
    assert run_cli("import", tmp_path / "tree", "--db", db).exit_code == 0
    assert query(db, "SELECT hardware FROM instrument_records ORDER BY id") == [("local_cpu",), ("local_gpu_X",)]


def test_skip_invalid_imports_the_rest_and_lists_skipped(tmp_path, db):
    tree = tmp_path / "tree"
    write_json(tree / "local_cpu" / "a.json", [dict(GOOD, tag="ok-cold"), "oops", dict(GOOD, tag="x", ndim="15")])
    write_json(tree / "local_cpu" / "b.json", "{not json")
    result = run_cli("import", tree, "--skip-invalid", "--db", db)
    assert result.exit_code == 0, result.output
    assert "skipped: " + str(tree / "local_cpu" / "a.json") + ": record 1: not an object (str)" in result.output
    assert ": record 2: ndim is not an integer ('15')" in result.output
    assert "b.json: invalid JSON" in result.output
    assert result.output.strip().splitlines()[-1].endswith("0 already present, 3 skipped")
    assert query(db, "SELECT tag, cache_state FROM compile_records") == [("ok-cold", "cold")]


def test_missing_path_is_one_line_error(tmp_path, db):
    result = run_cli("import", tmp_path / "nope", "--db", db)
    assert result.exit_code == 1
    assert result.output == f"error: {tmp_path / 'nope'}: no such file or directory\n"
    assert not db.exists()


def test_failed_import_into_an_existing_empty_ledger_keeps_it(tmp_path, db):
    db_at(db, "head")
    write_json(tmp_path / "bad.json", "[")
    assert run_cli("import", tmp_path / "bad.json", "--db", db).exit_code == 1
    assert db.exists() and _counts(db) == (0, 0)


@pytest.mark.slow
def test_host_state_is_flattened_and_extras_kept(tmp_path, db):
    rec = dict(GOOD, tag="h-warm", host_state={"cpu_count": 8, "load_avg_1m": 3.5, "gpu": "none"}, note="kept")
    write_json(tmp_path / "in.json", [rec])
    assert run_cli("import", tmp_path / "in.json", "--db", db).exit_code == 0
    (cpus, load, prov, state), = query(db, "SELECT host_cpu_count, host_load_avg_1m, provenance, cache_state FROM compile_records")
    assert (cpus, load, state) == (8, 3.5, "warm")
    assert json.loads(prov) == {"host_state": {"gpu": "none"}, "note": "kept"}


def test_hardware_comes_from_the_tree_when_missing(tmp_path, db):
    rec = {k: v for k, v in GOOD.items() if k != "hardware"}
    write_json(tmp_path / "tree" / "local_gpu_NVIDIA_A100" / "x.json", [rec])
    assert run_cli("import", tmp_path / "tree", "--db", db).exit_code == 0
    assert query(db, "SELECT hardware FROM compile_records") == [("local_gpu_NVIDIA_A100",)]


@pytest.mark.slow
def test_export_json_reimports_without_duplicates_and_with_same_states(tmp_path, db):
    write_json(tmp_path / "extra.json", [dict(GOOD, tag="r", cache_state="warm", host_state={"cpu_count": 2, "load_avg_1m": 0.1})])
    assert run_cli("import", CORPUS, tmp_path / "extra.json", "--db", db).exit_code == 0
    out = tmp_path / "export.json"
    result = run_cli("export", "-o", out, "--db", db)
    assert result.exit_code == 0 and result.output == ""
    exported = json.loads(out.read_text())
    assert len(exported) == 94
    again = run_cli("import", out, "--db", db)
    assert again.output.strip().endswith("0 instrument records added, 94 already present")
    fresh = tmp_path / "fresh.db"
    assert run_cli("import", out, "--db", fresh).exit_code == 0
    sql = "SELECT tag, cache_dir, compile_s, cache_state, cache_state_source, host_cpu_count, record_key FROM compile_records ORDER BY id"
    assert query(fresh, sql) == query(db, sql)
    # sibling records come back whole, plus the hardware they were filed under
    sql = "SELECT record_kind, record_key, hardware, json_remove(record_json, '$.hardware') FROM instrument_records ORDER BY id"
    assert query(fresh, sql) == query(db, sql)


def test_export_csv_has_header_and_rows(db):
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    result = run_cli("export", "--format", "csv", "--db", db)
    lines = result.output.splitlines()
    assert lines[0].startswith("transform,trace_s,compile_s,first_s,steady_s,dataset_class")
    assert "cache_state" in lines[0].split(",") and len(lines) == 90


def test_export_file_has_the_usual_mode_and_keeps_an_existing_ones(db, tmp_path):
    """Written through a temp file (0600 when made) and a rename: the export gets the
    mode any new file gets here, and an existing file keeps its own."""
    import os

    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    umask = os.umask(0o022)
    try:
        fresh, shared = tmp_path / "fresh.json", tmp_path / "shared.json"
        shared.write_text("old")
        shared.chmod(0o664)
        for out in (fresh, shared):
            assert run_cli("export", "-o", out, "--db", db).exit_code == 0
    finally:
        os.umask(umask)
    assert (fresh.stat().st_mode & 0o777, shared.stat().st_mode & 0o777) == (0o644, 0o664)
    assert not list(tmp_path.glob(".*.tmp"))


def test_export_unknown_format(db):
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    result = run_cli("export", "--format", "xml", "--db", db)
    assert result.exit_code == 1 and result.output == "error: unknown format 'xml': use one of json, csv\n"


@pytest.fixture
def forked_readers(monkeypatch):
    """Large imports read files in forked processes; make every import take that path,
    even on a one-core runner, and count the pools so a test can show it did (its
    tests are marked fork: where there is no fork they skip, or fail under
    LEDGER_REQUIRE_ALL)."""
    import concurrent.futures

    import ledger.legacy.reading

    pools = []

    class CountedPool(concurrent.futures.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            pools.append(args[0] if args else kwargs.get("max_workers"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(ledger.legacy.reading, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(ledger.legacy.reading.os, "cpu_count", lambda: 2)
    # and fork here, in a pytest worker that runs threads (xdist's) and may have loaded JAX,
    # where the command itself would not (workers.can_fork): its readers only parse JSON
    monkeypatch.setattr(ledger.legacy.reading, "can_fork", lambda: True)
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", CountedPool)
    return pools


@pytest.mark.slow
@pytest.mark.fork
def test_parallel_readers_give_the_same_rows(tmp_path, forked_readers):
    serial, parallel = tmp_path / "s.db", tmp_path / "p.db"
    import ledger.legacy.reading

    assert run_cli("import", CORPUS, "--db", parallel).exit_code == 0
    assert forked_readers == [2]  # the forked path ran, with two readers
    ledger.legacy.reading.PARALLEL_BYTES = 1 << 40
    assert run_cli("import", CORPUS, "--db", serial).exit_code == 0
    sql = "SELECT record_key, tag, cache_state, cache_state_source FROM compile_records ORDER BY id"
    assert query(parallel, sql) == query(serial, sql) and len(query(serial, sql)) == CORPUS_COMPILE


@pytest.mark.slow
@pytest.mark.fork
def test_parallel_readers_bad_file_writes_nothing(tmp_path, db, forked_readers):
    tree = tmp_path / "tree" / "local_cpu"
    write_json(tree / "a.json", [dict(GOOD, tag=f"t{i}") for i in range(50)])
    write_json(tree / "b.json", [dict(GOOD, tag="x"), dict(GOOD, steady_s="fast")])
    write_json(tree / "c.json", [dict(GOOD, tag="later")])
    result = run_cli("import", tree.parent, "--db", db)
    assert result.exit_code == 1 and forked_readers == [2]
    assert result.output == f"error: {tree / 'b.json'}: record 1: steady_s is not a number ('fast')\n"
    assert not db.exists()  # the failed command's new, empty database is not left behind
    ok = run_cli("import", tree.parent, "--skip-invalid", "--db", db)
    assert ok.exit_code == 0 and _counts(db) == (52, 0)


def test_fast_path_and_record_by_record_path_build_the_same_rows():
    from ledger.record_validation import FAST_COLUMNS, compile_row, legacy_rows_fast

    recs = compile_records_of_corpus() + [dict(GOOD, compile_s=18, tag="int-timing")]
    recs.append({k: v for k, v in GOOD.items() if k != "hardware"})
    fast = legacy_rows_fast(recs, default_hardware="local_cpu")
    slow = [compile_row(r, default_hardware="local_cpu") for r in recs]
    assert fast == [tuple(row.get(c) for c in FAST_COLUMNS) for row in slow]


def test_corpus_constants_match_the_files():
    records = corpus_records()
    assert len({path for path, _ in records}) == CORPUS_FILES
    assert len(records) == CORPUS_RECORDS
    compile_records = compile_records_of_corpus()
    assert len(compile_records) == CORPUS_COMPILE
    assert len(compile_records) == sum(CORPUS_STATES.values())  # each state counted against the rows: test_backends
    assert len(records) - len(compile_records) == CORPUS_SIBLINGS  # the rest: instrument records


# A timestamp is ISO 8601, YYYY-MM-DDTHH:MM:SS with optional fractional seconds and UTC
# offset: "newest" is decided in text order, where a space (or a word) sorts wrong. A
# duration of the contract is never negative (nor NaN or infinite).
BAD_RECORDS = [
    ("a word", dict(GOOD, timestamp="yesterday"), f"{STAMP} ('yesterday')"),
    ("a space for the T", dict(GOOD, timestamp="2026-12-03 19:00:00"), f"{STAMP} ('2026-12-03 19:00:00')"),
    ("no seconds", dict(GOOD, timestamp="2026-12-03T19:00"), f"{STAMP} ('2026-12-03T19:00')"),
    ("no such day", dict(GOOD, timestamp="2026-02-30T19:00:00"), f"{STAMP} ('2026-02-30T19:00:00')"),
    ("offset without a colon", dict(GOOD, timestamp="2026-12-03T19:00:00+0500"), f"{STAMP} ('2026-12-03T19:00:00+0500')"),
    ("not text", dict(GOOD, timestamp=20261203), "timestamp is not a string (20261203)"),
    ("negative compile_s", dict(GOOD, compile_s=-3), "compile_s is negative (-3.0)"),
    ("negative trace_s", dict(GOOD, trace_s=-0.5), "trace_s is negative (-0.5)"),
    ("negative steady_s", dict(GOOD, steady_s=-1e-9), "steady_s is negative (-1e-09)"),
    ("negative backend_compile_s", dict(GOOD, backend_compile_s=-2.0), "backend_compile_s is negative (-2.0)"),
    ("infinite first_s", '[{"compile_s": 1.0, "first_s": Infinity}]', "first_s is not a finite number (inf)"),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,content,words", BAD_RECORDS, ids=[b[0] for b in BAD_RECORDS])
def test_a_bad_timestamp_or_duration_is_one_line_and_writes_nothing(tmp_path, db, name, content, words):
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    tree = tmp_path / "tree"
    write_json(tree / "local_cpu" / "a_good.json", [dict(GOOD, tag="new-one")])
    if not isinstance(content, str):  # after two good records, the first a plain legacy one
        content = [dict(GOOD, tag="ok-1"), dict(GOOD, tag="ok-2", note="x"), content]
    bad = write_json(tree / "local_cpu" / "bad.json", content)
    result = run_cli("import", tree, "--db", db)
    index = 0 if isinstance(content, str) else 2
    assert (result.exit_code, result.output) == (1, f"error: {bad}: record {index}: {words}\n")
    assert _counts(db) == (CORPUS_COMPILE, CORPUS_SIBLINGS)  # not even the good file's record


@pytest.mark.parametrize("stamp, words", [("yesterday", f"{STAMP} ('yesterday')"),
                                          ("2026-12-03 19:00:00", f"{STAMP} ('2026-12-03 19:00:00')"),
                                          (20261203, "timestamp is not a string (20261203)")])
def test_an_instrument_records_timestamp_is_held_to_the_same_form(tmp_path, db, stamp, words):
    """A sibling record (no compile_s: an export probe, a trace profile) is ordered by its
    timestamp as a compile row is, so it is refused on the same words."""
    bad = write_json(tmp_path / "tree" / "local_cpu" / "export_probe.json",
                     [{"kind": "export_probe", "tag": "e1", "timestamp": "2026-07-17T09:59:45"},
                      {"kind": "export_probe", "tag": "e2", "timestamp": stamp}])
    result = run_cli("import", tmp_path / "tree", "--db", db)
    assert (result.exit_code, result.output) == (1, f"error: {bad}: record 1: {words}\n")
    assert not db.exists() or _counts(db) == (0, 0)


@pytest.mark.parametrize("field,value,words", [
    ("timestamp", "2026-12-03 19:00:00", f"{STAMP} ('2026-12-03 19:00:00')"),
    ("timestamp", "2026-13-03T19:00:00", f"{STAMP} ('2026-13-03T19:00:00')"),
    ("compile_s", -3, "compile_s is negative (-3.0)"),
    ("first_s", -0.25, "first_s is negative (-0.25)"),
], ids=["space", "month 13", "compile_s", "first_s"])
def test_a_bad_value_among_plain_legacy_records_is_named(tmp_path, db, field, value, words):
    """Plain legacy records are checked a column at a time (legacy_rows_fast): the bad one
    is still named, by its index."""
    records = [dict(GOOD, tag=f"t{i}") for i in range(50)]
    records[37][field] = value
    path = write_json(tmp_path / "many.json", records)
    result = run_cli("import", path, "--db", db)
    assert (result.exit_code, result.output) == (1, f"error: {path}: record 37: {words}\n")
    assert not db.exists() or _counts(db) == (0, 0)


def test_fractional_seconds_and_an_offset_are_accepted_as_written(tmp_path, db):
    stamps = ["2026-12-03T19:00:00.25", "2026-12-03T19:00:00+05:00", "2026-12-03T19:00:00.123456-08:00",
              "2026-12-03T19:00:00Z", "2026-12-03T19:00:00"]
    plain = write_json(tmp_path / "plain.json", [dict(GOOD, tag=f"p{i}", timestamp=t) for i, t in enumerate(stamps)])
    extra = write_json(tmp_path / "extra.json", [dict(GOOD, tag=f"e{i}", timestamp=t, note=1) for i, t in enumerate(stamps)])
    for path in (plain, extra):
        result = run_cli("import", path, "--db", db)
        assert result.exit_code == 0, result.output
    assert [t for (t,) in query(db, "SELECT timestamp FROM compile_records ORDER BY id")] == stamps * 2


def test_zero_durations_and_a_negative_load_setting_are_not_refused(tmp_path, db):
    """Zero is a duration (a cache hit can take no measurable time); the load averages and
    cache_min_compile_time_s are no durations of a compile and keep their own rules."""
    path = write_json(tmp_path / "z.json", [dict(GOOD, compile_s=0, trace_s=-0.0, cache_min_compile_time_s=-1.0)])
    assert run_cli("import", path, "--db", db).exit_code == 0


# -- one pass: the cache cells' triggers judged once for the batch (cells.appending) ----

# 0009's triggers (what an import sets aside for its batch)
_TRIGGERS_SQL = "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'cache_cells%' ORDER BY name"


def test_an_import_leaves_the_cache_cells_triggers_as_it_found_them(tmp_path, db):
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    assert run_cli("check", "--db", db).exit_code in (0, 1)  # a fold: the triggers armed at its upto
    armed = query(db, _TRIGGERS_SQL)
    assert len(armed) == 3 and all(f"<= {CORPUS_COMPILE}" in sql for _, sql in armed)
    write_json(tmp_path / "new.json", [dict(GOOD, tag="new")])
    assert run_cli("import", tmp_path / "new.json", "--db", db).exit_code == 0
    assert query(db, _TRIGGERS_SQL) == armed
    assert query(db, "SELECT upto FROM cache_cells_state") == [(CORPUS_COMPILE,)]  # above the fold: kept
    bad = write_json(tmp_path / "bad" / "b.json", [dict(GOOD, tag="x"), dict(GOOD, steady_s="fast")])
    write_json(tmp_path / "bad" / "a.json", [dict(GOOD, tag=f"t{i}") for i in range(5)])
    result = run_cli("import", bad.parent, "--db", db)  # a.json goes in, then b.json fails: all rolled back
    assert result.exit_code == 1 and query(db, _TRIGGERS_SQL) == armed
    assert _counts(db) == (CORPUS_COMPILE + 1, CORPUS_SIBLINGS)


def test_an_import_whose_rows_fall_at_or_below_the_fold_resets_it_as_the_triggers_would(tmp_path, db):
    """An import appends above MAX(id), and the fold's upto is never above MAX(id)
    while its triggers stand; still, the batch must do what the insert trigger would
    if it were: here the triggers are armed above every row, so the new rows fall
    below the fold."""
    import sqlalchemy as sa

    from ledger.storage.open import open_ledger
    from ledger.watch import cells

    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    with open_ledger(str(db), "write") as ledger, ledger.engine.begin() as conn:
        cells._arm_sqlite_triggers(conn, 10**6)
        conn.execute(sa.text("UPDATE cache_cells_state SET upto = 1000000"))
    write_json(tmp_path / "new.json", [dict(GOOD, tag="new")])
    assert run_cli("import", tmp_path / "new.json", "--db", db).exit_code == 0
    assert query(db, "SELECT upto FROM cache_cells_state") == [(0,)]
    assert all("<= 1000000" in sql for _, sql in query(db, _TRIGGERS_SQL))
    with open_ledger(str(db), "write") as ledger, ledger.engine.begin() as conn:  # nothing added: kept
        conn.execute(sa.text("UPDATE cache_cells_state SET upto = 1000000"))
    assert run_cli("import", tmp_path / "new.json", "--db", db).exit_code == 0
    assert query(db, "SELECT upto FROM cache_cells_state") == [(10**6,)]


@pytest.mark.slow  # a fresh interpreter: 0.15 s of CPU or more
def test_what_the_readers_run_imports_no_sqlalchemy():
    """`ledger import` forks its readers before the ledger opens (ledger/command.py:
    import_json), so that they parse while SQLAlchemy loads: what the command imports to
    start them (each row's cell slot among it: ledger/storage/cell_ids.py) loads neither
    SQLAlchemy nor alembic."""
    import subprocess
    import sys

    code = ("import sys\nimport ledger.legacy.reading\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'alembic')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert (out.stdout, out.stderr) == ("[]\n", "")


_INDEXES_SQL = "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'compile_records' ORDER BY name"


@pytest.mark.parametrize("aside", [True, False], ids=["indexes-set-aside", "indexes-kept"])
def test_an_import_with_its_scattered_indexes_set_aside_adds_what_the_unique_index_would(
        tmp_path, db, monkeypatch, aside):
    """A tree larger than the ledger goes in with the record-key and cell indexes dropped
    and made again: the rows the unique index would skip (present before, or twice in the
    tree, on either reading path) are skipped all the same, and the indexes come back as
    they were, after a failed import too."""
    import ledger.legacy.importer
    import ledger.storage.bulk

    monkeypatch.setattr(ledger.legacy.importer, "_sets_aside", lambda conn, files, rows_before: aside)
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    indexes = query(db, _INDEXES_SQL)  # as the migrations made them
    assert {name for name, _ in indexes} >= set(ledger.storage.bulk.SCATTERED_INDEXES)
    a, b, c, d = (dict(GOOD, tag=t) for t in "abcd")
    assert run_cli("import", write_json(tmp_path / "first.json", [a, b]), "--db", db).exit_code == 0
    assert query(db, _INDEXES_SQL) == indexes
    tree = tmp_path / "tree" / "local_cpu"
    write_json(tree / "1.json", [a, c, c, d])  # the fast path: a present before, c twice
    write_json(tree / "2.json", [dict(b, extra=1), dict(c, extra=1), dict(GOOD, tag="e", extra=1), b])  # record by record
    write_json(tree / "3.json", [d, dict(GOOD, tag="f")])
    result = run_cli("import", tree.parent, "--db", db)
    assert result.output == ("10 records in 3 files: 4 compile rows added (cold 0, warm 0, none 0, unknown 4), "
                             "0 instrument records added, 6 already present\n")
    assert query(db, "SELECT tag, count(*), count(DISTINCT record_key), count(cell_id) FROM compile_records "
                     "GROUP BY tag ORDER BY tag") == [(t, 1, 1, 1) for t in "abcdef"]
    assert query(db, _INDEXES_SQL) == indexes and query(db, "PRAGMA integrity_check") == [("ok",)]
    write_json(tree / "4.json", [dict(GOOD, tag="g"), dict(GOOD, steady_s="fast")])
    assert run_cli("import", tree.parent, "--db", db).exit_code == 1
    assert query(db, _INDEXES_SQL) == indexes and _counts(db) == (6, 0)
