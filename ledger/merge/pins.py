"""A source's pins, by the pins' own rule: sticky.

A source pin is a pointer to one of its rows. It is moved onto the same row in the
destination (found by its identity, record_key) and what the pin says is read from
that row, already checked by the validator (rows.py): never the source pin's own
copy of compile_s, tag or key, which a hand edit may have made anything.

A key the destination has not pinned takes the source's pin, written to pin_history
as 'merge'. A key pinned in both keeps the destination's pin; when the two differ
that is a conflict, reported, for a person to settle with `ledger pins update
--repin`. A source pin whose row is gone from the source (deleted by hand), or whose
row is not pinnable by the pins' rule (a warm ok compile), is skipped with a warning:
there is no measurement to move it onto, and `ledger pins update` on the merged
ledger pins that key from its rows. Verdicts and check runs are not merged: each
judged its own ledger's rows against its own pins; `ledger check` on the merged
ledger judges anew.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.merge.rows import shown
from ledger.rows import describe_key, pinnable_sql
from ledger.storage.engine import one_writer_at_a_time
from ledger.storage.in_lists import rows_in
from ledger.watch.keys import LOADED_SQL, key_columns_sql, pin_key
from ledger.watch.pins import Change, adopt_pins, existing_pins


@dataclass
class PinMerge:
    adopted: int = 0
    same: int = 0
    conflicts: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def source_pins(src) -> list[tuple]:
    """(row_id, pin_key) of every source pin, as stored."""
    return [tuple(r) for r in src.exec_driver_sql("SELECT row_id, pin_key FROM pins ORDER BY id")]


def _dest_rows(dest, keys) -> dict:
    """{record_key: the row as a pin needs it} in the destination."""
    sql = (f"SELECT id, record_key, {key_columns_sql()}, compile_s, tag, timestamp,"
           f" {LOADED_SQL} AS loaded, CASE WHEN {pinnable_sql()} THEN 1 ELSE 0 END AS pinnable"
           " FROM compile_records WHERE record_key IN :keys")
    return {r["record_key"]: r for r in rows_in(dest, sql, "keys", keys)}


def merge_pins(theirs: list[tuple], src_keys: dict, dest) -> PinMerge:
    """`theirs`: source_pins(); `src_keys`: {source row id: record_key} of their rows."""
    one_writer_at_a_time(dest, "pins")  # what is adopted is what no other has pinned meanwhile
    ours = existing_pins(dest, None)
    rows = _dest_rows(dest, {src_keys[row_id] for row_id, _ in theirs if row_id in src_keys})
    out, adopt = PinMerge(), []
    for row_id, their_key in theirs:
        row = rows.get(src_keys.get(row_id))
        if row is None:
            out.skipped.append(f"pin {shown(their_key)}: its row {shown(row_id)} is not in the source (deleted?)")
            continue
        if not row["pinnable"]:
            out.skipped.append(f"pin {describe_key(row)}: its row is not a warm compile with status ok")
            continue
        key = pin_key(row)
        mine = ours.get(key)
        if mine is None:
            adopt.append(Change("merge", key, row))
            ours[key] = {"row_id": row["id"], "compile_s": row["compile_s"]}  # a second pin of the key is the same
        elif mine["row_id"] == row["id"]:
            out.same += 1
        else:
            out.conflicts.append(f"pin {describe_key(row)}: {row['compile_s']:.4g}s in the source,"
                                 f" {mine['compile_s']:.4g}s here (kept; `ledger pins update --repin` moves it)")
    adopt_pins(dest, adopt)
    out.adopted = len(adopt)
    return out

