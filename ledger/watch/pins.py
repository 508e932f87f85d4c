"""Sticky warm-compile pins: the expected warm compile of one comparability key.

A pin never follows the newest number on its own: one that did would absorb a
regression and report all-clear forever. So `update_pins` only pins keys that have
no pin, and moves existing ones only when asked (`repin`), writing what it replaced
to pin_history. Only warm rows with status ok are pinnable: a cold row is the cost
the cache exists to remove, none and unknown rows sit on neither side of that line.
Rows from a loaded host (keys.LOADED_SQL) are left out unless `allow_loaded`.

The newest pinnable row per key is chosen by the database (one window pass), so
the work grows with the table in SQL and with the number of keys in Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa

from ledger.filters import filter_sql, refuse_unmatched
from ledger.record import COMPARABILITY_KEY
from ledger.rows import describe_key, key_values, newest_first, pinnable_sql, utc_now
from ledger.storage.engine import one_writer_at_a_time
from ledger.storage.models import pin_history, pins
from ledger.watch.history import fill_histories
from ledger.watch.keys import LOADED_SQL, key_columns_sql, pin_key


@dataclass
class Change:
    action: str  # pin | repin | merge (taken from another ledger by `ledger merge`)
    key: str
    new: dict
    old: dict | None = None

    def line(self) -> str:
        new = f"row {self.new['id']} {self.new['compile_s']:.4g}s ({self.new['tag']}, {self.new['timestamp']})"
        loaded = " [loaded host]" if self.new["loaded"] else ""
        if self.action in ("pin", "merge"):
            return f"{'new' if self.action == 'pin' else 'merged':<7} {describe_key(self.new)}: {new}{loaded}"
        old = f"row {self.old['row_id']} {self.old['compile_s']:.4g}s"
        return f"repin   {describe_key(self.new)}: {old} -> {new}{loaded}"


@dataclass
class PinPlan:
    changes: list[Change] = field(default_factory=list)
    unchanged: int = 0
    skipped_loaded: int = 0  # warm rows left out as loaded-host rows, counted when nothing was pinned

    def count(self, action: str) -> int:
        return sum(c.action == action for c in self.changes)

    def summary(self) -> str:
        new, repinned = self.count("pin"), self.count("repin")
        if not new + repinned + self.unchanged and self.skipped_loaded:
            # not "0 new": there were warm rows, and the loaded-host rule is why none is pinned
            rows = f"{self.skipped_loaded} warm row{'' if self.skipped_loaded == 1 else 's'}"
            return (f"0 pins: {rows} skipped as taken on a loaded host (1-minute load above the usable cores);"
                    " --allow-loaded pins them anyway")
        return f"{new + repinned + self.unchanged} pins: {new} new, {repinned} repinned, {self.unchanged} unchanged"


def candidates(conn, filters: dict | None, allow_loaded: bool) -> list[dict]:
    """The newest pinnable row of every key (matching the filters)."""
    where, params = filter_sql(filters)
    if not allow_loaded:
        where += f" AND NOT {LOADED_SQL}"
    keys = key_columns_sql()
    sql = (
        f"SELECT * FROM (SELECT id, {keys}, compile_s, tag, timestamp, {LOADED_SQL} AS loaded,"
        f" ROW_NUMBER() OVER (PARTITION BY {keys} ORDER BY {newest_first()}) AS rn"
        f" FROM compile_records WHERE {pinnable_sql()}{where}) ranked WHERE rn = 1"
    )
    return [dict(r) for r in conn.execute(sa.text(sql), params).mappings()]


def existing_pins(conn, filters: dict | None) -> dict[str, dict]:
    where, params = filter_sql(filters)
    rows = conn.execute(sa.text(f"SELECT * FROM pins WHERE 1 = 1{where}"), params).mappings()
    return {r["pin_key"]: dict(r) for r in rows}


def plan_pins(conn, *, filters: dict | None = None, repin: bool = False, allow_loaded: bool = False) -> PinPlan:
    refuse_unmatched(conn, filters, "nothing to pin")
    current = existing_pins(conn, filters)
    plan = PinPlan()
    for row in candidates(conn, filters, allow_loaded):
        key = pin_key(row)
        old = current.get(key)
        if old is None:
            plan.changes.append(Change("pin", key, row))
        elif repin and old["row_id"] != row["id"]:
            plan.changes.append(Change("repin", key, row, old))
    plan.changes.sort(key=lambda c: (c.action, c.key))
    plan.unchanged = len(current) - plan.count("repin")
    if not plan.changes and not plan.unchanged and not allow_loaded:
        where, params = filter_sql(filters)
        plan.skipped_loaded = conn.execute(sa.text(
            f"SELECT count(*) FROM compile_records WHERE {pinnable_sql()} AND {LOADED_SQL}{where}"), params).scalar()
    return plan


def _pin_values(change: Change, now: str) -> dict:
    row = change.new
    values = dict(zip(COMPARABILITY_KEY, key_values(row, COMPARABILITY_KEY)))
    # the key's history is taken again for the new pin (history.fill_histories)
    return dict(values, pin_key=change.key, row_id=row["id"], compile_s=row["compile_s"], tag=row["tag"],
                timestamp=row["timestamp"], pinned_at=now, loaded_host=bool(row["loaded"]),
                history_n=None, history_median_s=None, history_mad_s=None, threshold_s=None)


def _history_values(change: Change, now: str) -> dict:
    old = change.old or {}
    new = change.new
    return {"pin_key": change.key, "action": change.action, "changed_at": now,
                "old_row_id": old.get("row_id"), "old_compile_s": old.get("compile_s"),
                "old_tag": old.get("tag"), "old_timestamp": old.get("timestamp"),
                "new_row_id": new["id"], "new_compile_s": new["compile_s"], "new_tag": new["tag"],
                "new_timestamp": new["timestamp"]}


def apply_plan(conn, plan: PinPlan) -> None:
    """Write the plan's pins and their history (the caller's transaction)."""
    now = utc_now()
    new = [_pin_values(c, now) for c in plan.changes if c.action == "pin"]
    if new:
        conn.execute(sa.insert(pins), new)
    for c in plan.changes:
        if c.action == "repin":
            values = _pin_values(c, now)
            conn.execute(sa.update(pins).where(pins.c.pin_key == c.key).values(**values))
    if plan.changes:
        conn.execute(sa.insert(pin_history), [_history_values(c, now) for c in plan.changes])


def adopt_pins(conn, changes: list[Change]) -> None:
    """Pins of keys this ledger had not pinned, taken from another (`ledger merge`)."""
    now = utc_now()
    if changes:
        conn.execute(sa.insert(pins), [_pin_values(c, now) for c in changes])
        conn.execute(sa.insert(pin_history), [_history_values(c, now) for c in changes])


def update_pins(engine, *, filters=None, repin=False, allow_loaded=False, dry_run=False) -> PinPlan:
    """Pin new keys (and with `repin`, move the matching ones); `dry_run` writes nothing."""
    if dry_run:
        with engine.connect() as conn:
            return plan_pins(conn, filters=filters, repin=repin, allow_loaded=allow_loaded)
    with engine.begin() as conn:
        one_writer_at_a_time(conn, "pins")  # the plan is what no other has pinned meanwhile
        plan = plan_pins(conn, filters=filters, repin=repin, allow_loaded=allow_loaded)
        apply_plan(conn, plan)
        fill_histories(conn)  # new and moved pins, and any a migration or merge left without
    return plan


LIST_COLUMNS = ("id", *[f for f in COMPARABILITY_KEY if f != "cache_state"], "compile_s", "row_id", "tag",
                "timestamp", "pinned_at", "loaded_host")


def list_pins(engine, filters: dict | None = None) -> tuple[list[str], list[tuple]]:
    query = sa.select(*(pins.c[name] for name in LIST_COLUMNS))
    for name, value in (filters or {}).items():
        if value is not None:
            query = query.where(pins.c[name] == value)
    query = query.order_by(*(pins.c[name] for name in COMPARABILITY_KEY))
    with engine.connect() as conn:
        refuse_unmatched(conn, filters, "no pins to list")
        return list(LIST_COLUMNS), [tuple(r) for r in conn.execute(query)]

