"""`ledger export`: the ledger back out as JSON or CSV.

JSON keeps the legacy record shape (the 18 fields under their names) plus the new
fields, and sibling records exactly as they were imported, so an export re-imports
into any ledger without duplicates (same content keys).
"""

from __future__ import annotations

import json

from sqlalchemy import select
from sqlalchemy.engine import Engine

from ledger.output import format_csv
from ledger.record import COMPILE_FIELDS
from ledger.storage.models import compile_records, instrument_records

FORMATS = ("json", "csv")


def compile_rows(engine: Engine) -> list[dict]:
    cols = [compile_records.c[name] for name in COMPILE_FIELDS]
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(select(*cols).order_by(compile_records.c.id)).mappings()]


def instrument_records_whole(engine: Engine) -> list[dict]:
    """Sibling records as imported; one that took its hardware from its local_*
    folder carries it, so that re-importing it anywhere finds the same key."""
    out = []
    with engine.connect() as conn:
        stored = conn.execute(
            select(instrument_records.c.record_json, instrument_records.c.hardware).order_by(instrument_records.c.id)
        )
        for text, hardware in stored:
            rec = json.loads(text)
            if rec.get("hardware") is None and hardware is not None:
                rec["hardware"] = hardware
            out.append(rec)
    return out


def render(engine: Engine, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(compile_rows(engine) + instrument_records_whole(engine), indent=1) + "\n"
    # CSV is one table: the compile rows. Sibling records have no common shape.
    rows = compile_rows(engine)
    return format_csv(list(COMPILE_FIELDS), [[r[c] for c in COMPILE_FIELDS] for r in rows])

