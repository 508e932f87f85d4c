"""The real revision chain on temp SQLite files with rows in them (a failing upgrade
on PostgreSQL too)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from ledger.storage.models import metadata
from ledger.storage.revisions import HEAD, REVISIONS

from .conftest import (
    CORPUS,
    CORPUS_COMPILE,
    CORPUS_SIBLINGS,
    CORPUS_STATES,
    CORPUS_STATES_TEXT,
    PgDb,
    compile_records_of_corpus,
    corpus_records,
    db_at,
    insert_legacy,
    migrate,
    query,
    run_cli,
    write_json,
)
from .ledgers import insert_legacy_any

REPO = Path(__file__).resolve().parent.parent
ALL_COLUMNS = "SELECT * FROM compile_records ORDER BY id"


def _corpus_via_migration(db: Path) -> Path:
    db_at(db, "0001")
    insert_legacy(db, compile_records_of_corpus())
    db_at(db, "head")
    return db


def _states_by_content(db: Path) -> dict:
    rows = query(db, "SELECT hostname, timestamp, transform, tag, compile_s, cache_state FROM compile_records")
    out = {}
    for *key, state in rows:
        assert tuple(key) not in out
        out[tuple(key)] = state
    return out


@pytest.mark.slow
def test_corpus_both_paths_agree(tmp_path):
    a = _corpus_via_migration(tmp_path / "a.db")
    b = tmp_path / "b.db"
    result = run_cli("import", CORPUS, "--db", b)
    assert result.exit_code == 0, result.output
    assert f"{CORPUS_COMPILE} compile rows added ({CORPUS_STATES_TEXT})" in result.output
    assert f"{CORPUS_SIBLINGS} instrument records added" in result.output
    for path in (a, b):
        counts = dict(query(path, "SELECT cache_state, count(*) FROM compile_records GROUP BY 1"))
        assert counts == CORPUS_STATES
        assert query(path, "SELECT cache_state FROM compile_records WHERE tag = 'mb_homo_cold_laxmap_gpu'") == [("unknown",)]
    assert _states_by_content(a) == _states_by_content(b)
    assert len(_states_by_content(a)) == CORPUS_COMPILE


def test_sibling_records_kept_whole_without_state(db):
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    siblings = [rec for _, rec in corpus_records() if "compile_s" not in rec]
    stored = query(db, "SELECT record_kind, record_json FROM instrument_records ORDER BY id")
    # whole: every field, nested objects included, in the files' order
    assert [json.loads(j) for _, j in stored] == siblings
    assert sorted(k for k, _ in stored) == ["export_probe", "export_probe", "export_probe", "trace_profile"]
    cols = {c["name"] for c in inspect(create_engine(f"sqlite:///{db}")).get_columns("instrument_records")}
    assert "cache_state" not in cols


@pytest.mark.slow
def test_head_down_to_0001_and_back_keeps_rows_and_states(db):
    _corpus_via_migration(db)
    before = query(db, "SELECT id, tag, cache_dir, compile_s, cache_state, cache_state_source FROM compile_records ORDER BY id")
    db_at(db, "head")

    migrate(db, "downgrade", "0001")
    assert query(db, "SELECT version_num FROM alembic_version") == [("0001",)]
    cols = {r[1] for r in query(db, "PRAGMA table_info(compile_records)")}
    assert "cache_state" not in cols and len(query(db, "SELECT id FROM compile_records")) == CORPUS_COMPILE
    db_at(db, "head")
    after = query(db, "SELECT id, tag, cache_dir, compile_s, cache_state, cache_state_source FROM compile_records ORDER BY id")
    assert after == before


@pytest.mark.slow
@pytest.mark.parametrize("step", ["0004", "0003", "0002"])
def test_each_step_down_and_up(db, step):
    _corpus_via_migration(db)
    before = query(db, ALL_COLUMNS)

    migrate(db, "downgrade", step)
    db_at(db, "head")
    assert query(db, ALL_COLUMNS) == before


@pytest.mark.slow
def test_backfill_downgrade_keeps_measured_states(db):
    db_at(db, "head")
    con = sqlite3.connect(db)
    with con:
        con.execute("INSERT INTO compile_records (tag, cache_dir, cache_state, cache_state_source) VALUES ('x', '/c', 'warm', 'measured_events')")
        con.execute("INSERT INTO compile_records (tag, cache_dir) VALUES ('y-cold', '/c')")
    con.close()
    db_at(db, "head")  # nothing to do at head: the plain-inserted row stays NULL

    migrate(db, "downgrade", "0002")
    db_at(db, "head")
    assert query(db, "SELECT tag, cache_state, cache_state_source FROM compile_records ORDER BY id") == [
        ("x", "warm", "measured_events"), ("y-cold", "cold", "tag")
    ]


# Ways a hand-made object breaks an upgrade from 0001 part-way: a trigger that fails
# 0003's backfill UPDATE on one row (after 0002's DDL), or a table in the way of
# 0006's CREATE TABLE (after 0002 to 0005); and what the error then says.
SABOTAGE = {
    "trigger": "backfill refused",
    "table": "already exists",
}


def _sabotage(db, how: str) -> None:
    if how == "table":
        statements = ["CREATE TABLE pins (x integer)"]
    elif isinstance(db, PgDb):
        statements = [("CREATE FUNCTION fail_backfill() RETURNS trigger LANGUAGE plpgsql AS "
                       "$$BEGIN RAISE EXCEPTION 'backfill refused'; END$$"),
                      ("CREATE TRIGGER fail_backfill BEFORE UPDATE ON compile_records FOR EACH ROW "
                       "WHEN (NEW.tag = 'boom') EXECUTE FUNCTION fail_backfill()")]
    else:
        statements = [("CREATE TRIGGER fail_backfill BEFORE UPDATE ON compile_records WHEN NEW.tag = 'boom' "
                       "BEGIN SELECT RAISE(ABORT, 'backfill refused'); END")]
    if isinstance(db, PgDb):
        import psycopg

        with psycopg.connect(db.conninfo) as con:
            for statement in statements:
                con.execute(statement)
        return
    con = sqlite3.connect(db)
    with con:
        for statement in statements:
            con.execute(statement)
    con.close()


def _columns(db) -> set[str]:
    engine = create_engine(db.url if isinstance(db, PgDb) else f"sqlite:///{db}")
    try:
        return {c["name"] for c in inspect(engine).get_columns("compile_records")}
    finally:
        engine.dispose()


@pytest.mark.parametrize("how", list(SABOTAGE))
def test_failing_migration_rolls_back_to_previous_revision(any_db, how):
    """On SQLite and on PostgreSQL: one error line, and the database at 0001 as it was."""
    db = any_db
    db_at(db, "0001")
    recs = compile_records_of_corpus()[:5]
    recs[3] = dict(recs[3], tag="boom")
    insert_legacy_any(db, recs)
    _sabotage(db, how)
    before = query(db, ALL_COLUMNS)
    result = run_cli("db", "upgrade", "--db", db)
    assert result.exit_code == 1
    assert result.output.startswith("error: ") and result.output.count("\n") == 1, result.output
    assert SABOTAGE[how] in result.output
    assert query(db, "SELECT version_num FROM alembic_version") == [("0001",)]
    cols = _columns(db)
    assert "cache_state" not in cols and "record_kind" not in cols
    assert query(db, ALL_COLUMNS) == before


def test_models_match_the_migrated_schema(db):
    """Every table's columns, and its indexes: names, columns, uniqueness, and the
    predicate of a partial one."""
    db_at(db, "head")
    insp = inspect(create_engine(f"sqlite:///{db}"))
    for table in metadata.sorted_tables:
        assert {c["name"] for c in insp.get_columns(table.name)} == set(table.c.keys())
        built = {(ix["name"], tuple(ix["column_names"]), bool(ix["unique"]), _where(ix["dialect_options"]))
                 for ix in insp.get_indexes(table.name)}
        declared = {(ix.name, tuple(c.name for c in ix.columns), bool(ix.unique), _where(ix.dialect_options["sqlite"]))
                    for ix in table.indexes}
        assert built == declared, table.name


def _where(options) -> str | None:
    where = options.get("sqlite_where", options.get("where"))
    return None if where is None else " ".join(str(where).split())


@pytest.mark.slow
def test_alembic_cli_and_ledger_share_the_resolver(tmp_path):
    env = {**os.environ, "LEDGER_DB": str(tmp_path / "via-env.db")}
    alembic = Path(sys.executable).with_name("alembic")
    subprocess.run([alembic, "upgrade", "0003"], cwd=REPO, env=env, check=True, capture_output=True)
    out = subprocess.run([Path(sys.executable).with_name("ledger"), "db", "current"], cwd=tmp_path, env=env,
                         check=True, capture_output=True, text=True).stdout
    assert out.startswith(f"0003 (head is {HEAD}")
    # and the default: ./ledger.db in the working directory
    subprocess.run([alembic, "-c", REPO / "alembic.ini", "upgrade", "head"], cwd=tmp_path,
                   env={k: v for k, v in env.items() if k != "LEDGER_DB"}, check=True, capture_output=True)
    assert query(tmp_path / "ledger.db", "SELECT version_num FROM alembic_version") == [(HEAD,)]


@pytest.mark.slow
def test_alembic_cli_says_an_unopenable_database_in_one_line(tmp_path):
    alembic = Path(sys.executable).with_name("alembic")
    missing = tmp_path / "no" / "such" / "dir.db"
    result = subprocess.run([alembic, "-x", f"db={missing}", "upgrade", "head"], cwd=REPO,
                            capture_output=True, text=True, check=False)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.strip().endswith(f"cannot open {missing}: unable to open database file")


@pytest.mark.slow
def test_a_stopped_server_is_one_line_and_never_shows_the_password(tmp_path):
    """No server listens on port 1: alembic and ledger each say so in one line."""
    env = dict(os.environ, LEDGER_DB="postgresql+psycopg://someone:s3cret@127.0.0.1:1/ledger")
    alembic = subprocess.run([Path(sys.executable).with_name("alembic"), "upgrade", "head"], cwd=REPO,
                             capture_output=True, text=True, env=env, check=False)
    ledger = subprocess.run([Path(sys.executable).with_name("ledger"), "db", "upgrade"], cwd=tmp_path,
                            capture_output=True, text=True, env=env, check=False)
    expected = "cannot open postgresql+psycopg://someone:***@127.0.0.1:1/ledger: connection failed: "
    assert alembic.returncode != 0 and alembic.stdout.startswith(f"FAILED: {expected}")
    assert ledger.returncode == 1 and ledger.stderr.startswith(f"error: {expected}") and ledger.stderr.count("\n") == 1
    assert "s3cret" not in alembic.stderr + alembic.stdout + ledger.stderr + ledger.stdout
    assert "Traceback" not in alembic.stderr


def test_older_revision_is_not_silently_changed(db, tmp_path):
    db_at(db, "0002")
    result = run_cli("import", CORPUS, "--db", db)
    assert result.exit_code == 1
    assert result.output.strip().endswith(f"is at revision 0002, this ledger needs {HEAD}: run `ledger db upgrade` (or `alembic upgrade head`) first")
    assert query(db, "SELECT version_num FROM alembic_version") == [("0002",)]
    assert run_cli("db", "upgrade", "--db", db).output.strip() == f"at revision {HEAD}"


def test_unknown_revision_is_refused(db):
    db_at(db, "head")
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE alembic_version SET version_num = '0099'")
    con.close()
    result = run_cli("import", CORPUS, "--db", db)
    assert result.exit_code == 1
    assert "revision 0099, which this ledger does not know" in result.output
    assert run_cli("db", "current", "--db", db).exit_code == 1


def test_new_database_is_brought_to_head_by_first_write(db):
    assert not db.exists()
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    assert run_cli("db", "current", "--db", db).output.strip() == f"{HEAD} (head)"


def test_read_commands_never_create_a_database(db):
    for args in (["sql", "SELECT 1"], ["export"], ["db", "current"], ["db", "downgrade", "0001"]):
        result = run_cli(*args, "--db", db)
        assert result.exit_code == 1, args
        assert result.output.strip() == f"error: no ledger database at {db}"
        assert not db.exists()


def test_revision_list_matches_the_chain():
    from alembic.script import ScriptDirectory

    from ledger.storage.migrate import alembic_config

    script = ScriptDirectory.from_config(alembic_config("sqlite:///unused.db"))
    chain = [s.revision for s in script.walk_revisions()][::-1]
    assert tuple(chain) == REVISIONS
    assert script.get_current_head() == REVISIONS[-1]


def _probe_like_rows(db):
    con = sqlite3.connect(db)
    with con:
        con.execute(
            "INSERT INTO compile_records (transform, compile_s, tag, cache_dir, timestamp, hostname, cache_state, "
            "cache_state_source, run_id, phase, status, cache_key_components, host_cpu_count, host_load_avg_5m, "
            "provenance, record_key) VALUES ('vag', 9.9, 'nightly', '/c', '2026-12-01T10:00:00', 'n1', 'cold', "
            "'measured_events', 'r1', 'cold', 'ok', '{\"XLA flags\": \"ab\"}', 8, 1.5, '{\"pid\": 1}', 42)")
        con.execute(
            "INSERT INTO compile_records (transform, tag, cache_dir, timestamp, hostname, cache_state, "
            "cache_state_source, run_id, status, error) VALUES ('grad', 'nightly_warm', '/c', '2026-12-01T10:01:00', "
            "'n1', 'unknown', 'unknown', 'r1', 'failed', 'ValueError: boom')")
    con.close()


@pytest.mark.slow
def test_head_to_0001_and_back_keeps_measured_states_and_probe_columns(db):
    _corpus_via_migration(db)
    _probe_like_rows(db)
    everything = "SELECT * FROM compile_records ORDER BY id"
    cols = [r[1] for r in query(db, "PRAGMA table_info(compile_records)")]
    before = [dict(zip(cols, r)) for r in query(db, everything)]

    migrate(db, "downgrade", "0001")
    assert {r[0] for r in query(db, "SELECT name FROM sqlite_master WHERE name LIKE '_ledger_stash%'")} == {
        "_ledger_stash_0002", "_ledger_stash_0004"}
    db_at(db, "head")
    after = [dict(zip(cols, r)) for r in query(db, everything)]
    # record_key is not kept (the next import recomputes it), nor cell_id (0018 gives each
    # row its cell again, the rows INSERTed by hand above included); everything else is
    assert all(a["cell_id"] is not None for a in after)
    for b, a in zip(before, after):
        b.pop("record_key"), a.pop("record_key"), b.pop("cell_id"), a.pop("cell_id")
    assert after == before and len(after) == 91
    assert query(db, "SELECT name FROM sqlite_master WHERE name LIKE '_ledger_stash%'") == []


@pytest.mark.slow
def test_a_row_added_while_downgraded_never_gets_anothers_values(db):
    db_at(db, "head")
    _probe_like_rows(db)

    migrate(db, "downgrade", "0001")
    con = sqlite3.connect(db)
    with con:  # an old tool deletes the last row and writes a new one, which reuses its id
        con.execute("DELETE FROM compile_records WHERE id = 2")
        con.execute("INSERT INTO compile_records (transform, tag, cache_dir) VALUES ('jit', 'new-cold', '/c')")
    con.close()
    db_at(db, "head")
    assert query(db, "SELECT id, transform, cache_state, cache_state_source, run_id, status FROM compile_records ORDER BY id") == [
        (1, "vag", "cold", "measured_events", "r1", "ok"), (2, "jit", "cold", "tag", None, "ok")]


@pytest.mark.slow
def test_below_0007_the_sweep_columns_are_kept_aside_and_come_back(db, tmp_path):
    (rec,) = [r for r in compile_records_of_corpus() if r["tag"] == "cache-warm"]
    swept = dict(rec, sweep_id="s1", sweep_task=3, slurm_array_job_id="77", slurm_array_task_id=3)
    assert run_cli("import", write_json(tmp_path / "r.json", [swept, dict(rec, tag="plain")]), "--db", db).exit_code == 0
    cols = "tag, sweep_id, sweep_task, slurm_array_job_id, slurm_array_task_id"
    before = query(db, f"SELECT {cols} FROM compile_records ORDER BY id")
    assert before == [("cache-warm", "s1", 3, "77", 3), ("plain", None, None, None, None)]
    migrate(db, "downgrade", "0006")
    assert query(db, "SELECT count(*) FROM _ledger_stash_0007") == [(1,)]
    db_at(db, "head")
    assert query(db, f"SELECT {cols} FROM compile_records ORDER BY id") == before
    assert query(db, "SELECT name FROM sqlite_master WHERE name LIKE '_ledger_stash%'") == []


def _tables(db) -> set[str]:
    engine = create_engine(db.url if isinstance(db, PgDb) else f"sqlite:///{db}")
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


@pytest.mark.slow
def test_base_leaves_no_ledger_table_and_upgrades_again(any_db, tmp_path):
    """What 0007 kept aside (sweep columns) goes with base, as the older stashes do:
    the next upgrade finds an empty database, not a foreign one."""
    (rec,) = [r for r in compile_records_of_corpus() if r["tag"] == "cache-warm"]
    swept = dict(rec, sweep_id="s1", sweep_task=3, slurm_array_job_id="77", slurm_array_task_id=3)
    assert run_cli("import", write_json(tmp_path / "r.json", [swept]), "--db", any_db).exit_code == 0
    migrate(any_db, "downgrade", "0001")
    assert "_ledger_stash_0007" in _tables(any_db)

    refused = run_cli("db", "downgrade", "base", "--db", any_db)
    assert refused.exit_code == 1 and refused.output.startswith(f"error: downgrading {any_db} to base drops every")
    assert refused.output.endswith(" rows in them: give --drop-data to do so (ledger export keeps a copy)\n")
    assert "_ledger_stash_0007" in _tables(any_db)  # refused: nothing dropped
    down = run_cli("db", "downgrade", "base", "--drop-data", "--db", any_db)
    assert (down.exit_code, down.output) == (0, "at revision base (empty)\n")
    assert _tables(any_db) == {"alembic_version"}
    up = run_cli("db", "upgrade", "--db", any_db)
    assert (up.exit_code, up.output) == (0, f"at revision {HEAD}\n")
    assert query(any_db, "SELECT count(*) FROM compile_records") == [(0,)]


@pytest.mark.slow
def test_base_is_refused_on_a_ledger_with_rows_unless_drop_data(any_db, tmp_path):
    assert run_cli("import", write_json(tmp_path / "r.json", compile_records_of_corpus()[:2]), "--db", any_db).exit_code == 0
    for target in ("base", "BASE", f"-{len(REVISIONS)}"):
        refused = run_cli("db", "downgrade", "--db", any_db, "--", target)
        assert refused.exit_code == 1 and len(refused.output.splitlines()) == 1, refused.output
        assert re.fullmatch(rf"error: downgrading {re.escape(str(any_db))} to base drops every table and the \d+ rows"
                            r" in them: give --drop-data to do so \(ledger export keeps a copy\)\n", refused.output)
    assert query(any_db, "SELECT count(*) FROM compile_records") == [(2,)]
    assert run_cli("db", "downgrade", "0001", "--db", any_db).exit_code == 0  # lossless: not refused
    assert run_cli("db", "downgrade", "base", "--drop-data", "--db", any_db).output == "at revision base (empty)\n"
    assert "--drop-data" in run_cli("db", "downgrade", "--help").output


# -- 0012: function_kind, pid, compile_index --------------------------------------------
def _recorded_rows(db) -> None:
    from ledger.storage.open import open_ledger
    from ledger.storage.writer import add_compile_record

    base = {"transform": "recorded", "compile_s": 0.25, "hardware": "local_cpu", "hostname": "node1",
            "jax_version": "0.10.2", "mixed_precision": False, "timestamp": "2026-12-03T15:39:00",
            "run_id": "r", "cache_state": "cold", "cache_state_source": "measured_events",
            "function": "jit_caustic", "input_signature": "f32[3] -> f32[3]", "process_index": 0}
    with open_ledger(str(db), "write") as ledger:
        for rec in (dict(base, function_kind="jit", pid=4101, compile_index=0),
                    dict(base, function_kind="jit", pid=4102, compile_index=0),  # a second worker
                    dict(base, function="jit_add", function_kind="eager", pid=4101, compile_index=1),
                    dict(base, function="jit_old", timestamp="2026-12-02T09:00:00"),  # written before 0012
                    {"transform": "jit", "compile_s": 1.5, "hostname": "node1", "cache_state": "warm",
                     "timestamp": "2026-12-01T10:00:00", "run_id": "p", "phase": "warm"}):  # a probe row
            add_compile_record(ledger.engine, rec)


def _triggers(db) -> list:
    """0009's triggers (0018's goes with its revision)."""
    return query(db, "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'cache_cells%'"
                     " ORDER BY name")


@pytest.mark.slow
def test_0012_downgrade_keeps_function_kind_pid_and_compile_index_aside_and_back(any_db):
    """`ledger db downgrade 0011` then `ledger db upgrade` gives back every value of the
    three columns, through the real revision chain; record_key is untouched."""
    db = any_db
    _recorded_rows(db)
    everything = ("SELECT id, function, function_kind, pid, compile_index, record_key, tag, compile_s"
                  " FROM compile_records ORDER BY id")
    before = query(db, everything)
    assert [r[1:5] for r in before] == [("jit_caustic", "jit", 4101, 0), ("jit_caustic", "jit", 4102, 0),
                                        ("jit_add", "eager", 4101, 1), ("jit_old", None, None, None),
                                        (None, None, None, None)]
    assert len({r[5] for r in before}) == 5
    triggers = None if isinstance(db, PgDb) else _triggers(db)

    down = run_cli("db", "downgrade", "0011", "--db", db)
    assert (down.exit_code, down.output) == (0, "at revision 0011\n"), down.output
    cols = {c["name"] for c in inspect(create_engine(db.url if isinstance(db, PgDb) else f"sqlite:///{db}"))
            .get_columns("compile_records")}
    assert not {"function_kind", "pid", "compile_index"} & cols
    # only the rows that had something to keep
    assert query(db, "SELECT count(*) FROM _ledger_stash_0012") == [(3,)]
    if triggers is not None:  # SQLite rebuilt the table to drop the columns: 0009's triggers are back
        assert _triggers(db) == triggers and len(triggers) == 3
    up = run_cli("db", "upgrade", "--db", db)
    assert (up.exit_code, up.output) == (0, f"at revision {HEAD}\n"), up.output
    assert query(db, everything) == before
    assert "_ledger_stash_0012" not in _tables(db)


@pytest.mark.slow
def test_0012_stash_goes_with_base(db):
    _recorded_rows(db)
    migrate(db, "downgrade", "0010")
    assert "_ledger_stash_0012" in _tables(db)
    assert run_cli("db", "downgrade", "base", "--drop-data", "--db", db).exit_code == 0
    assert _tables(db) == {"alembic_version"}


@pytest.mark.slow  # about 0.2 s of CPU here: too near the fast tier's 0.3 s on a slower CI machine
@pytest.mark.parametrize("down_to", ["0011", "0010"])
def test_dropping_recorded_columns_keeps_the_cache_cells_triggers(db, down_to):
    """SQLite drops a column by rebuilding the table, and DROP TABLE takes its triggers:
    0009's, which tell `ledger check` that a folded row changed, must survive 0012's and
    0011's downgrades, armed as they were."""
    db_at(db, "head")
    con = sqlite3.connect(db)
    with con:  # as a fold re-arms them (ledger/watch/cells.py): the literal is the folded id
        for name, sql in con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall():
            con.execute(f"DROP TRIGGER {name}")
            con.execute(sql.replace("<= 0", "<= 7"))
    con.close()
    armed = _triggers(db)
    assert len(armed) == 3 and all("<= 7" in sql for _, sql in armed)
    migrate(db, "downgrade", down_to)
    assert _triggers(db) == armed


# -- 0017: a pytest session's test_id, test_phase and git_commit; test_pins ---------------
@pytest.mark.slow  # 0.17-0.25 s of the fast tier's 0.3: a slower CI machine tips it over
def test_0017_downgrade_keeps_test_columns_and_test_pins_aside_and_back(any_db):
    """`ledger db downgrade 0016` then `ledger db upgrade` gives back each row's test, phase
    and commit and every test pin, through the real revision chain, on both backends."""
    from ledger.storage.models import test_pins
    from ledger.storage.open import open_ledger
    from ledger.storage.writer import add_compile_record

    db = any_db
    base = {"transform": "recorded", "compile_s": 0.25, "hostname": "node1", "timestamp": "2026-12-03T15:39:00",
            "run_id": "s", "cache_state": "cold", "function": "jit_step", "input_signature": "f32[3] -> f32[3]",
            "process_index": 0, "pid": 7, "git_commit": "0123abcd" * 5 + "-dirty"}
    with open_ledger(str(db), "write") as ledger:
        for i, (test, phase) in enumerate([("t.py::test_a[x'\\n]", "call"), ("t.py::test_a[x'\\n]", "setup"),
                                            ("t.py", "collect"), (None, None)]):
            add_compile_record(ledger.engine, dict(base, test_id=test, test_phase=phase, compile_index=i))
        add_compile_record(ledger.engine, {"transform": "jit", "compile_s": 1.5, "hostname": "node1",
                                           "timestamp": "2026-12-01T10:00:00", "run_id": "p", "phase": "warm"})
        with ledger.engine.begin() as conn:
            conn.execute(test_pins.insert(), [
                {"test_id": "t.py::test_a[x'\\n]", "function": "jit_step", "compiles": 3, "run_id": "s",
                 "git_commit": "0123abcd", "pinned_at": "2026-12-03T15:40:00+00:00"},
                {"test_id": "t.py::test_b", "function": "", "compiles": 0, "run_id": "s", "git_commit": None,
                 "pinned_at": "2026-12-03T15:40:00+00:00"}])
    everything = "SELECT id, test_id, test_phase, git_commit, record_key FROM compile_records ORDER BY id"
    before, pins_before = query(db, everything), query(db, "SELECT * FROM test_pins ORDER BY id")
    assert [r[1:3] for r in before] == [("t.py::test_a[x'\\n]", "call"), ("t.py::test_a[x'\\n]", "setup"),
                                        ("t.py", "collect"), (None, None), (None, None)]
    down = run_cli("db", "downgrade", "0016", "--db", db)
    assert (down.exit_code, down.output) == (0, "at revision 0016\n"), down.output
    engine = create_engine(db.url if isinstance(db, PgDb) else f"sqlite:///{db}")
    assert not {"test_id", "test_phase", "git_commit"} & {c["name"] for c in inspect(engine).get_columns("compile_records")}
    assert not inspect(engine).has_table("test_pins")
    engine.dispose()
    assert query(db, "SELECT count(*) FROM _ledger_stash_0017") == [(4,)]  # the rows with something to keep
    up = run_cli("db", "upgrade", "--db", db)
    assert (up.exit_code, up.output) == (0, f"at revision {HEAD}\n"), up.output
    assert query(db, everything) == before
    assert query(db, "SELECT * FROM test_pins ORDER BY id") == pins_before
    assert not {"_ledger_stash_0017", "_ledger_stash_0017_test_pins"} & _tables(db)


def test_a_test_phase_outside_the_vocabulary_is_refused(db, tmp_path):
    bad = write_json(tmp_path / "bad.json", [{"transform": "recorded", "compile_s": 0.1, "test_id": "t.py::x",
                                              "test_phase": "lunch"}])
    result = run_cli("import", bad, "--db", db)
    assert result.exit_code == 1
    assert "test_phase 'lunch' is not one of collect, setup, call, teardown" in result.output
