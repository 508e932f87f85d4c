"""A source table whose rows are known by their content (cache prunes, recorded
processes: no record_key), carried into the destination once each.

Each row is checked column by column before it is written (``checks``: a column's
check from ledger/merge/values.py, or its own); a column the table holds NOT NULL must
be present. A row whose identity (``identity``'s columns) the destination holds already
is not added again, so merging the same source twice adds nothing; its id is not
carried: the destination gives its own. A refused row stops the merge with one line
naming the source, the row's kind and its id.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from ledger.merge.rows import checked, chunks
from ledger.record_validation import RecordError


@dataclass
class KeyedMerge:
    added: int = 0
    present: int = 0


def checker(table, checks: dict):
    """raw -> the destination's row (its id aside), or RecordError naming the column."""
    required = frozenset(c.name for c in table.c if not c.nullable and not c.primary_key)

    def check(raw: dict) -> dict:
        row = {}
        for name, check_one in checks.items():
            if raw[name] is None and name in required:
                raise RecordError(f"{name} is missing")
            row[name] = None if raw[name] is None else check_one(name, raw[name])
        return row

    return check


def copy_keyed(src, dest, display: str, table, checks: dict, identity: tuple, kind: str) -> KeyedMerge:
    out = KeyedMerge()
    check = checker(table, checks)
    held = {tuple(r) for r in dest.execute(sa.text(f"SELECT {', '.join(identity)} FROM {table.name}"))}
    for raws in chunks(src, display, table.name, ("id", *checks)):
        new = []
        for row in checked(raws, check, display, kind):
            key = tuple(row[name] for name in identity)
            if key in held:
                out.present += 1
                continue
            held.add(key)
            new.append(row)
        if new:
            dest.execute(table.insert(), new)
        out.added += len(new)
    return out
