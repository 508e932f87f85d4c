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

from ledger.storage.bulk import lookup
from ledger.storage.models import compile_records, pins
from ledger.watch.pins import Change, adopt_pins, describe_key, existing_pins


@dataclass
class PinMerge:
    adopted: int = 0
    same: int = 0
    conflicts: list[str] = field(default_factory=list)


def merge_pins(src, dest) -> PinMerge:
    theirs = [dict(r) for r in src.execute(sa.select(pins)).mappings()]
    ours = existing_pins(dest, None)
    # a pin's row is found in the other ledger by its identity, not its id
    src_keys = lookup(src, compile_records, "id", "record_key", [p["row_id"] for p in theirs])
    dest_ids = lookup(dest, compile_records, "record_key", "id", [k for k in src_keys.values() if k is not None])
    our_keys = lookup(dest, compile_records, "id", "record_key", [p["row_id"] for p in ours.values()])
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
