"""The cyclic collector paused for the check and the import (ledger/gc_pause.py), and put
back as it was."""

from __future__ import annotations

import gc

import pytest

from ledger import command, gc_pause
from ledger.legacy import importer
from ledger.watch import check

from .conftest import CORPUS
from .ledgers import add, rec


@pytest.fixture
def collector():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_paused_puts_the_collector_back_as_it_was_even_when_the_block_raises(collector):
    gc.enable()
    with gc_pause.paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), gc_pause.paused():
        raise ValueError
    assert gc.isenabled()
    gc.disable()
    with gc_pause.paused():
        pass
    assert not gc.isenabled()  # a caller that had it off keeps it off


def _seen_by(monkeypatch, module, name: str) -> list[bool]:
    """Whether the collector was on each time module.name ran."""
    seen, real = [], getattr(module, name)

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return seen


def test_the_check_judges_with_the_collector_paused_and_puts_it_back(db, tmp_path, monkeypatch, collector):
    gc.enable()
    add(db, tmp_path, rec(cache_state="warm"), rec(cache_state="cold"))
    seen = _seen_by(monkeypatch, check, "judge")
    command.check(db)
    assert (seen, gc.isenabled()) == ([False], True)


def test_the_import_runs_with_the_collector_paused_and_puts_it_back(db, monkeypatch, collector):
    gc.enable()
    seen = _seen_by(monkeypatch, importer, "import_parts")
    summary = command.import_json([CORPUS], db)
    assert summary.added_compile > 0
    assert (seen, gc.isenabled()) == ([False], True)
