"""The ledger's main paths on both backends, one parametrised suite: each test runs on
a SQLite file and on a PostgreSQL database (`any_db`; the PostgreSQL case skips,
saying why, without a server: ci/postgres.sh starts one)."""

from __future__ import annotations

import json

import pytest

from .conftest import (
    CORPUS,
    CORPUS_COMPILE,
    CORPUS_RECORDS,
    CORPUS_SIBLINGS,
    CORPUS_STATES,
    compile_records_of_corpus,
    query,
    run_cli,
    write_json,
)
from .ledgers import every_kind_of_row, insert_legacy_any

STATES_SQL = "SELECT cache_state, count(*) FROM compile_records GROUP BY cache_state ORDER BY cache_state"
# Everything `ledger sql` must never change: rows, states, times, pins.
FINGERPRINT_SQL = ("SELECT (SELECT count(*) FROM compile_records), (SELECT sum(compile_s) FROM compile_records),"
                   " (SELECT count(*) FROM compile_records WHERE cache_state = 'warm'), (SELECT count(*) FROM pins)")


def _ok(*args):
    result = run_cli(*args)
    assert result.exit_code == 0, result.output
    return result.output


def _loaded(any_db):
    _ok("import", CORPUS, "--db", any_db)
    return any_db


def test_upgrade_from_0001_backfills_the_corpus(any_db):
    """The data migration (LIKE on SQLite, ILIKE on PostgreSQL) gives the field's states."""
    _ok("db", "upgrade", "0001", "--db", any_db)
    insert_legacy_any(any_db, compile_records_of_corpus())
    _ok("db", "upgrade", "--db", any_db)
    assert dict(query(any_db, STATES_SQL)) == CORPUS_STATES


@pytest.mark.slow
def test_import_is_idempotent_across_a_downgrade_round_trip(any_db):
    _loaded(any_db)
    _ok("db", "downgrade", "0001", "--db", any_db)
    _ok("db", "upgrade", "--db", any_db)
    again = _ok("import", CORPUS, "--db", any_db)
    assert again.strip().endswith(f"0 instrument records added, {CORPUS_RECORDS} already present")
    counts = "SELECT (SELECT count(*) FROM compile_records), (SELECT count(*) FROM instrument_records)"
    assert query(any_db, counts) == [(CORPUS_COMPILE, CORPUS_SIBLINGS)]
    assert dict(query(any_db, STATES_SQL)) == CORPUS_STATES


@pytest.mark.slow
def test_export_reimports_into_the_other_backend_unchanged(any_db, tmp_path):
    exported = json.loads(_ok("export", "--db", _loaded(any_db)))
    other = tmp_path / "other.db"
    _ok("import", write_json(tmp_path / "export.json", exported), "--db", other)
    assert dict(query(other, STATES_SQL)) == dict(query(any_db, STATES_SQL)) == CORPUS_STATES


HOSTILE = [
    "DELETE FROM compile_records",
    "COMMIT; DELETE FROM compile_records",
    "ROLLBACK; DELETE FROM compile_records",
    "SELECT 1; DELETE FROM pins",
    "UPDATE compile_records SET compile_s = 0",
    "DROP TABLE pins",
    "INSERT INTO pins (pin_key) VALUES ('x')",
    "WITH d AS (DELETE FROM compile_records RETURNING 1) SELECT count(*) FROM d",
    "CREATE TABLE t (x int)",
]


@pytest.mark.slow
@pytest.mark.parametrize("statement", HOSTILE)
def test_sql_changes_nothing(any_db, statement):
    _ok("pins", "update", "--db", _loaded(any_db))
    before = query(any_db, FINGERPRINT_SQL)
    result = run_cli("sql", statement, "--db", any_db)
    assert result.exit_code == 1 and result.output.startswith("error: ") and result.output.count("\n") == 1
    assert query(any_db, FINGERPRINT_SQL) == before


def test_sql_session_settings_do_not_carry_over(any_db):
    """Whatever one call sets (or fails to), the next call's write is still refused."""
    _loaded(any_db)
    before = query(any_db, FINGERPRINT_SQL)
    for first in ("SET TRANSACTION READ WRITE", "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
                  "PRAGMA query_only = OFF"):
        run_cli("sql", first, "--db", any_db)
        assert run_cli("sql", "DELETE FROM compile_records", "--db", any_db).exit_code == 1
    assert query(any_db, FINGERPRINT_SQL) == before
    assert _ok("sql", "SELECT count(*) AS n FROM compile_records", "--csv", "--db", any_db) == f"n\n{CORPUS_COMPILE}\n"


@pytest.mark.slow  # 0.23 s of the fast tier's 0.3 on a quiet machine
def test_pins_check_and_report(any_db, tmp_path):
    _loaded(any_db)
    assert _ok("pins", "update", "--db", any_db).splitlines()[-1] == "25 pins: 25 new, 0 repinned, 0 unchanged"
    assert _ok("check", "--db", any_db).endswith("0 regression, 0 inconclusive, 0 went-cold\n")
    # a 10x warm row of a pinned key, newer than its pin
    (pinned,) = query(any_db, "SELECT row_id, compile_s FROM pins WHERE model_type = 'knn' AND transform = 'jit'"
                              " AND hostname = 'DESKTOP-H143S82'")
    source = next(r for r in json.loads(_ok("export", "--db", any_db))
                  if r.get("model_type") == "knn" and r.get("transform") == "jit" and r.get("cache_state") == "warm"
                  and r.get("hostname") == "DESKTOP-H143S82")
    slow = dict(source, compile_s=pinned[1] * 10, timestamp="2026-09-01T10:00:00", tag="slow-warm")
    _ok("import", write_json(tmp_path / "slow.json", [slow]), "--db", any_db)
    check = run_cli("check", "--db", any_db)
    assert check.exit_code == 1
    assert check.output.startswith("regression ") and " = 10.00x > 1.5x" in check.output
    assert query(any_db, "SELECT verdict, n_rows FROM verdicts ORDER BY id") == [("regression", 1)]
    report = _ok("report", "--db", any_db)
    assert report.count("\n### ") == 4 and report.partition("\n### time saved")[0].count("\n### ") == 3
    assert "| imaging / knn / hst | jit | 2.63 | 4.32 | 1.6x | 0.263 | regression | slow-warm | 2026-09-01 10:00 |" \
        in report.splitlines()


@pytest.mark.jax
def test_a_real_probe_writes_its_rows(any_db):
    out = _ok("probe", "-o", "toy", "-t", "jit,grad", "--steady-calls", "1", "--db", any_db)
    assert out.splitlines()[-1].endswith(f"2 rows written to {any_db}")
    assert query(any_db, "SELECT transform, cache_state, status FROM compile_records ORDER BY id") == [
        ("jit", "none", "ok"), ("grad", "none", "ok")]


PAST_32_BITS = 2**31 + 7


def test_ids_past_2_to_the_31_on_postgresql(pg_db, tmp_path):
    """PostgreSQL's INTEGER stops at 2^31 - 1: a ledger's ids, the pins and verdicts that
    point at its rows, and the predictions' row references go past it (0013)."""
    import psycopg

    _ok("db", "upgrade", "--db", pg_db)
    with psycopg.connect(pg_db.conninfo) as con:
        for table in ("compile_records", "pins", "pin_history", "check_runs", "verdicts", "predictions"):
            con.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), {PAST_32_BITS})")
    every_kind_of_row(pg_db, tmp_path, seed=3)
    assert query(pg_db, "SELECT min(id) > 2147483647 FROM compile_records") == [(True,)]
    assert query(pg_db, "SELECT min(row_id) > 2147483647, min(id) > 2147483647 FROM pins") == [(True, True)]
    assert query(pg_db, "SELECT min(check_run_id) > 2147483647, min(row_id) > 2147483647 FROM verdicts") \
        == [(True, True)]
    top = query(pg_db, "SELECT max(id) FROM compile_records")[0][0]
    assert top > 2**31 and str(top) in _ok("sql", "SELECT max(id) AS top FROM compile_records", "--db", pg_db)
