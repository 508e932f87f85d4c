"""A rebuild of the cache cells, and the judgement of every pinned row, read on connections
of their own while the check goes on (cells.begin_fold, check._judge_pinned,
ledger/storage/aside.py): the same cells, verdicts and findings as read in line, never
where the check's transaction has changed a row, and nothing left running when the check
fails."""

from __future__ import annotations

import sqlite3
import threading

import pytest
import sqlalchemy as sa

from ledger.storage.aside import AsideRead
from ledger.storage.open import open_ledger
from ledger.watch import cells, check

from .helpers import said_from_nothing, said_with_facts
from .ledgers import add, every_finding_kind, rec


@pytest.fixture
def ledger_of_every_kind(tmp_path):
    db = tmp_path / "ledger.db"
    every_finding_kind(db, tmp_path)
    # warm rows of three pinned keys, judged ok: a verdict row each beside the findings'
    add(db, tmp_path, *(rec(transform=t, compile_s=1.0, timestamp="2026-07-30T10:00:00") for t in ("jit", "grad", "vmap")))
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


_VERDICTS = ("SELECT pin_id, pin_key, row_id, n_rows, compile_s, pin_compile_s, ratio, tolerance, verdict, cause,"
             " rule, threshold_s FROM verdicts WHERE check_run_id = :run ORDER BY id")


def _rebuilt(engine) -> tuple[list[tuple], dict, list[tuple]]:
    """A check from every row (the fold reset), as run_check runs it: its findings, cells
    and verdict rows (the pinned rows' ok verdicts too), in the order written."""
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE cache_cells_state SET upto = 0"))
    result = check.run_check(engine)
    with engine.connect() as conn:
        verdicts = [tuple(r) for r in conn.execute(sa.text(_VERDICTS), {"run": result.run_id})]
        return said_with_facts(check.stored_findings(conn, result.run_id)), cells.stored(conn), verdicts


def test_a_rebuild_read_aside_finds_what_one_read_in_line_finds(ledger_of_every_kind, started, monkeypatch):
    with open_ledger(str(ledger_of_every_kind), "write") as ledger:
        aside = _rebuilt(ledger.engine)
        assert len(started) == 2 and None not in started  # the fold's read, then the pinned judgement's
        monkeypatch.setattr(cells, "ASIDE_ROWS", 10**12)
        in_line = _rebuilt(ledger.engine)
        assert len(started) == 2
        assert aside == in_line and aside[0] == said_from_nothing(ledger.engine) and (len(aside[0]), len(aside[2])) == (5, 8)


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


@pytest.mark.parametrize("failing_pass", ["health_findings", "cache_findings"])
def test_a_check_that_fails_stops_its_reads_and_changes_nothing(ledger_of_every_kind, started, monkeypatch,
                                                                 failing_pass):
    """A pass that fails beside the fold's read (health) or the pinned judgement's (the
    cache passes): each read is stopped, and the check's transaction rolls back."""
    def failing(*args, **kw):
        raise RuntimeError("the pass failed")

    monkeypatch.setattr(check, failing_pass, failing)
    with open_ledger(str(ledger_of_every_kind), "write") as ledger:
        with ledger.engine.begin() as conn:
            conn.execute(sa.text("UPDATE cache_cells_state SET upto = 0"))
            runs = conn.execute(sa.text("SELECT count(*) FROM check_runs")).scalar()
        threads = threading.active_count()
        with pytest.raises(RuntimeError, match="the pass failed"):
            check.run_check(ledger.engine)
        assert len(started) == (1 if failing_pass == "health_findings" else 2)
        assert threading.active_count() == threads
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
