"""storage.engine.planned: PostgreSQL's planner settings for the statements inside a
block of the caller's transaction, put back after it, even when the block fails; on
SQLite nothing is run."""

from __future__ import annotations

import pytest

from ledger.storage.engine import planned
from ledger.storage.open import open_ledger

from .conftest import PgDb
from .ledgers import at_head


def _setting(conn, name: str) -> str | None:
    return conn.exec_driver_sql(f"SHOW {name}").scalar() if conn.dialect.name == "postgresql" else None


@pytest.mark.slow
def test_a_setting_holds_inside_the_block_only(any_db):
    at_head(any_db)
    seen = []
    with open_ledger(str(any_db), "write") as ledger, ledger.engine.begin() as conn:
        conn.exec_driver_sql("SELECT 1")
        before = _setting(conn, "enable_sort")
        with planned(conn, enable_sort="off", enable_nestloop="off"):
            seen.append((_setting(conn, "enable_sort"), _setting(conn, "enable_nestloop")))
        with pytest.raises(RuntimeError), planned(conn, enable_sort="off"):
            raise RuntimeError("the block fails")
        after = _setting(conn, "enable_sort")
    if isinstance(any_db, PgDb):
        assert (before, seen, after) == ("on", [("off", "off")], "on")
    else:
        assert (before, seen, after) == (None, [(None, None)], None)
