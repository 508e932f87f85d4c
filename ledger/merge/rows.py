"""Compile and sibling rows from a source into the destination, keyed so that a row
already there is not added again (storage/bulk.py), and rows whose identity matches
but whose cache_state differs reported as conflicts (the destination's stays)."""

from __future__ import annotations

import json

import sqlalchemy as sa

from ledger.record import COMPILE_FIELDS, INSTRUMENT_COLUMNS
from ledger.record_validation import compile_key, instrument_key
from ledger.storage.bulk import insert_new, lookup
from ledger.storage.models import compile_records, instrument_records

CHUNK = 10_000
_INSTRUMENT = ("record_kind", "record_json", *INSTRUMENT_COLUMNS)


def _chunks(conn, table, columns):
    query = sa.select(*(table.c[c] for c in columns), table.c.record_key).order_by(table.c.id)
    result = conn.execution_options(stream_results=True).execute(query).mappings()
    while rows := result.fetchmany(CHUNK):
        yield [dict(r) for r in rows]


def copy_compile_rows(src, dest) -> tuple[int, int, list[str]]:
    """(added, already present, conflicts) for the source's compile rows."""
    added = present = 0
    conflicts: list[str] = []
    for rows in _chunks(src, compile_records, tuple(COMPILE_FIELDS)):
        for row in rows:
            if row["record_key"] is None:  # a plain INSERT of an old tool: key it as import does
                row["record_key"] = compile_key(row)
        n = insert_new(dest, compile_records, rows)
        added += n
        if n < len(rows):  # some were there: the same identity must say the same state
            have = lookup(dest, compile_records, "record_key", "cache_state", [r["record_key"] for r in rows])
            mine = {r["record_key"]: r for r in rows}
            for key, state in have.items():
                row = mine[key]
                if state != row["cache_state"]:
                    conflicts.append(f"row {row['transform']} {row['tag']!r} {row['timestamp']}: cache_state "
                                     f"{row['cache_state']} in the source, {state} here (kept)")
            present += len(rows) - n
    return added, present, conflicts


def copy_instrument_rows(src, dest) -> tuple[int, int]:
    added = present = 0
    for rows in _chunks(src, instrument_records, _INSTRUMENT):
        for row in rows:
            if row["record_key"] is None:
                row["record_key"] = instrument_key(json.loads(row["record_json"]), row["hardware"])
        n = insert_new(dest, instrument_records, rows)
        added, present = added + n, present + len(rows) - n
    return added, present
