"""Writing single measured rows: what `ledger probe` calls once per transform.

Each row is its own transaction, committed as soon as it is measured, so a crash in
the fourth transform keeps the first three.
"""

from __future__ import annotations

from sqlalchemy import insert
from sqlalchemy.engine import Engine

from ledger.errors import LedgerError
from ledger.record import SOURCE_UNKNOWN, UNKNOWN
from ledger.record_validation import RecordError, compile_row
from ledger.storage import cell_ids
from ledger.storage.models import compile_records


def add_compile_record(engine: Engine, record: dict) -> int:
    """Insert one probe record (validated like an imported one); returns its id."""
    row = measured_row(record)
    with engine.begin() as conn:
        return conn.execute(insert(compile_records).values(**row, cell_id=cell_ids.cell_id_of(conn, row))
                            ).inserted_primary_key[0]


def measured_row(record: dict) -> dict:
    """A measured record (a probe's, a recorded compile's) checked and made a row."""
    if record.get("cache_state") is None:
        # A probe states what it measured. No state means nothing was compiled (the
        # transform failed first): unknown, and never the legacy tag rule, which
        # would read "warm" into a tag like nightly_warm.
        record = dict(record, cache_state=UNKNOWN, cache_state_source=SOURCE_UNKNOWN)
    try:
        row = compile_row(record)
    except RecordError as exc:
        raise LedgerError(f"probe produced an invalid record for {record.get('transform')!r}: {exc}") from None
    return row
