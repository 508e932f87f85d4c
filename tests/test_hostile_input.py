"""Hostile input, property-tested (hypothesis): malformed and adversarial records for
`ledger import`, and statements that try to write for `ledger sql`.

The properties are the README's promises, whatever the input:
  - no traceback; a user error is one line on stderr (`error: ...`) and exit code 1
  - `ledger import` is all or nothing: a failure names the file (and the record
    index, for a bad record) and leaves the database byte for byte as it was
  - `ledger sql` changes nothing: not a row, not the schema, no new file

Each example gets a copy of a ledger made once per module (hypothesis runs many
examples through one call of the test function, so a function-scoped tmp_path would
be shared between them).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from ledger.record import LEGACY_FIELDS

from .conftest import CORPUS, compile_records_of_corpus, run_cli

GOOD = compile_records_of_corpus()[0]
SIBLING = {"serialize_s": 0.5, "deserialize_s": 0.25, "blob_mb": 3.0, "tag": "export-probe", "model_type": "mge"}

# The autouse fixture (no ambient database, cwd in tmp_path) is fine to share
# between examples; each example makes its own database.
# The same examples on every run (derandomize), so a CI run never fails on a case no
# one has seen; HYPOTHESIS_EXPLORE=1 draws new ones when looking for trouble.
SETTINGS = dict(deadline=None, database=None, derandomize=not os.environ.get("HYPOTHESIS_EXPLORE"),
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _no_exception(result) -> None:
    # CliRunner keeps an uncaught exception (a traceback for the user) in .exception;
    # SystemExit is the normal way out, with the exit code.
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A ledger at head holding the corpus and its pins."""
    db = tmp_path_factory.mktemp("template") / "ledger.db"
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    assert run_cli("pins", "update", "--db", db).exit_code == 0
    return db


# -- values a hostile record may carry ------------------------------------------------------

NAN, INF = float("nan"), float("inf")
odd_floats = st.sampled_from([NAN, INF, -INF, -0.0, 5e-324, 1.7976931348623157e308, 1e-300])
big_ints = st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**70, 10**300, 10**400])
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)  # unicode, NUL, controls
lone_surrogates = st.text(st.characters(categories=["Cs"]), min_size=1, max_size=3)
huge_text = st.sampled_from([10_000, 300_000]).flatmap(
    lambda n: st.sampled_from(["x", "é", "\U0001f600", "warm", "\\", '"']).map(lambda c: c * n))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    odd_floats, big_ints, any_text, lone_surrogates, huge_text,
    st.sampled_from(["cold", "warm", "none", "unknown", "lukewarm", "compile", "ok", "failed", "", "17.9s", "NaN"]),
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


@settings(max_examples=120, **SETTINGS)
@given(files=st.lists(file_contents(), min_size=1, max_size=3), good_first=st.booleans(), skip_invalid=st.booleans())
@example(files=[b'[{"compile_s": NaN}]'], good_first=True, skip_invalid=False)
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

        _no_exception(result)
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
            bad_floats = con.execute("SELECT compile_s, trace_s, first_s, steady_s FROM compile_records").fetchall()
        assert all(v is None or (isinstance(v, float) and math.isfinite(v)) for row in bad_floats for v in row)
        summary = result.stdout.strip().splitlines()[-1]
        added_compile = int(summary.split(": ", 1)[1].split(" compile rows added")[0])
        added_instrument = int(summary.split("), ")[1].split(" instrument")[0])
        assert counts == (counts_before[0] + added_compile, counts_before[1] + added_instrument)
        if good_first:
            assert added_compile >= 1


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
    _no_exception(result)
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
noise = st.lists(st.sampled_from(list(" \t\n;-/*'\"()`[]x0é\u2028\r\\") + ["--", "/*", "*/", "; "]), max_size=8).map("".join)


@st.composite
def statements(draw) -> str:
    write = draw(st.sampled_from(WRITES))
    if draw(st.booleans()):
        write = "".join(c.upper() if draw(st.booleans()) else c.lower() for c in write) if len(write) < 40 else write.lower()
    shape = draw(st.sampled_from(["plain", "trick", "noise", "read", "text"]))
    if shape == "trick":
        return draw(st.sampled_from(TRICKS)).format(w=write)
    if shape == "noise":
        return draw(noise) + write + draw(noise)
    if shape == "read":
        return draw(st.sampled_from(READS)) + draw(st.sampled_from(["", ";", "; " + write, " " + draw(noise)]))
    if shape == "text":
        return draw(st.one_of(any_text, lone_surrogates.map(lambda s: f"SELECT '{s}'"), noise))
    return write


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


@pytest.fixture(scope="module")
def sql_db(template, tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("sql") / "ledger.db"
    shutil.copyfile(template, db)
    return db


@settings(max_examples=300, **SETTINGS)
@given(statement=statements())
@example(statement="SELECT 'a\udcff'")  # argv that is not UTF-8 arrives with surrogate escapes
@example(statement="SELECT 'abc\ndef")  # SQLite quotes the bad token, line break and all
@example(statement="SELECT 1 FROM [a\nb]")
@example(statement="-- DROP TABLE compile_records")  # an option to the command line: a usage error
def test_sql_never_writes_and_errors_are_one_line(sql_db, tmp_path, statement):
    before = (_sha(sql_db), _schema_and_counts(sql_db), _files(sql_db.parent, Path.cwd()))
    result = run_cli("sql", statement, "--db", sql_db)
    _no_exception(result)
    assert result.exit_code in (0, 1, 2), result.output
    event(f"exit {result.exit_code}")
    if result.exit_code == 1:
        assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1, result.stderr
        assert result.stdout == ""
    after = (_sha(sql_db), _schema_and_counts(sql_db), _files(sql_db.parent, Path.cwd()))
    assert after == before, statement


@pytest.mark.parametrize("write", WRITES)
def test_every_write_is_refused(sql_db, write):
    """The list itself, each once: none of them may run (a refusal, or SQLite's own
    error for one that names nothing real), and the file stays the same."""
    before = _sha(sql_db)
    result = run_cli("sql", write, "--db", sql_db)
    _no_exception(result)
    assert result.exit_code == 1, (write, result.output)
    assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1
    assert _sha(sql_db) == before
