"""`ledger sql`: answers reads, refuses anything that would write, changes nothing."""

from __future__ import annotations

import hashlib
import json

import pytest

from .conftest import CORPUS, CORPUS_COMPILE, CORPUS_STATES, run_cli


@pytest.fixture
def loaded(db):
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    return db


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_select_as_aligned_table(loaded):
    result = run_cli("sql", "SELECT cache_state, count(*) AS n FROM compile_records GROUP BY 1 ORDER BY 1", "--db", loaded)
    assert result.exit_code == 0
    assert result.output == (
        "cache_state   n\n"
        "-----------  --\n"
        f"cold         {CORPUS_STATES['cold']}\n"
        f"none         {CORPUS_STATES['none']}\n"
        f"unknown       {CORPUS_STATES['unknown']}\n"
        f"warm         {CORPUS_STATES['warm']}\n"
    )


def test_select_csv_and_json(loaded):
    q = "SELECT transform, compile_s FROM compile_records WHERE tag = 'cache-warm'"
    assert run_cli("sql", q, "--csv", "--db", loaded).output == "transform,compile_s\nvag,2.27\n"
    assert json.loads(run_cli("sql", q, "--json", "--db", loaded).output) == [{"transform": "vag", "compile_s": 2.27}]


def test_table_valued_json_functions_work(loaded):
    result = run_cli("sql", "SELECT count(*) FROM compile_records, json_each('[1, 2]')", "--csv", "--db", loaded)
    assert (result.exit_code, result.output) == (0, "count(*)\n178\n")
    assert run_cli("sql", "UPDATE sqlite_master SET sql = ''", "--db", loaded).exit_code == 1


def test_with_and_pragma_reads_work(loaded):
    assert run_cli("sql", "WITH t AS (SELECT 1 AS x) SELECT x FROM t", "--db", loaded).exit_code == 0
    result = run_cli("sql", "PRAGMA table_info(compile_records)", "--db", loaded)
    assert result.exit_code == 0 and "cache_state" in result.output


WRITES = [
    "DROP TABLE compile_records",
    "DELETE FROM compile_records",
    "UPDATE compile_records SET cache_state = 'warm'",
    "INSERT INTO compile_records (tag) VALUES ('x')",
    "CREATE TABLE t (x)",
    "CREATE INDEX ix_t ON compile_records (tag)",
    "ALTER TABLE compile_records ADD COLUMN x",
    "ATTACH DATABASE 'other.db' AS o",
    "PRAGMA user_version = 7",
    "VACUUM",
    "REPLACE INTO compile_records (id) VALUES (1)",
    "WITH x AS (SELECT 1) DELETE FROM compile_records",
]


@pytest.mark.parametrize("statement", WRITES)
def test_writes_are_refused_and_change_nothing(loaded, tmp_path, statement):
    before = _digest(loaded)
    result = run_cli("sql", statement, "--db", loaded)
    assert result.exit_code == 1
    assert result.output == "error: ledger sql is read-only: only SELECT, WITH ... SELECT, EXPLAIN and read-only PRAGMAs run\n"
    assert _digest(loaded) == before
    assert not (tmp_path / "other.db").exists()


@pytest.mark.parametrize("statement", ["SELECT 1; DROP TABLE compile_records", "SELECT 1; SELECT 2"])
def test_several_statements_are_refused(loaded, statement):
    before = _digest(loaded)
    result = run_cli("sql", statement, "--db", loaded)
    assert result.exit_code == 1
    assert result.output == "error: ledger sql runs one statement at a time\n"
    assert _digest(loaded) == before
    assert run_cli("sql", "SELECT count(*) FROM compile_records", "--db", loaded).output.endswith(f"{CORPUS_COMPILE}\n")


def test_sql_errors_are_one_line(loaded):
    result = run_cli("sql", "SELECT nope FROM compile_records", "--db", loaded)
    assert result.exit_code == 1 and result.output == "error: sql error: no such column: nope\n"
    assert run_cli("sql", "SELECT 1", "--csv", "--json", "--db", loaded).output == "error: choose one of --csv and --json\n"


def test_path_with_uri_characters_is_opened_read_only(tmp_path):
    odd = tmp_path / "a#b?c%41.db"
    assert run_cli("import", CORPUS, "--db", odd).exit_code == 0
    before = _digest(odd)
    result = run_cli("sql", "SELECT count(*) FROM compile_records", "--csv", "--db", odd)
    assert (result.exit_code, result.output) == (0, f"count(*)\n{CORPUS_COMPILE}\n")
    assert run_cli("sql", "DELETE FROM compile_records", "--db", odd).exit_code == 1
    assert _digest(odd) == before
    # nothing beside it but SQLite's own WAL files (a reader of a WAL database makes
    # them), and no row in the WAL
    beside = {p.name: p.stat().st_size for p in tmp_path.iterdir() if p.name != odd.name}
    assert set(beside) <= {"a#b?c%41.db-wal", "a#b?c%41.db-shm"} and not beside.get("a#b?c%41.db-wal")


def test_not_a_database_is_one_line(tmp_path):
    (tmp_path / "notes.db").write_text("hello")
    result = run_cli("sql", "SELECT 1", "--db", tmp_path / "notes.db")
    assert result.exit_code == 1 and result.output.startswith(f"error: cannot read {tmp_path / 'notes.db'}: ")
    assert run_cli("sql", "SELECT 1", "--db", tmp_path).output == f"error: {tmp_path} is not a database file\n"


def test_blobs_in_json_output_and_read_pragmas(loaded):
    assert json.loads(run_cli("sql", "SELECT x'00ff' AS b", "--json", "--db", loaded).output) == [{"b": "00ff"}]
    assert run_cli("sql", "PRAGMA user_version", "--csv", "--db", loaded).output == "user_version\n0\n"
