"""A source's pins, by the pins' own rule: sticky.

A key the destination has not pinned takes the source's pin, moved onto the same
row in the destination (found by its identity, record_key) and written to
pin_history as 'merge'. A key pinned in both keeps the destination's pin; when the
two differ that is a conflict, reported, for a person to settle with `ledger pins
update --repin`. Verdicts and check runs are not merged: each judged its own
ledger's rows against its own pins; `ledger check` on the merged ledger judges
anew.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa

from ledger.storage.models import compile_records, pins
from ledger.watch.pins import Change, adopt_pins, describe_key, existing_pins


@dataclass
class PinMerge:
    adopted: int = 0
    same: int = 0
    conflicts: list[str] = field(default_factory=list)


def _row_keys(conn, ids: list[int]) -> dict[int, int]:
    """row id -> record_key, for the given rows."""
    out = {}
    for start in range(0, len(ids), 500):
        query = sa.select(compile_records.c.id, compile_records.c.record_key).where(
            compile_records.c.id.in_(ids[start:start + 500]))
        out.update(conn.execute(query).all())
    return out


def _ids_of(conn, keys: list[int]) -> dict[int, int]:
    """record_key -> row id, in this ledger."""
    out = {}
    for start in range(0, len(keys), 500):
        query = sa.select(compile_records.c.record_key, compile_records.c.id).where(
            compile_records.c.record_key.in_(keys[start:start + 500]))
        out.update(conn.execute(query).all())
    return out


def merge_pins(src, dest) -> PinMerge:
    theirs = [dict(r) for r in src.execute(sa.select(pins)).mappings()]
    ours = existing_pins(dest, None)
    src_keys = _row_keys(src, [p["row_id"] for p in theirs])
    dest_ids = _ids_of(dest, [k for k in src_keys.values() if k is not None])
    our_keys = _row_keys(dest, [p["row_id"] for p in ours.values()])
    out, adopt = PinMerge(), []
    for pin in theirs:
        record_key = src_keys.get(pin["row_id"])
        mine = ours.get(pin["pin_key"])
        if mine is None:
            row = dict(pin, id=dest_ids[record_key], loaded=pin["loaded_host"])
            adopt.append(Change("merge", pin["pin_key"], row))
        elif our_keys.get(mine["row_id"]) == record_key:
            out.same += 1
        else:
            out.conflicts.append(f"pin {describe_key(pin)}: {pin['compile_s']:.4g}s in the source,"
                                 f" {mine['compile_s']:.4g}s here (kept; `ledger pins update --repin` moves it)")
    adopt_pins(dest, adopt)
    out.adopted = len(adopt)
    return out
