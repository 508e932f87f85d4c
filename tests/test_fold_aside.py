"""A rebuild of the cache cells read on a connection of its own while the check goes on
(cells.begin_fold, ledger/storage/aside.py): the same cells and findings as one read in
line, never where the check's transaction has changed a row, and nothing left running
when the check fails."""

from __future__ import annotations

import sqlite3
import threading

import pytest
import sqlalchemy as sa

from ledger.storage.aside import AsideRead
from ledger.storage.open import open_ledger
from ledger.watch import cells, check

from .helpers import said_from_nothing, said_with_facts
from .ledgers import every_finding_kind


@pytest.fixture
def ledger_of_every_kind(tmp_path):
    db = tmp_path / "ledger.db"
    every_finding_kind(db, tmp_path)
    return db


@pytest.fixture
def started(monkeypatch):
    """The reads begun aside, at any ledger size."""
    begun = []
    real = AsideRead.start

    def start(*args, **kw):
        reader = real(*args, **kw)
        begun.append(reader)
        return reader

    monkeypatch.setattr(cells, "ASIDE_ROWS", 0)
    monkeypatch.setattr(cells.AsideRead, "start", start)
    return begun


def _rebuilt(engine) -> tuple[list[tuple], dict]:
    """A check from every row (the fold reset), as run_check runs it: its findings and cells."""
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE cache_cells_state SET upto = 0"))
    result = check.run_check(engine)
    with engine.connect() as conn:
        return said_with_facts(check.stored_findings(conn, result.run_id)), cells.stored(conn)


def test_a_rebuild_read_aside_finds_what_one_read_in_line_finds(ledger_of_every_kind, started, monkeypatch):
    with open_ledger(str(ledger_of_every_kind), "write") as ledger:
        aside = _rebuilt(ledger.engine)
        assert len(started) == 1 and started[0] is not None
        monkeypatch.setattr(cells, "ASIDE_ROWS", 10**12)
        in_line = _rebuilt(ledger.engine)
        assert len(started) == 1
        assert aside == in_line and aside[0] == said_from_nothing(ledger.engine) and len(aside[0]) == 7


def test_a_row_given_its_cell_by_the_check_is_read_in_line(ledger_of_every_kind, started):
    """The aside connection sees only what is committed: a row the check itself gives a cell
    id (one INSERTed by hand) is read in line, where the check's transaction sees it."""
    con = sqlite3.connect(ledger_of_every_kind)
    with con:
        con.execute("INSERT INTO compile_records (transform, compile_s, cache_state, status, timestamp, cache_dir)"
                    " SELECT transform, compile_s, 'cold', status, '2031-01-01T00:00:00', cache_dir"
                    " FROM compile_records WHERE cache_dir <> '' ORDER BY id LIMIT 1")
    con.close()
    with open_ledger(str(ledger_of_every_kind), "write") as ledger:
        found = _rebuilt(ledger.engine)
        assert started == []
        assert found[0] == said_from_nothing(ledger.engine)
        assert any("2031-01-01" in newest for newest, *_ in found[1].values())


def test_a_check_that_fails_stops_the_read_and_changes_nothing(ledger_of_every_kind, started, monkeypatch):
    def failing(*args, **kw):
        raise RuntimeError("the health pass failed")

    monkeypatch.setattr(check, "health_findings", failing)
    with open_ledger(str(ledger_of_every_kind), "write") as ledger:
        with ledger.engine.begin() as conn:
            conn.execute(sa.text("UPDATE cache_cells_state SET upto = 0"))
            runs = conn.execute(sa.text("SELECT count(*) FROM check_runs")).scalar()
        threads = threading.active_count()
        with pytest.raises(RuntimeError, match="the health pass failed"):
            check.run_check(ledger.engine)
        assert len(started) == 1 and threading.active_count() == threads
        with ledger.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM check_runs")).scalar() == runs
            assert conn.execute(sa.text("SELECT upto FROM cache_cells_state")).scalar() == 0


def test_a_read_aside_hands_over_its_error_and_needs_a_file(tmp_path):
    db = tmp_path / "plain.db"
    sqlite3.connect(db).close()
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        reader = AsideRead.start(conn, "SELECT * FROM no_such_table", {})
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            reader.rows()
        assert AsideRead.start(conn, "SELECT 1", {}).rows() == [(1,)]
    with sa.create_engine("sqlite://").connect() as conn:
        assert AsideRead.start(conn, "SELECT 1", {}) is None
