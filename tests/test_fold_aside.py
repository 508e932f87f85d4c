"""A first check's rebuild of the cache cells and its judgement of every pinned row, read on
connections of their own while the check goes on (ledger/storage/aside.py): the same
cells, verdicts and findings as read in line, on both backends; never where the check's
transaction has changed a row; nothing left running when the check fails."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from ledger.storage.aside import Aside, rows_of
from ledger.storage.open import open_ledger
from ledger.watch import cells, check

from .helpers import said_from_nothing, said_with_facts
from .ledgers import add, every_finding_kind, rec
from .writes import BACKENDS, copy_by_hand, fresh


@contextmanager
def every_kind_checked(backend: str, tmp_path):
    """A ledger with every finding kind, and warm rows of three pinned keys judged ok (a
    verdict row each beside the findings'), open for writing."""
    with fresh(backend) as db:
        every_finding_kind(db, tmp_path)
        add(db, tmp_path, *(rec(transform=t, compile_s=1.0, timestamp="2026-07-30T10:00:00")
                            for t in ("jit", "grad", "vmap")))
        with open_ledger(str(db), "write") as ledger:
            yield db, ledger.engine


@pytest.fixture
def started(monkeypatch):
    """The reads begun aside, at any ledger size."""
    begun = []
    real = Aside.start

    def start(*args, **kw):
        reader = real(*args, **kw)
        begun.append(reader)
        return reader

    monkeypatch.setattr(cells, "ASIDE_ROWS", 0)
    monkeypatch.setattr(Aside, "start", start)
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


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_check_read_aside_finds_what_one_read_in_line_finds(backend, tmp_path, started, monkeypatch):
    with every_kind_checked(backend, tmp_path) as (db, engine):
        aside = _rebuilt(engine)
        assert len(started) == 2 and None not in started  # the fold's read, then the pinned judgement's
        monkeypatch.setattr(cells, "ASIDE_ROWS", 10**12)
        in_line = _rebuilt(engine)
        assert len(started) == 2
        assert aside == in_line and aside[0] == said_from_nothing(engine)
        assert (len(aside[0]), len(aside[2])) == (5, 8)
        # the next check, a daily one after the rebuild read aside: nothing read aside, and it
        # says what a check from every row says
        monkeypatch.setattr(cells, "ASIDE_ROWS", 0)
        add(db, tmp_path, rec(transform="grad", cache_state="cold", compile_s=9.0, timestamp="2026-07-31T10:00:00"))
        daily = check.run_check(engine)
        assert len(started) == 2
        with engine.connect() as conn:
            said = said_with_facts(check.stored_findings(conn, daily.run_id))
        assert said == said_from_nothing(engine) and len(said) == 6


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_row_given_its_cell_by_the_check_is_read_in_line(backend, tmp_path, started):
    """A connection aside sees only what is committed: where the check itself gives a row
    its cell id (a person's copy of a row into another key), every read is in line."""
    with every_kind_checked(backend, tmp_path) as (_, engine):
        copy_by_hand(engine, 1, "model_type = 'copied'", "timestamp = '2031-01-01T00:00:00'")
        found = _rebuilt(engine)
        assert started == []
        assert found[0] == said_from_nothing(engine)
        assert any("2031-01-01" in newest for newest, *_ in found[1].values())


@pytest.mark.parametrize("failing_pass", ["health_findings", "cache_findings"])
def test_a_check_that_fails_stops_its_reads_and_changes_nothing(tmp_path, started, monkeypatch, failing_pass):
    """A pass that fails beside the fold's read (health) or the pinned judgement's (the
    cache passes): each read is stopped, and the check's transaction rolls back."""
    def failing(*args, **kw):
        raise RuntimeError("the pass failed")

    monkeypatch.setattr(check, failing_pass, failing)
    with every_kind_checked("sqlite", tmp_path) as (_, engine):
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE cache_cells_state SET upto = 0"))
            runs = conn.execute(sa.text("SELECT count(*) FROM check_runs")).scalar()
        threads = threading.active_count()
        with pytest.raises(RuntimeError, match="the pass failed"):
            check.run_check(engine)
        assert len(started) == (1 if failing_pass == "health_findings" else 2)
        assert threading.active_count() == threads
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM check_runs")).scalar() == runs
            assert conn.execute(sa.text("SELECT upto FROM cache_cells_state")).scalar() == 0


def test_a_read_aside_hands_over_its_error_and_needs_a_file(tmp_path):
    db = tmp_path / "plain.db"
    sqlite3.connect(db).close()
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        reader = Aside.start(conn, rows_of("SELECT * FROM no_such_table", {}))
        with pytest.raises(sa.exc.OperationalError, match="no such table"):
            reader.result()
        assert Aside.start(conn, rows_of("SELECT :n", {"n": 1})).result() == [(1,)]
    with sa.create_engine("sqlite://").connect() as conn:
        assert Aside.start(conn, rows_of("SELECT 1", {})) is None
