"""The tag -> cache_state rule on both paths: the data migration and `ledger import`."""

from __future__ import annotations

import pytest

from ledger.legacy.cache_rule import classify_legacy

from .conftest import PgDb, db_at, insert_legacy, query, run_cli, write_json

# (cache_dir, tag, expected state, expected source)
CASES = [
    (None, "census-warm", "none", "empty_cache_dir"),
    ("", "census-cold", "none", "empty_cache_dir"),
    ("", None, "none", "empty_cache_dir"),
    ("/c", "census-warm", "warm", "tag"),
    ("/c", "census-WARM", "warm", "tag"),
    ("/c", "census-warm2", "warm", "tag"),
    ("/c", "census-warm123", "warm", "tag"),
    ("/c", "prodigy-census-warm-retry", "warm", "tag"),
    ("/c", "warm7-retry", "warm", "tag"),
    ("/c", "Warm-RETRY", "warm", "tag"),
    ("/c", "warm", "warm", "tag"),
    ("/c", "mb_hetero_warm", "warm", "tag"),
    ("/c", "census-cold", "cold", "tag"),
    ("/c", "COLD", "cold", "tag"),
    ("/c", "mb_homo_cold", "cold", "tag"),
    ("/c", "cachecold", "cold", "tag"),
    ("/c", "warmcold", "cold", "tag"),
    # not at the end: left unknown on purpose
    ("/c", "mb_homo_cold_laxmap_gpu", "unknown", "unknown"),
    ("/c", "mb_homo_cold_pyloop_gpu", "unknown", "unknown"),
    ("/c", "warm-up", "unknown", "unknown"),
    ("/c", "cold2", "unknown", "unknown"),
    ("/c", "cold-retry", "unknown", "unknown"),
    ("/c", "warm-retry-retry", "unknown", "unknown"),
    ("/c", "warm-1", "unknown", "unknown"),
    ("/c", "warm2x", "unknown", "unknown"),
    ("/c", "census-warm ", "unknown", "unknown"),
    ("/c", "census-cold\n", "unknown", "unknown"),
    ("/c", "-retry", "unknown", "unknown"),
    ("/c", "wiring-smoke", "unknown", "unknown"),
    ("/c", "", "unknown", "unknown"),
    ("/c", None, "unknown", "unknown"),
    ("/c", "50%_warm", "warm", "tag"),
    ("/c", "war_", "unknown", "unknown"),
    ("/c", "warm\u0661", "unknown", "unknown"),  # a non-ASCII digit is not [0-9]
]


def _record(i: int, cache_dir, tag) -> dict:
    return {
        "transform": "jit", "trace_s": 1.0, "compile_s": 2.0 + i, "first_s": 0.1, "steady_s": 0.01,
        "dataset_class": "imaging", "model_type": "mge", "instrument": "hst", "ndim": 15,
        "n_batch": 16, "batch_size": 4, "hardware": "local_cpu", "jax_version": "0.10.2",
        "cache_dir": cache_dir, "mixed_precision": False, "tag": tag, "hostname": "h",
        "timestamp": f"2026-07-16T15:22:{i:02d}",
    }


@pytest.mark.parametrize("cache_dir,tag,state,source", CASES)
def test_python_rule(cache_dir, tag, state, source):
    assert classify_legacy(cache_dir, tag) == (state, source)


def _states(path):
    return [tuple(r) for r in query(path, "SELECT cache_state, cache_state_source FROM compile_records ORDER BY compile_s")]


def test_migration_path_matches_table(db):
    db_at(db, "0001")
    insert_legacy(db, [_record(i, cd, tag) for i, (cd, tag, _, _) in enumerate(CASES)])
    db_at(db, "head")
    assert _states(db) == [(s, src) for _, _, s, src in CASES]


def test_import_path_matches_table(tmp_path, db):
    # a tag with a line break is refused at import now (one line of text, the record
    # contract); the rule's answer for one already stored is held by the other paths
    cases = [c for c in CASES if "\n" not in (c[1] or "")]
    write_json(tmp_path / "in.json", [_record(i, cd, tag) for i, (cd, tag, _, _) in enumerate(cases)])
    result = run_cli("import", tmp_path / "in.json", "--db", db)
    assert result.exit_code == 0, result.output
    assert _states(db) == [(s, src) for _, _, s, src in cases]


def test_recorded_state_is_kept_and_never_backfilled(tmp_path, db):
    recs = [dict(_record(0, "/c", "x-cold"), cache_state="warm"), _record(1, "/c", "x-cold")]
    write_json(tmp_path / "in.json", recs)
    assert run_cli("import", tmp_path / "in.json", "--db", db).exit_code == 0
    assert _states(db) == [("warm", "recorded"), ("cold", "tag")]


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_the_migration_keeps_its_own_copy_of_the_rule_equal_to_the_import_path(dialect):
    """0003 freezes the rule instead of importing application code (a revision must do
    what it did the day it ran); the import path must still give every row the state the
    migration gives it, so the two statements are one text today."""
    import importlib
    import inspect

    from ledger.legacy import cache_rule

    revision = importlib.import_module("ledger.migrations.versions.0003_backfill_cache_state")
    assert "ledger." not in inspect.getsource(revision).split('"""', 2)[2]  # no application import
    assert revision.backfill_sql(dialect) == cache_rule.backfill_sql(dialect)
    assert revision.state_sql(dialect) == cache_rule.state_sql(dialect)


# Every tag of up to three of these pieces: the rule's anchors (warm, cold, -retry, digits)
# in both cases, next to what must not count (a non-ASCII digit, LIKE's wildcards, a space).
_PIECES = ["", "warm", "WaRm", "cold", "COLD", "-retry", "-RETRY", "1", "42", "\u0661", "_", "%", " ", "x", "-"]
_TAGS = sorted({a + b + c for a in _PIECES for b in _PIECES for c in _PIECES}) + [None]


def test_the_python_rule_import_reads_with_equals_the_sql_on_every_combination(any_db):
    """Import's readers give legacy records their state by classify_legacy()
    (cache_rule.with_states); the migration and import's other path by the SQL.
    Both must agree on every tag, on both backends."""
    from ledger.legacy.cache_rule import state_sql, with_states

    pairs = [(d, t) for d in (None, "", "/c") for t in _TAGS]
    dialect = "postgresql" if isinstance(any_db, PgDb) else "sqlite"
    select = f"SELECT {state_sql(dialect)} FROM rule_input ORDER BY i"
    rows = [(i, d, t) for i, (d, t) in enumerate(pairs)]
    if dialect == "sqlite":
        import sqlite3

        con = sqlite3.connect(any_db)
        con.execute("CREATE TABLE rule_input (i INTEGER, cache_dir TEXT, tag TEXT)")
        con.executemany("INSERT INTO rule_input VALUES (?, ?, ?)", rows)
        got = [r[0] for r in con.execute(select)]
        con.close()
    else:
        import psycopg

        with psycopg.connect(any_db.conninfo) as con:
            con.execute("CREATE TABLE rule_input (i INTEGER, cache_dir TEXT, tag TEXT)")
            with con.cursor() as cur:
                cur.executemany("INSERT INTO rule_input VALUES (%s, %s, %s)", rows)
            got = [r[0] for r in con.execute(select).fetchall()]
    assert len(pairs) > 8_000
    assert got == [state for _, _, state, _ in with_states(pairs, 0, 1)]
    assert [s for _, _, _, s in with_states(pairs, 0, 1)] == [classify_legacy(d, t)[1] for d, t in pairs]
