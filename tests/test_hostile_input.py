"""Hostile input, property-tested (hypothesis): malformed and adversarial records for
`ledger import`, and statements that try to write for `ledger sql`.

The properties are the README's promises, whatever the input:
  - no traceback; a user error is one line on stderr (`error: ...`) and exit code 1
  - `ledger import` is all or nothing: a failure names the file (and the record
    index, for a bad record) and leaves the database byte for byte as it was
  - `ledger sql` changes nothing: not a row, not the schema, no new file, and
    nothing one call sets reaches the next. On SQLite the file stays byte for byte
    the same; on PostgreSQL (the same tests, a parametrised case) a fingerprint of
    what a read-only session must not change stays the same: every table's rows,
    the schema, grants, sequences, large objects, role and database settings.

Each example gets a copy of a ledger made once per module (hypothesis runs many
examples through one call of the test function, so a function-scoped tmp_path would
be shared between them); `ledger sql`'s cases share one per backend, which they must
leave as it was.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from ledger.record import DURATION_FIELDS, LEGACY_FIELDS
from ledger.record_validation import timestamp_ok

from .conftest import CORPUS, PG_ENV, PgDb, compile_records_of_corpus, examples, jax_platform, query, run_cli
from .helpers import SETTINGS, no_exception

GOOD = compile_records_of_corpus()[0]
SIBLING = {"serialize_s": 0.5, "deserialize_s": 0.25, "blob_mb": 3.0, "tag": "export-probe", "model_type": "mge"}

# The autouse fixture (no ambient database, cwd in tmp_path) is fine to share
# between examples (SETTINGS: tests/helpers.py); each example makes its own database.
# The budgets are the profile's (tests/conftest.py): the same examples on every run,
# HYPOTHESIS_EXPLORE=1 draws new ones when looking for trouble.


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A ledger at head holding the corpus and its pins."""
    db = tmp_path_factory.mktemp("template") / "ledger.db"
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    assert run_cli("pins", "update", "--db", db).exit_code == 0
    return db


# -- values a hostile record may carry ------------------------------------------------------

NAN, INF = float("nan"), float("inf")
odd_floats = st.sampled_from([NAN, INF, -INF, -0.0, 5e-324, 1.7976931348623157e308, 1e-300, -1.0, -5e-324])
big_ints = st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**70, 10**300, 10**400])
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)  # unicode, NUL, controls
lone_surrogates = st.text(st.characters(categories=["Cs"]), min_size=1, max_size=3)
huge_text = st.sampled_from([10_000, 300_000]).flatmap(
    lambda n: st.sampled_from(["x", "é", "\U0001f600", "warm", "\\", '"']).map(lambda c: c * n))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    odd_floats, big_ints, any_text, lone_surrogates, huge_text,
    st.sampled_from(["cold", "warm", "none", "unknown", "lukewarm", "compile", "ok", "failed", "", "17.9s", "NaN",
                     "yesterday", "2026-12-03 19:00:00", "2026-12-03T19:00:00.5+05:00", "2026-02-30T19:00:00"]),
)
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(any_text, inner, max_size=3)), max_leaves=8)

FIELD_NAMES = [*LEGACY_FIELDS, "cache_state", "cache_state_source", "host_state", "provenance", "record_kind",
               "status", "id", "record_key", "run_id", "host_cpu_count", "cache_hits", "serialize_s",
               "rollup_tottime_s", "note"]
keys = st.one_of(st.sampled_from(FIELD_NAMES), any_text, lone_surrogates)
host_states = st.dictionaries(st.sampled_from(["cpu_count", "load_avg_1m", "load_avg_5m", "gpu", "cpu_affinity"]),
                              json_values, max_size=3)


def _dumps(value) -> str:
    # NaN and Infinity as the tokens Python's json writes (and reads back)
    return json.dumps(value, allow_nan=True)


@st.composite
def record_texts(draw) -> str:
    """One record as JSON text: a known-good record or sibling with hostile edits,
    keys possibly repeated (the JSON text may hold duplicate keys), or not an object."""
    kind = draw(st.sampled_from(["compile", "compile", "compile", "sibling", "scalar", "deep"]))
    if kind == "scalar":
        return _dumps(draw(json_values))
    if kind == "deep":
        # nesting past what a parser can recurse into, as the value of a field
        depth = draw(st.sampled_from([50, 500, 2_000, 100_000]))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        field = draw(st.sampled_from(["compile_s", "tag", "host_state", "note"]))
        base = _dumps(dict(GOOD, **{field: "@@"}))
        return base.replace('"@@"', opener * depth + "1" + closer * depth)
    base = dict(GOOD if kind == "compile" else SIBLING)
    pairs = list(base.items())
    for _ in range(draw(st.integers(0, 4))):
        edit = draw(st.sampled_from(["set", "set", "drop", "dup", "host_state"]))
        if edit == "set":
            pairs.append((draw(keys), draw(json_values)))
        elif edit == "drop" and pairs:
            pairs.pop(draw(st.integers(0, len(pairs) - 1)))
        elif edit == "dup" and pairs:
            # the same key twice in the text: json keeps the last
            name = draw(st.sampled_from([k for k, _ in pairs]))
            pairs.append((name, draw(json_values)))
        elif edit == "host_state":
            pairs.append(("host_state", draw(st.one_of(host_states, json_values))))
    return "{" + ", ".join(f"{_dumps(k)}: {_dumps(v)}" for k, v in pairs) + "}"


@st.composite
def file_contents(draw) -> bytes:
    shape = draw(st.sampled_from(["list"] * 6 + ["top", "truncated", "bytes", "bom"]))
    if shape == "top":
        return _dumps(draw(json_values)).encode()
    if shape == "bytes":
        return draw(st.binary(max_size=40))
    records = draw(st.lists(record_texts(), min_size=0, max_size=3))
    text = "[" + ", ".join(records) + "]"
    if shape == "truncated":
        text = text[: draw(st.integers(0, max(0, len(text) - 1)))]
    data = text.encode("utf-8")  # _dumps escapes surrogates, so this always encodes
    return b"\xef\xbb\xbf" + data if shape == "bom" else data


def _python_list(content: bytes) -> list | None:
    """The file's records as Python's json reads them, or None (not a list, not JSON)."""
    try:
        data = json.loads(content.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, list) else None


def _counts(con: sqlite3.Connection) -> tuple[int, int]:
    return con.execute("SELECT (SELECT count(*) FROM compile_records), (SELECT count(*) FROM instrument_records)").fetchone()


@pytest.mark.slow
@settings(max_examples=examples(120), **SETTINGS)
@given(files=st.lists(file_contents(), min_size=1, max_size=3), good_first=st.booleans(), skip_invalid=st.booleans())
@example(files=[b'[{"compile_s": NaN}]'], good_first=True, skip_invalid=False)
@example(files=[b'[{"compile_s": -3, "tag": "x"}]'], good_first=False, skip_invalid=False)
@example(files=[b'[{"compile_s": 1.0, "timestamp": "2026-12-03 19:00:00"}]'], good_first=False, skip_invalid=False)
@example(files=[b'[{"compile_s": 1.0, "tag": "x", "note": NaN}]'], good_first=False, skip_invalid=False)
@example(files=[b'[{"compile_s": 1.0, "compile_s": "1.0s"}]'], good_first=True, skip_invalid=False)
@example(files=[('[{"compile_s": 1.0, "host_state": "' + "h" * 5_000 + '"}]').encode()], good_first=False, skip_invalid=False)
@example(files=[('[{"compile_s": 1.0, "cache_state": "' + "w" * 5_000 + '"}]').encode()], good_first=False, skip_invalid=False)
def test_import_of_hostile_records_is_clean_or_one_line_and_all_or_nothing(template, files, good_first, skip_invalid):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        db = tmp / "ledger.db"
        shutil.copyfile(template, db)
        before = _sha(db)
        with sqlite3.connect(db) as con:
            counts_before = _counts(con)
        tree = tmp / "tree" / "local_cpu"
        tree.mkdir(parents=True)
        paths = []
        if good_first:
            paths.append(tree / "a_good.json")
            paths[-1].write_text(json.dumps([dict(GOOD, tag="hostile-suite-cold")]))
        for i, content in enumerate(files):
            paths.append(tree / f"f{i}.json")
            paths[-1].write_bytes(content)

        args = ["import", tree.parent, "--db", db] + (["--skip-invalid"] if skip_invalid else [])
        result = run_cli(*args)

        no_exception(result)
        assert result.exit_code in (0, 1), result.output
        event(f"exit {result.exit_code}" + (" (skip-invalid)" if skip_invalid else ""))
        assert not Path(f"{db}-journal").exists()
        err = result.stderr.splitlines()
        if result.exit_code == 1:
            assert not skip_invalid, result.output
            assert len(err) == 1 and result.stdout == "", result.output
            line = err[0]
            bad = next((p for p in paths if line.startswith(f"error: {p}: ")), None)
            assert bad is not None, line
            assert len(line) - len(str(bad)) < 300, line[:300]  # one short line, not the record echoed back
            records = _python_list(bad.read_bytes())
            rest = line[len(f"error: {bad}: "):]
            if rest.startswith("record "):
                assert records is not None, line  # a record index only where the file is a list
                index = int(rest.split()[1].rstrip(":"))
                assert 0 <= index < len(records), line
            assert _sha(db) == before  # all or nothing: not even the good file went in
            return
        # a clean import: the summary, one line per skipped thing, and only valid JSON stored
        assert all(e.startswith("skipped: ") for e in err), err
        assert len(err) == (int(result.stdout.split(", ")[-1].split()[0]) if err else 0), result.output
        with sqlite3.connect(db) as con:
            counts = _counts(con)
            assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            # provenance and record_json are JSON that SQLite's own json functions read
            assert con.execute("SELECT count(*) FROM compile_records WHERE provenance IS NOT NULL "
                               "AND NOT json_valid(provenance)").fetchone() == (0,)
            assert con.execute("SELECT count(*) FROM instrument_records WHERE NOT json_valid(record_json)").fetchone() == (0,)
            bad_floats = con.execute(f"SELECT {', '.join(DURATION_FIELDS)} FROM compile_records").fetchall()
            stamps = con.execute("SELECT timestamp FROM compile_records WHERE timestamp IS NOT NULL").fetchall()
        # durations finite and never negative; timestamps of the one form "newest" can be read from
        assert all(v is None or (isinstance(v, float) and math.isfinite(v) and v >= 0) for row in bad_floats for v in row)
        assert all(timestamp_ok(t) for (t,) in stamps), stamps
        summary = result.stdout.strip().splitlines()[-1]
        added_compile = int(summary.split(": ", 1)[1].split(" compile rows added")[0])
        added_instrument = int(summary.split("), ")[1].split(" instrument")[0])
        assert counts == (counts_before[0] + added_compile, counts_before[1] + added_instrument)
        if good_first:
            assert added_compile >= 1


@pytest.mark.slow
@pytest.mark.parametrize("depth", [100, 900, 960, 970, 975, 980, 990, 1000, 5000])
@pytest.mark.parametrize("where", ["extra", "ndim", "host_state", "host_state.gpu", "sibling.tag", "sibling.x"])
def test_deep_nesting_at_the_parsers_limit_is_never_a_traceback(tmp_path, template, depth, where):
    """Near the recursion limit a record that json.loads still reads may be too deep
    to repr, re-encode or str() while checking it; scan the edge."""
    nested = "[" * depth + "]" * depth
    if where.startswith("sibling."):
        rec = dict(SIBLING, **{where.split(".")[1]: "@@"})
    elif where == "host_state.gpu":
        rec = dict(GOOD, host_state={"gpu": "@@"})
    else:
        rec = dict(GOOD, **{where: "@@"})
    db = tmp_path / "ledger.db"
    shutil.copyfile(template, db)
    before = _sha(db)
    bad = tmp_path / "in.json"
    bad.write_text("[" + json.dumps(rec).replace('"@@"', nested) + "]")
    result = run_cli("import", bad, "--db", db)
    no_exception(result)
    if result.exit_code == 1:
        assert result.stderr.startswith(f"error: {bad}: ") and len(result.stderr.splitlines()) == 1
        assert _sha(db) == before
    else:
        assert result.exit_code == 0, result.output


# -- `ledger sql`: statements that try to write ----------------------------------------------

WRITES = [
    "DROP TABLE compile_records", "DROP TABLE pins", "DROP VIEW v", "DROP INDEX ix_pins_pin_key",
    "DELETE FROM compile_records", "DELETE FROM alembic_version", "UPDATE compile_records SET compile_s = 0",
    "UPDATE sqlite_master SET sql = ''", "INSERT INTO pins DEFAULT VALUES", "REPLACE INTO compile_records (id) VALUES (1)",
    "INSERT OR REPLACE INTO compile_records SELECT * FROM compile_records",
    "WITH x AS (SELECT 1) DELETE FROM compile_records", "WITH x AS (SELECT 1) UPDATE pins SET compile_s = 1",
    "CREATE TABLE t (x)", "CREATE TEMP TABLE t (x)", "CREATE TEMP VIEW v AS SELECT 1",
    "CREATE TEMP TRIGGER tr AFTER INSERT ON compile_records BEGIN SELECT 1; END",
    "CREATE TRIGGER tr AFTER INSERT ON compile_records BEGIN DELETE FROM pins; END",
    "CREATE VIEW v AS SELECT 1", "CREATE INDEX ix ON compile_records (tag)", "CREATE VIRTUAL TABLE v USING json_each('[1]')",
    "ALTER TABLE compile_records ADD COLUMN x", "ALTER TABLE pins RENAME TO p", "ALTER TABLE pins DROP COLUMN tag",
    "ATTACH DATABASE 'other.db' AS o", "ATTACH 'file:other2.db?mode=rwc' AS o", "ATTACH ':memory:' AS m", "DETACH main",
    "PRAGMA user_version = 7", "PRAGMA journal_mode = WAL", "PRAGMA journal_mode = DELETE", "PRAGMA query_only = 0",
    "PRAGMA writable_schema = 1", "PRAGMA application_id = 1", "PRAGMA foreign_keys = 0", "PRAGMA locking_mode = EXCLUSIVE",
    "PRAGMA schema_version = 1", "PRAGMA page_size = 512", "PRAGMA auto_vacuum = FULL", "PRAGMA optimize",
    "PRAGMA incremental_vacuum", "PRAGMA wal_checkpoint(TRUNCATE)", "PRAGMA integrity_check", "PRAGMA secure_delete = 1",
    "VACUUM", "VACUUM INTO 'copy.db'", "VACUUM main INTO 'copy2.db'", "REINDEX", "REINDEX compile_records", "ANALYZE",
    "BEGIN", "BEGIN IMMEDIATE", "BEGIN EXCLUSIVE", "COMMIT", "END", "ROLLBACK", "SAVEPOINT s", "RELEASE s",
    "SELECT load_extension('libsqlite3_evil')", "SELECT writefile('w.txt', 'x')", "SELECT * FROM sqlite_dbpage",
]
TRICKS = [
    "COMMIT; {w}", "ROLLBACK; {w}", "END; {w}", "SELECT 1; {w}", "{w}; SELECT 1", "SELECT 1 /* ; */; {w}",
    "SELECT 1 -- \n; {w}", "/* x */ {w}", "{w} -- trailing", "{w};", "{w};;", "  {w}\n", "{w}; COMMIT",
    "BEGIN; {w}; COMMIT", "EXPLAIN {w}", "EXPLAIN QUERY PLAN {w}", "SELECT * FROM ({w})",
    "WITH t AS ({w}) SELECT 1", "SELECT '{w}'", '"{w}"', "{w}\x00; DROP TABLE compile_records",
]
READS = [
    "SELECT count(*) FROM compile_records", "SELECT * FROM pins LIMIT 2", "PRAGMA table_info(pins)",
    "PRAGMA user_version", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 9) SELECT x FROM c",
    "SELECT * FROM compile_records, json_each('[1, 2]') LIMIT 1", "SELECT x'00ff', 1e999, -1e999, 0.0 / 0",
    "SELECT CAST(x'ff' AS TEXT)", "EXPLAIN SELECT 1",
]
# PostgreSQL: statements that must be refused. Each would write, or would end the
# read-only transaction to write in another, or cannot run inside a transaction.
# (COPY to a server file or program: refused to a role without pg_write_server_files
# and pg_execute_server_program, as ci/postgres.sh's ledger_test.)
PG_WRITES = [
    "DELETE FROM compile_records", "DELETE FROM alembic_version", "UPDATE compile_records SET compile_s = 0",
    "INSERT INTO pins DEFAULT VALUES", "TRUNCATE compile_records", "TRUNCATE pins CASCADE",
    "MERGE INTO pins p USING pins q ON false WHEN NOT MATCHED THEN INSERT DEFAULT VALUES",
    "DROP TABLE pins", "DROP TABLE compile_records CASCADE", "DROP INDEX ix_pins_pin_key", "DROP SCHEMA public CASCADE",
    "ALTER TABLE pins ADD COLUMN x int", "ALTER TABLE pins RENAME TO p", "ALTER TABLE compile_records DISABLE TRIGGER ALL",
    "ALTER SEQUENCE compile_records_id_seq RESTART 1", "CREATE TABLE t (x int)", "CREATE INDEX ix ON compile_records (tag)",
    "CREATE VIEW v AS SELECT 1", "CREATE SCHEMA s", "CREATE SEQUENCE s", "CREATE TEMP TABLE t (x int)",
    "CREATE TEMP TABLE t AS SELECT * FROM pins", "SELECT * INTO TEMP t FROM pins", "CREATE TEMP SEQUENCE s",
    "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'", "CREATE PROCEDURE p() LANGUAGE sql AS 'DELETE FROM pins'",
    "CREATE EXTENSION IF NOT EXISTS plpgsql", "COMMENT ON TABLE pins IS 'x'", "GRANT SELECT ON pins TO PUBLIC",
    "REVOKE ALL ON compile_records FROM CURRENT_USER", "SECURITY LABEL ON TABLE pins IS 'x'",
    "ALTER ROLE CURRENT_USER SET default_transaction_read_only = off",
    "ALTER SYSTEM SET default_transaction_read_only = off",
    "COMMIT; DELETE FROM compile_records", "ROLLBACK; DELETE FROM compile_records", "END; DELETE FROM pins",
    "COMMIT AND CHAIN; DELETE FROM pins", "START TRANSACTION READ WRITE; DELETE FROM compile_records",
    "BEGIN READ WRITE; DELETE FROM pins; COMMIT", "SET TRANSACTION READ WRITE; DELETE FROM compile_records",
    "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE; DELETE FROM pins",
    "SELECT set_config('default_transaction_read_only', 'off', false); DELETE FROM pins",
    "SELECT set_config('transaction_read_only', 'off', true)", "SELECT 1 FROM compile_records FOR UPDATE",
    "DO $$BEGIN DELETE FROM compile_records; END$$",
    "DO $$BEGIN COMMIT; SET TRANSACTION READ WRITE; DELETE FROM compile_records; END$$",
    "DO $$BEGIN PERFORM set_config('transaction_read_only', 'off', true); DELETE FROM pins; END$$",
    "CALL p()", "COPY compile_records TO '/tmp/ledger_hostile_copy'", "COPY compile_records FROM STDIN",
    "COPY compile_records TO STDOUT", "COPY (SELECT 1) TO PROGRAM 'touch /tmp/ledger_hostile_copy'",
    "VACUUM", "VACUUM FULL compile_records", "CLUSTER", "SELECT nextval('compile_records_id_seq')",
    "SELECT setval('compile_records_id_seq', 1)", "SELECT lo_import('/etc/hostname')",
    "WITH d AS (DELETE FROM compile_records RETURNING 1) SELECT count(*) FROM d",
    "WITH u AS (UPDATE pins SET compile_s = 0 RETURNING *) SELECT * FROM u",
    "WITH i AS (INSERT INTO pins DEFAULT VALUES RETURNING 1) SELECT 1",
    "SELECT query_to_xml('DELETE FROM compile_records RETURNING 1', true, false, '')",
    "EXPLAIN ANALYZE DELETE FROM compile_records", "PREPARE TRANSACTION 'ledger_hostile'",
    "SELECT pg_terminate_backend(pg_backend_pid())", "DISCARD ALL",
]
# PostgreSQL: statements that may run, and change nothing that outlives the call:
# session and transaction settings, locks, notifications, prepared statements and
# large objects are rolled back with the transaction or end with the session.
PG_SESSION = [
    "COMMIT", "ROLLBACK", "COMMIT AND CHAIN", "END", "BEGIN READ WRITE", "START TRANSACTION READ WRITE",
    "SET TRANSACTION READ WRITE", "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
    "SET default_transaction_read_only = off", "SET transaction_read_only = off",
    "SELECT set_config('default_transaction_read_only', 'off', false)", "RESET ALL", "DISCARD TEMP",
    "SET search_path = pg_temp, public", "SET ROLE NONE", "LOCK TABLE compile_records", "LOCK TABLE pins IN SHARE MODE",
    "SELECT lo_create(0)", "SELECT lo_from_bytea(0, 'x')", "PREPARE p AS DELETE FROM compile_records", "EXECUTE p",
    "LISTEN ledger", "NOTIFY ledger, 'x'", "SELECT pg_notify('ledger', 'x')", "UNLISTEN *",
    "DECLARE c CURSOR WITH HOLD FOR SELECT * FROM compile_records", "SELECT pg_advisory_lock(1)", "SAVEPOINT s",
    "ANALYZE", "REINDEX TABLE compile_records", "SELECT txid_current()",
]
PG_TRICKS = [
    "EXPLAIN ANALYZE {w}", "EXPLAIN (ANALYZE, FORMAT JSON) {w}", "PREPARE q AS {w}", "DO $$BEGIN EXECUTE $q${w}$q$; END$$",
    "SELECT query_to_xml($q${w}$q$, true, false, '')", "START TRANSACTION READ WRITE; {w}; COMMIT",
    "SET TRANSACTION READ WRITE; {w}", "COMMIT AND CHAIN; {w}",
]
PG_READS = [
    "SELECT count(*) FROM compile_records", "SELECT * FROM pins LIMIT 2", "EXPLAIN SELECT 1",
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 9) SELECT x FROM c",
    "SELECT table_name FROM information_schema.tables", "SHOW default_transaction_read_only",
    "SELECT 'NaN'::numeric, '-infinity'::float8, '\\x00ff'::bytea, '{1,2}'::int[], '{\"a\": [1]}'::jsonb",
    "SELECT 'infinity'::timestamp", "SELECT 1e308::float8 * 10", "SELECT E'a\\nb' AS \"c\nd\"",
]
# Calls that try to leave something behind for the next call; one `ledger sql` is one
# session, so the next call's write must find none of it.
SQLITE_SESSION = [
    "PRAGMA query_only = OFF", "PRAGMA writable_schema = 1", "PRAGMA journal_mode = DELETE",
    "PRAGMA locking_mode = EXCLUSIVE", "BEGIN IMMEDIATE", "ATTACH ':memory:' AS m", "SAVEPOINT s",
]
SESSION = {"sqlite": SQLITE_SESSION, "postgresql": PG_SESSION}
FOLLOWING_WRITES = ["DELETE FROM compile_records", "INSERT INTO pins DEFAULT VALUES",
                    "UPDATE compile_records SET compile_s = 0", "DROP TABLE pins"]
noise = st.lists(st.sampled_from(list(" \t\n;-/*'\"()`[]x0é\u2028\r\\") + ["--", "/*", "*/", "; "]), max_size=8).map("".join)


@st.composite
def statements(draw, backend: str = "sqlite") -> str:
    pg = backend == "postgresql"
    write = draw(st.sampled_from(PG_WRITES + PG_SESSION if pg else WRITES))
    if draw(st.booleans()):
        write = "".join(c.upper() if draw(st.booleans()) else c.lower() for c in write) if len(write) < 40 else write.lower()
    shape = draw(st.sampled_from(["plain", "trick", "noise", "read", "text"]))
    if shape == "trick":
        return draw(st.sampled_from(TRICKS + PG_TRICKS if pg else TRICKS)).format(w=write)
    if shape == "noise":
        return draw(noise) + write + draw(noise)
    if shape == "read":
        return draw(st.sampled_from(PG_READS if pg else READS)) + draw(
            st.sampled_from(["", ";", "; " + write, " " + draw(noise)]))
    if shape == "text":
        return draw(st.one_of(any_text, lone_surrogates.map(lambda s: f"SELECT '{s}'"), noise))
    return write


@st.composite
def call_sequences(draw, backend: str) -> list[str]:
    """One call, or a call that tries to change the session and then one more."""
    return [*draw(st.lists(st.sampled_from(SESSION[backend]), max_size=1)), draw(statements(backend))]


def _files(*dirs: Path) -> set[Path]:
    return {p for d in dirs for p in d.rglob("*")}


def _schema_and_counts(db: Path):
    con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        schema = con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name").fetchall()
        counts = {name: con.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
                  for kind, name, _table, _sql in schema if kind == "table"}
        user_version = con.execute("PRAGMA user_version").fetchone()
        return schema, counts, user_version
    finally:
        con.close()


# What a PostgreSQL session may not leave changed. Not the planner's statistics
# (ANALYZE runs in a read-only transaction and writes reltuples in place) nor the
# server's activity counters: a read changes those too.
PG_FINGERPRINT = [
    # every relation outside the system schemas (tables, indexes, sequences, views), and its grants
    ("SELECT n.nspname, c.relname, c.relkind, c.relacl::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
     " WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') AND n.nspname !~ '^pg_(toast_)?temp_'"
     " ORDER BY 1, 2"),
    "SELECT nspname, nspacl::text FROM pg_namespace WHERE nspname !~ '^pg_(toast_)?temp_' ORDER BY 1",
    ("SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns"
     " WHERE table_schema = 'public' ORDER BY 1, ordinal_position"),
    "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1",
    "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE connamespace = 'public'::regnamespace ORDER BY 1",
    "SELECT tgrelid::regclass::text, tgname, tgenabled FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1, 2",
    "SELECT oid::regprocedure::text FROM pg_proc WHERE pronamespace = 'public'::regnamespace ORDER BY 1",
    "SELECT extname, extversion FROM pg_extension ORDER BY 1",
    # a sequence is not rolled back: nextval must be refused, not undone
    "SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = 'public' ORDER BY 1",
    "SELECT count(*) FROM pg_largeobject_metadata",
    "SELECT count(*) FROM pg_description",
    "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() ORDER BY 1",
    # settings that the next session would start with (ALTER ROLE / DATABASE ... SET)
    ("SELECT setdatabase <> 0, setrole <> 0, setconfig FROM pg_db_role_setting"
     " WHERE setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))"
     " AND setrole IN (0, (SELECT oid FROM pg_roles WHERE rolname = current_user)) ORDER BY 1, 2"),
    "SELECT datallowconn, datconnlimit, datacl::text FROM pg_database WHERE datname = current_database()",
]
COPY_TARGET = Path("/tmp/ledger_hostile_copy")  # where the COPY ... TO statements above would write


def _pg_fingerprint(db: PgDb) -> dict:
    import psycopg

    with psycopg.connect(db.conninfo, autocommit=True) as con:
        out = {sql: con.execute(sql).fetchall() for sql in PG_FINGERPRINT}
        # every row of every table, as text, in one digest per table
        for (table,) in con.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1").fetchall():
            out[table] = con.execute(f'SELECT count(*), md5(coalesce(string_agg(r::text, chr(10) ORDER BY r::text), \'\'))'
                                     f' FROM public."{table}" r').fetchone()
    return out


def _state(db: Path | PgDb):
    """Everything `ledger sql` must leave as it was."""
    if isinstance(db, PgDb):
        return _pg_fingerprint(db), _files(Path.cwd()), COPY_TARGET.exists()
    return _sha(db), _schema_and_counts(db), _files(db.parent, Path.cwd())


@pytest.fixture(scope="module")
def sqlite_sql_db(template, tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("sql") / "ledger.db"
    shutil.copyfile(template, db)
    return db


@pytest.fixture(scope="module")
def pg_sql_db():
    """The template's content (the corpus and its pins) in one PostgreSQL database for
    the module: `ledger sql` must leave it as it is, so every case can share it.
    None without a server (conftest's pg_db then says why)."""
    base = os.environ.get(PG_ENV)
    if not base:
        yield None
        return
    import psycopg

    admin = PgDb(base).conninfo
    name = f"ledger_t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{name}"')
    db = PgDb(base.rsplit("/", 1)[0] + "/" + name)
    try:
        assert run_cli("import", CORPUS, "--db", db).exit_code == 0
        assert run_cli("pins", "update", "--db", db).exit_code == 0
        yield db
    finally:
        with psycopg.connect(admin, autocommit=True) as con:
            con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_db(request) -> Path | PgDb:
    """The ledger `ledger sql` runs on: a SQLite file, or a PostgreSQL database."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_sql_db")
    db = request.getfixturevalue("pg_sql_db")
    # without a server pg_db skips (or, with LEDGER_REQUIRE_PG, fails), saying why
    return db if db is not None else request.getfixturevalue("pg_db")


# PostgreSQL's examples cost a connection each, and its fingerprint a dozen queries:
# fewer drawn, and every session statement tried once, followed by a write.
MAX_EXAMPLES = {"sqlite": examples(300), "postgresql": examples(60)}
EXAMPLES = [
    ["SELECT 'a\udcff'"],  # argv that is not UTF-8 arrives with surrogate escapes
    ["SELECT 'abc\ndef"],  # SQLite quotes the bad token, line break and all
    ["SELECT 1 FROM [a\nb]"],
    ["SELECT 1 FROM \"a\u2028b\""],
    ["-- DROP TABLE compile_records"],  # an option to the command line: a usage error
]


@pytest.mark.slow
def test_sql_never_writes_and_errors_are_one_line(sql_db):
    backend = "postgresql" if isinstance(sql_db, PgDb) else "sqlite"

    @settings(max_examples=MAX_EXAMPLES[backend], **SETTINGS)
    @given(calls=call_sequences(backend))
    def check(calls):
        before = _state(sql_db)
        for statement in calls:
            result = run_cli("sql", statement, "--db", sql_db)
            no_exception(result)
            assert result.exit_code in (0, 1, 2), result.output
            event(f"exit {result.exit_code}")
            if result.exit_code == 1:
                assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1, result.stderr
                assert result.stdout == ""
            assert _state(sql_db) == before, calls

    for calls in EXAMPLES + [[s, FOLLOWING_WRITES[i % len(FOLLOWING_WRITES)]] for i, s in enumerate(SESSION[backend])]:
        check = example(calls=calls)(check)
    check()


@pytest.mark.parametrize("sql_db, write", [*(("sqlite", w) for w in WRITES), *(("postgresql", w) for w in PG_WRITES)],
                         indirect=["sql_db"])
def test_every_write_is_refused(sql_db, write):
    """The list itself, each once: none of them may run (a refusal, or the database's
    own error for one that names nothing real), and nothing changes."""
    before = _state(sql_db)
    result = run_cli("sql", write, "--db", sql_db)
    no_exception(result)
    assert result.exit_code == 1, (write, result.output)
    assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1
    assert _state(sql_db) == before


# -- report --update targets: the bytes outside the markers, whatever they are ----------------

START, END = b"<!-- ledger-report:start -->", b"<!-- ledger-report:end -->"
file_pieces = st.one_of(
    st.sampled_from([b"\r\n", b"\n", b"\r", b"\n\r", START, END, b"<!--", b"-->", b"<!-- ledger-report:",
                     b"\xef\xbb\xbf", b"\xff\xfe", b"\x00", b"caf\xe9", "caf\u00e9 \U0001f600".encode(), b" ", b"# T"]),
    st.binary(max_size=12),
)
readme_bytes = st.lists(file_pieces, max_size=14).map(b"".join)


def _block_span(data: bytes) -> tuple[int, int] | None:
    """Where the block's content is, as the README's own rule says (the first start
    marker, the first end marker after it, no second start marker between), or None."""
    a = data.find(START)
    b = data.find(END, a + len(START)) if a >= 0 else -1
    if a < 0 or b < 0 or 0 <= data.find(START, a + len(START)) < b:
        return None
    return a + len(START), b


@pytest.mark.slow
@settings(**SETTINGS)
@given(data=readme_bytes, check=st.booleans())
@example(data=b"# T\r\n\r\n" + START + b"\r\nold\r\n" + END + b"\r\nafter\r\n", check=False)
@example(data=b"a\rb\n" + START + END + b"\xff\r", check=False)
@example(data=START + START + END, check=False)
@example(data=END + START + b"\n" + END + END, check=False)
@example(data=b"x" * 300_000 + START + END + b"\r\n" * 100_000, check=False)  # a huge file, one write
def test_report_update_changes_only_the_block_or_refuses_in_one_line(template, data, check):
    with tempfile.TemporaryDirectory() as tmp:
        readme = Path(tmp) / "README.md"
        readme.write_bytes(data)
        result = run_cli("report", "--update", readme, "--db", template, *(["--check"] if check else []))
        no_exception(result)
        after = readme.read_bytes()
        span = _block_span(data)
        if span is None:
            assert (result.exit_code, result.stdout) == (1, ""), result.output
            assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")
            assert after == data and os.listdir(tmp) == ["README.md"]
            return
        a, b = span
        event("stale" if result.exit_code == 1 else f"exit {result.exit_code}")
        if check:
            assert result.exit_code in (0, 1) and after == data
            return
        assert result.exit_code == 0, result.output
        assert after[:a] == data[:a] and after.endswith(data[b:]), (data, after)
        assert _block_span(after) == (a, len(after) - len(data) + b)  # the same block, found again
        assert os.listdir(tmp) == ["README.md"]  # no temp file left
        again = run_cli("report", "--update", readme, "--db", template, "--check")
        assert (again.exit_code, again.stdout) == (0, f"{readme}: report block is up to date\n")


# -- names that are not UTF-8, ids out of range, filters that match nothing -----------------

def _not_utf8(db) -> tuple[str, str]:
    """A --db naming `db`'s backend with a byte that is not UTF-8 (argv carries it as a
    lone surrogate), and how the error shows it."""
    if isinstance(db, PgDb):
        return f"{db}\udcff", f"{db}\\xff"
    name = os.fsdecode(os.fsencode(db.parent) + b"/bad\xff.db")
    return name, f"{db.parent}/bad\\xff.db"


NOT_UTF8_COMMANDS = {
    "probe": ["probe", "-t", "jit"], "import": ["import", str(CORPUS)], "merge": ["merge", "{good}"],
    "merge source": ["merge", "{bad}", "--db", "{good}"], "report": ["report"], "pins update": ["pins", "update"],
    "pins list": ["pins", "list"], "db upgrade": ["db", "upgrade"], "db current": ["db", "current"],
    "check": ["check"], "explain": ["explain", "1"], "export": ["export"], "sql": ["sql", "SELECT 1"],
}


@pytest.mark.slow
@pytest.mark.parametrize("command", NOT_UTF8_COMMANDS)
def test_a_database_name_that_is_not_utf8_is_one_line(any_db, tmp_path, monkeypatch, command):
    """It was a traceback from deep in SQLAlchemy (UnicodeEncodeError), and `probe`
    measured first. The resolver, where every database enters, refuses it."""
    from ledger import probes

    def measured(*args, **kwargs):
        raise AssertionError("the probe measured before its database was checked")

    monkeypatch.setattr(probes, "run_probe", measured)
    good = tmp_path / "good.db"
    assert run_cli("import", CORPUS, "--db", good).exit_code == 0
    bad, shown = _not_utf8(any_db)
    if not isinstance(any_db, PgDb):
        shutil.copyfile(good, os.fsencode(bad))  # the file is there: its name is the trouble
    args = [a.format(good=good, bad=bad) for a in NOT_UTF8_COMMANDS[command]]
    result = run_cli(*args, *([] if command == "merge source" else ["--db", bad]))
    no_exception(result)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == f"error: the database name {shown} is not UTF-8 text: give it a UTF-8 name (or a link with one)\n"


def test_a_database_name_that_is_not_utf8_in_ledger_db_too(tmp_path, monkeypatch):
    bad, shown = _not_utf8(tmp_path / "x.db")
    monkeypatch.setenv("LEDGER_DB", bad)
    result = run_cli("report")
    assert (result.exit_code, result.stderr) == (
        1, f"error: the database name {shown} is not UTF-8 text: give it a UTF-8 name (or a link with one)\n")


@pytest.mark.slow
@pytest.mark.parametrize("command", [["report"], ["db", "upgrade"], ["pins", "update"], ["sql", "SELECT 1"]])
def test_database_paths_with_a_newline_a_quote_or_no_end(tmp_path, command):
    """A newline or a quote is part of a name like any other (the file is made where
    asked, and an error shows the newline escaped); a name too long for the system
    was an OSError traceback."""
    for name in ("new\nline.db", "it's \"quoted\".db"):
        db = tmp_path / name
        assert run_cli("db", "upgrade", "--db", db).output == "at revision 0008\n" or db.exists()
        result = run_cli(*command, "--db", db)
        no_exception(result)
        assert result.exit_code == 0, result.output
    huge = tmp_path / ("x" * 5000)
    result = run_cli(*command, "--db", huge)
    no_exception(result)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (f"error: cannot use the database path {str(huge)[:200]}... ({len(str(huge))} characters):"
                             " File name too long\n")
    missing = run_cli("report", "--db", tmp_path / "new\nmissing.db")
    assert missing.stderr == f"error: no ledger database at {tmp_path}/new\\nmissing.db\n"


OUT_OF_RANGE = {
    "99999999999999999999": "99999999999999999999",  # it was OverflowError (SQLite) out of the driver
    str(2**63): str(2**63),
    "0": "0",
    "-1": "-1",
    "9" * 4000: "9" * 20 + "... (4000 digits)",
}


def test_explain_of_an_id_out_of_range_is_one_line(any_db):
    assert run_cli("import", CORPUS, "--db", any_db).exit_code == 0
    for asked, shown in OUT_OF_RANGE.items():
        result = run_cli("explain", "--db", any_db, "--", asked)
        no_exception(result)
        assert (result.exit_code, result.stdout) == (1, "")
        assert result.stderr == f"error: no compile row with id {shown}: ids run from 1 to {2**63 - 1}\n"
    for in_range in (2**31, 2**63 - 1):  # past PostgreSQL's integer column, and the last id there can be
        result = run_cli("explain", "--db", any_db, str(in_range))
        assert (result.exit_code, result.stderr) == (1, f"error: no compile row with id {in_range}\n")


@pytest.mark.parametrize("filters, shown", [
    (["--hostname", "nomatch", "--repin"], "--hostname nomatch"),
    (["--transform", "bogus"], "--transform bogus"),
    (["--transform", "bogus", "--check"], "--transform bogus"),
    (["--hostname", "euclid-ral-compute-22", "--transform", "bogus"],
     "--hostname euclid-ral-compute-22 --transform bogus"),
    (["--hostname", "a\nb"], "--hostname 'a\\nb'"),
    (["--model-type", "it's"], "--model-type 'it'\"'\"'s'"),
    (["--dataset-class", "d" * 100_000], "--dataset-class '" + "d" * 60 + "... (100000 characters)'"),
], ids=["hostname", "transform", "check", "two", "newline", "quote", "huge"])
def test_pins_update_with_filters_that_match_no_row_says_so(any_db, filters, shown):
    """It said "0 pins: 0 new, 0 repinned, 0 unchanged" and exit 0, as if the ledger
    had nothing to pin: a typo in a hostname looked like success. Exit 2 (a usage error,
    as for every command with row filters: test_row_filters.py), nothing written."""
    assert run_cli("import", CORPUS, "--db", any_db).exit_code == 0
    result = run_cli("pins", "update", *filters, "--db", any_db)
    no_exception(result)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"error: no compile row matches {shown}: nothing to pin\n"
    assert run_cli("pins", "list", "--json", "--db", any_db).stdout.strip() == "[]"
    matching = run_cli("pins", "update", "--hostname", "euclid-ral-compute-22", "--db", any_db)
    assert (matching.exit_code, matching.stdout.splitlines()[-1]) == (0, "6 pins: 6 new, 0 repinned, 0 unchanged")
    again = run_cli("pins", "update", "--hostname", "euclid-ral-compute-22", "--db", any_db)
    assert again.stdout == "6 pins: 0 new, 0 repinned, 6 unchanged\n"


# -- rows: import and merge hold the tag and the cell to one rule ---------------------------
# ledger/record_validation.check_text_value: one line of printable text (no control
# character, no line or paragraph separator), storable, at most TEXT_VALUE_MAX characters.

ONE_LINE = "; a tag or cell value is one line of printable text"

ROW_CASES = {
    "tag": ("a\nregression x", "tag holds a control character ('\\n')" + ONE_LINE),
    "dataset_class": ("d\rx", "dataset_class holds a control character ('\\r')" + ONE_LINE),
    "instrument": ("\x1b[31mred", "instrument holds a control character ('\\x1b')" + ONE_LINE),
    "model_type": ("m\u2029", "model_type holds a control character ('\\u2029')" + ONE_LINE),
    "transform": ("j\tit", "transform holds a control character ('\\t')" + ONE_LINE),
}


@pytest.mark.slow
@pytest.mark.parametrize("plain", [True, False], ids=["legacy-fields", "with-extras"])
@pytest.mark.parametrize("field", ROW_CASES)
def test_import_refuses_a_control_character_in_the_tag_or_cell_naming_the_record(tmp_path, field, plain):
    """Both paths of the importer: a file of legacy fields only (checked a column at a
    time) and one with other fields (a record at a time)."""
    value, words = ROW_CASES[field]
    good = dict(GOOD) if plain else dict(GOOD, note="extra")
    path = tmp_path / "in.json"
    path.write_text(json.dumps([good, dict(good, **{field: value})]))
    db = tmp_path / "ledger.db"
    result = run_cli("import", path, "--db", db)
    no_exception(result)
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", f"error: {path}: record 1: {words}\n")
    long = dict(good, **{field: "x" * 201})
    path.write_text(json.dumps([long]))
    result = run_cli("import", path, "--db", db)
    assert result.stderr == f"error: {path}: record 0: {field} is 201 characters long; a tag or cell value is at most 200\n"
    path.write_text(json.dumps([dict(good, **{field: "y" * 200 + ""}), dict(good, tag="it's \"q\"")]))
    assert run_cli("import", path, "--db", db).exit_code == 0


def test_a_sibling_records_tag_is_held_to_the_rule_too(tmp_path):
    path = tmp_path / "in.json"
    path.write_text(json.dumps([dict(SIBLING, tag="export\nprobe")]))
    result = run_cli("import", path, "--db", tmp_path / "ledger.db")
    words = f"tag holds a control character ('\\n'){ONE_LINE}"
    assert (result.exit_code, result.stderr) == (1, f"error: {path}: record 0: {words}\n")


# -- tags and cell values typed on the command line -----------------------------------------
# One rule (ledger/record_validation.check_text_value), checked as the option is parsed:
# a value that is not UTF-8 (argv carries the byte as a lone surrogate), holds a control
# character or line separator, or is over TEXT_VALUE_MAX characters is refused in one
# line before any work, and a row written later never holds one. A quote is text.

BAD_VALUES = {
    "newline": ("a\nregression x", "holds a control character ('\\n')" + ONE_LINE),
    "separator": ("a\u2028b", "holds a control character ('\\u2028')" + ONE_LINE),
    "escape": ("\x1b[2Jred", "holds a control character ('\\x1b')" + ONE_LINE),
    "surrogate": ("a\udcff", "is not storable text (a NUL character or invalid UTF-8)"),
    "huge": ("t" * 100_000, "is 100000 characters long; a tag or cell value is at most 200"),
}
TEXT_OPTIONS = {"probe": ("--tag", "--dataset-class", "--instrument", "--model-type"),
                "predict": ("--dataset-class", "--instrument", "--model-type")}
FINE = {"--tag": "it's \"quoted\" `x` $HOME ; café ✓", "--dataset-class": "d'q\"" + "x" * 195,
        "--instrument": "i \\n not a newline", "--model-type": "m<!-- -->"}


def _no_work(monkeypatch) -> None:
    from ledger import probes
    from ledger.predict import run

    def worked(*args, **kwargs):
        raise AssertionError("work was done before the option was checked")

    monkeypatch.setattr(probes, "run_probe", worked)
    monkeypatch.setattr(run, "compute", worked)


@pytest.mark.parametrize("value, words", BAD_VALUES.values(), ids=list(BAD_VALUES))
@pytest.mark.parametrize("command, option", [(c, o) for c, opts in TEXT_OPTIONS.items() for o in opts])
def test_a_bad_tag_or_cell_value_is_refused_before_any_work(tmp_path, monkeypatch, command, option, value, words):
    """It was probed first (minutes of compiles) and refused at the write, or (a newline)
    stored, to print a forged line in `pins update` later. `predict` exits 2 on a usage
    error (1 says a transform is cold)."""
    _no_work(monkeypatch)
    db, cache = tmp_path / "ledger.db", tmp_path / "cache"
    result = run_cli(command, "-o", "toy", "-t", "jit", "--cache-dir", cache, option, value, "--db", db)
    no_exception(result)
    assert (result.exit_code, result.stdout, result.stderr) == (
        2 if command == "predict" else 1, "", f"error: {option} {words}\n")
    assert not db.exists() and not cache.exists()  # nothing made: it stopped at the option


def test_quotes_and_other_text_are_accepted_and_stored_exactly(tmp_path, monkeypatch):
    """A value the rule admits goes through the probe's whole path to the row as typed
    (a fake probe hands the record over: the writer and the validator are real)."""
    from ledger.probes import ProbeOutcome

    from ledger import probes
    from ledger.record import blank_record

    def probed(spec, on_record, on_progress):
        rec = dict(blank_record(), **spec.cell(), tag=spec.tag, transform="jit", objective=spec.objective,
                   run_id="r1", status="ok", compile_s=1.0, cache_state="cold", cache_state_source="measured_files")
        on_record(rec)
        return ProbeOutcome(run_id="r1", records=[rec])

    monkeypatch.setattr(probes, "run_probe", probed)
    db = tmp_path / "ledger.db"
    result = run_cli("probe", "-o", "toy", "-t", "jit", *[a for o, v in FINE.items() for a in (o, v)], "--db", db)
    assert result.exit_code == 0, result.output
    assert query(db, "SELECT tag, dataset_class, instrument, model_type FROM compile_records") == [tuple(FINE.values())]


def test_predict_accepts_a_quote(tmp_path, monkeypatch):
    from ledger.errors import LedgerError
    from ledger.predict import run

    def computed(spec, *timeout_and_flag):
        raise LedgerError(f"computed {spec.dataset_class} {spec.model_type}")

    monkeypatch.setattr(run, "compute", computed)
    result = run_cli("predict", "-o", "toy", "-t", "jit", "--cache-dir", tmp_path / "cache",
                     "--dataset-class", FINE["--dataset-class"], "--model-type", FINE["--model-type"])
    assert result.stderr == f"error: computed {FINE['--dataset-class']} {FINE['--model-type']}\n"


def _recorded(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """`ledger record` as a user runs it: in a process of its own (it execs the command)."""
    from .case_kinds import LEDGER

    return subprocess.run([str(LEDGER), "record", *args], check=False, capture_output=True, text=True, cwd=tmp_path,
                          timeout=120, env={**os.environ, "JAX_PLATFORMS": jax_platform()})


RECORD_CASES = [*((o, *BAD_VALUES["newline"]) for o in TEXT_OPTIONS["probe"]),
                *(("--tag", *BAD_VALUES[k]) for k in ("separator", "surrogate", "huge"))]


@pytest.mark.parametrize("option, value, words", RECORD_CASES,
                         ids=[f"{o}-{k}" for o, k in zip([c[0] for c in RECORD_CASES],
                                                          ["newline"] * 4 + ["separator", "surrogate", "huge"])])
@pytest.mark.slow
def test_record_refuses_a_bad_value_without_running_the_command(tmp_path, option, value, words):
    """`ledger record --tag $'a\\nb' -- CMD`: refused before CMD starts (a byte that is
    not UTF-8 reaches argv as a lone surrogate; subprocess passes it back as the byte)."""
    db = tmp_path / "ledger.db"
    done = _recorded(tmp_path, option, value, "--db", str(db), "--", sys.executable, "-c", "print('the command ran')")
    assert (done.returncode, done.stdout, done.stderr) == (1, "", f"error: {option} {words}\n")
    assert not db.exists()


@pytest.mark.jax
def test_record_stores_a_quoted_tag_exactly(tmp_path):
    db = tmp_path / "ledger.db"
    done = _recorded(tmp_path, "--tag", FINE["--tag"], "--model-type", FINE["--model-type"], "--db", str(db), "--",
                     sys.executable, "-c", "import jax; print(jax.jit(lambda x: x + 1)(1.0))")
    assert (done.returncode, done.stdout) == (0, "2.0\n"), done.stderr
    assert set(query(db, "SELECT tag, model_type FROM compile_records")) == {(FINE["--tag"], FINE["--model-type"])}


@pytest.mark.parametrize("field", ["tag", "dataset_class", "instrument", "model_type"])
def test_probe_spec_holds_its_text_to_the_rule_too(tmp_path, field):
    """What does not come through the options (a sweep's task calls the probe command
    directly; probes' Python API) is refused where the spec is made, before a compile."""
    from ledger.probes import ProbeError, ProbeSpec

    with pytest.raises(ProbeError) as refused:
        ProbeSpec.make(objective="toy", cache_dir=str(tmp_path / "cache"), **{field: "a\nb"})
    assert str(refused.value) == f"{field} holds a control character ('\\n'){ONE_LINE}"
    assert not (tmp_path / "cache").exists()
    assert ProbeSpec.make(objective="toy", **{field: FINE["--tag"]}).is_valid


# -- a value stored before the rule: shown escaped, never a line of its own ----------------

def _copy_of_row(db, row_id: int, **changes) -> int:
    """A copy of a row with `changes`, by plain SQL: what no validator saw."""
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    with con:
        row = dict(con.execute("SELECT * FROM compile_records WHERE id = ?", (row_id,)).fetchone(), id=None,
                   record_key=None, **changes)
        cur = con.execute(f"INSERT INTO compile_records ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                          list(row.values()))
    con.close()
    return cur.lastrowid


def test_a_stored_line_break_cannot_forge_a_line_of_output(db):
    """A tag or cell that holds a newline (an old row, or one written by SQL) forged a
    line: `pins update` printed "new     forged ..." of its own, `check` a
    "regression   fake ...", the report a broken table row. Each is shown escaped."""
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    (base,) = query(db, "SELECT min(id) FROM compile_records WHERE cache_state = 'warm'")[0]
    cell, tag = "img\nregression   fake", "t\nnew     forged"
    pinned = _copy_of_row(db, base, dataset_class=cell, tag=tag, compile_s=1.0, timestamp="2030-01-01T00:00:00")
    key = "local_cpu/DESKTOP-H143S82 jax 0.10.2 img\\nregression   fake/delaunay_matern/hst jit (n_batch 16, batch_size 4)"

    update = run_cli("pins", "update", "--db", db)
    lines = update.stdout.splitlines()
    assert update.exit_code == 0 and lines[-1] == "26 pins: 26 new, 0 repinned, 0 unchanged" and len(lines) == 27
    assert f"new     {key}: row {pinned} 1s (t\\nnew     forged, 2030-01-01T00:00:00)" in lines

    listed = run_cli("pins", "list", "--db", db).stdout.splitlines()
    assert len(listed) == 2 + 26
    (row,) = [ln for ln in listed if "img" in ln and "regression" in ln]
    assert "  img\\nregression   fake  " in row and "  t\\nnew     forged  " in row

    slow = _copy_of_row(db, pinned, tag="x", compile_s=100.0, timestamp="2030-01-02T00:00:00")
    check = run_cli("check", "--db", db)
    (pin_id,) = query(db, "SELECT id FROM pins WHERE row_id = ?", (pinned,))[0]
    assert check.stdout.splitlines() == [
        f"regression    {key}: row {slow} compile_s 100s vs pin 1s (pin {pin_id}) = 100.00x > 1.5x",
        "check run 1 (tolerance 1.5x): 0 ok, 1 regression, 0 inconclusive, 0 went-cold"]

    report = run_cli("report", "--db", db).stdout.splitlines()
    assert "| img\\nregression   fake / delaunay_matern / hst | jit | 100.00 | - | - | 1.00 | regression | x |" \
        " 2030-01-02 00:00 |" in report
    assert not any(ln.startswith(("regression", "new     forged")) for ln in report)
