"""Downgrades are lossless: a ledger with every kind of row goes down to each older
revision and back up, and every table is what it was, row for row (SQLite and
PostgreSQL). What a revision would drop is kept aside (migrations/ledger_stash.py)."""

from __future__ import annotations

import shutil

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ledger.storage.revisions import REVISIONS

from .conftest import examples, query, run_cli
from .ledgers import every_kind_of_row, tables

OLDER = list(REVISIONS[:-1])


def round_trip(db, down_to: str) -> None:
    down = run_cli("db", "downgrade", down_to, "--db", db)
    assert down.exit_code == 0, down.output
    up = run_cli("db", "upgrade", "--db", db)
    assert up.exit_code == 0, up.output


@pytest.fixture(scope="module")
def sqlite_ledger(tmp_path_factory):
    path = tmp_path_factory.mktemp("lossless")
    every_kind_of_row(path / "ledger.db", path, seed=1)
    return path / "ledger.db"


@pytest.mark.slow
@pytest.mark.parametrize("down_to", OLDER)
def test_down_to_each_revision_and_back_keeps_every_table(sqlite_ledger, tmp_path, down_to):
    db = tmp_path / "ledger.db"
    shutil.copy(sqlite_ledger, db)
    before = tables(db)
    assert before["pins"] and before["pin_history"] and before["verdicts"] and before["predictions"] and before["cache_prunes"]
    assert before["recorded_processes"] and query(db, "SELECT count(*) FROM compile_records WHERE call_site IS NOT NULL")[0][0]
    assert before["test_pins"]
    assert query(db, "SELECT count(*) FROM compile_records WHERE function IS NOT NULL AND sweep_id IS NOT NULL")[0][0]
    round_trip(db, down_to)
    assert tables(db) == before


@pytest.mark.slow
# no shrinking: each example builds a ledger and migrates it (seconds); the seed says enough
@settings(max_examples=examples(4), phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n=st.integers(1, 8), down_to=st.sampled_from(OLDER))
def test_any_generated_ledger_survives_a_round_trip(tmp_path_factory, seed, n, down_to):
    path = tmp_path_factory.mktemp("gen")
    db = path / "ledger.db"
    every_kind_of_row(db, path, seed=seed, n=n)
    before = tables(db)
    round_trip(db, down_to)
    assert tables(db) == before


@pytest.mark.slow
@pytest.mark.parametrize("down_to", ["0010", "0009", "0005", "0001"])
def test_postgresql_down_and_back_keeps_every_table(pg_db, tmp_path, down_to):
    assert run_cli("db", "upgrade", "--db", pg_db).exit_code == 0
    every_kind_of_row(pg_db, tmp_path, seed=2)
    before = tables(pg_db)
    round_trip(pg_db, down_to)
    assert tables(pg_db) == before
