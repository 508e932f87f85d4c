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

import shlex
from dataclasses import dataclass, field
from datetime import datetime, timezone

import sqlalchemy as sa

from ledger.errors import LedgerError
from ledger.record import COMPARABILITY_KEY, SHAPE_FIELDS, STATUS_OK, WARM
from ledger.storage.models import pin_history, pins
from ledger.watch.history import fill_histories
from ledger.watch.keys import LOADED_SQL, key_columns_sql, pin_key

# The columns a user may narrow pins, check and repin by.
FILTER_FIELDS = ("hardware", "hostname", "dataset_class", "model_type", "instrument", "transform")

# Newest first; a NULL timestamp counts as the oldest on every backend.
NEWEST_FIRST = "COALESCE({p}timestamp, '') DESC, {p}id DESC"


def ok_sql(alias: str = "") -> str:
    # status is NULL only on rows written before the column had its default: they
    # were successful compiles (a failed transform was never recorded then).
    p = f"{alias}." if alias else ""
    return f"COALESCE({p}status, '{STATUS_OK}') = '{STATUS_OK}'"


def pinnable_sql(alias: str = "") -> str:
    p = f"{alias}." if alias else ""
    return f"{p}cache_state = '{WARM}' AND {ok_sql(alias)} AND {p}compile_s IS NOT NULL"


def filter_sql(filters: dict | None, alias: str = "") -> tuple[str, dict]:
    """' AND col = :f_col ...' for the filters given (None values are no filter)."""
    p = f"{alias}." if alias else ""
    parts, params = [], {}
    for name, value in (filters or {}).items():
        if value is None:
            continue
        if name not in FILTER_FIELDS:
            raise ValueError(f"not a filter column: {name}")
        parts.append(f" AND {p}{name} = :f_{name}")
        params[f"f_{name}"] = value
    return "".join(parts), params


def describe_filters(filters: dict | None) -> str:
    """The filters as the options that gave them (a value quoted as a shell would need,
    a huge one cut short)."""
    def shown(value) -> str:
        text = str(value)
        return shlex.quote(text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)")

    given = filters or {}
    return " ".join(f"--{name.replace('_', '-')} {shown(given[name])}" for name in FILTER_FIELDS
                    if given.get(name) is not None)  # one order, whichever command gave them


class NoRowMatches(LedgerError):
    """Filters that match no compile row: a typo (`--transform bogus`), so a usage
    error, exit 2; `ledger check` exits 1 for findings, and the two stay apart."""

    exit_code = 2


def refuse_unmatched(conn, filters: dict | None, consequence: str) -> None:
    """Refuse filters that were given and match not one compile row: every command
    that takes them (pins update and list, check, report) would otherwise print an
    empty answer and exit 0, and a typo in a CI filter would read as all-clear.
    No filters, or a matching row (or pin: one merged from another ledger): nothing to say."""
    where, params = filter_sql(filters)
    if where and not any(conn.execute(sa.text(f"SELECT 1 FROM {table} WHERE 1 = 1{where} LIMIT 1"), params).first()
                         for table in ("compile_records", "pins")):
        raise NoRowMatches(f"no compile row matches {describe_filters(filters)}: {consequence}")


def describe_key(row) -> str:
    """A key (or a cell) for people: host, then cell."""
    mp = row["mixed_precision"]
    host = f"{row['hardware']}/{row['hostname']} jax {row['jax_version']}" + (" mixed" if mp else "")
    cell = "/".join(str(row[f]) if row[f] is not None else "-" for f in ("dataset_class", "model_type", "instrument"))
    # the batch shape is part of the cell: two shapes are two keys, and must read so
    shape = [f"{f} {row.get(f)}" for f in SHAPE_FIELDS if row.get(f) is not None]
    # a recorded compile's cell is its function at an input signature
    function = f" {row.get('function')}({row.get('input_signature')})" if row.get("function") is not None else ""
    return f"{host} {cell} {row['transform']}{function}" + (f" ({', '.join(shape)})" if shape else "")


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
        f" ROW_NUMBER() OVER (PARTITION BY {keys} ORDER BY {NEWEST_FIRST.format(p='')}) AS rn"
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
    values = {name: row[name] for name in COMPARABILITY_KEY}
    if values["mixed_precision"] is not None:
        values["mixed_precision"] = bool(values["mixed_precision"])
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


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
