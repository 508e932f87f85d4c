"""Writing single measured rows: what `ledger probe` calls once per transform.

Each row is its own transaction, committed as soon as it is measured, so a crash in
the fourth transform keeps the first three.
"""

from __future__ import annotations

from sqlalchemy import insert, text
from sqlalchemy.engine import Engine

from .cache_rule import backfill_sql
from .errors import LedgerError
from .models import compile_records
from .records import RecordError, compile_row


def add_compile_record(engine: Engine, record: dict) -> int:
    """Insert one compile record (validated like an imported one); returns its id."""
    try:
        row = compile_row(record)
    except RecordError as exc:
        raise LedgerError(f"probe produced an invalid record for {record.get('transform')!r}: {exc}") from None
    with engine.begin() as conn:
        new_id = conn.execute(insert(compile_records).values(**row)).inserted_primary_key[0]
        if row["cache_state"] is None:
            conn.execute(text(backfill_sql(conn.dialect.name) + " AND id = :id"), {"id": new_id})
    return new_id
