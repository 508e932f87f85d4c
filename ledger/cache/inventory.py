"""A cache dir's entries with what the ledger knows of each: the cell or recorded command
it serves, its warm hits, the seconds they saved, when it was last used, and whether it
is dead weight.

A row and an entry meet by JAX's cache key (compile_records.cache_key is the entry's
name without its suffix), in this dir, on this host: a row of another dir with the same
key (a copied cache) or of another node's dir of the same path (a node-local /tmp) is
another entry's use. Where the dir is on a network filesystem, every host's rows of it
count: they all read this one dir. A row's dir is read the same from any working directory:
its real path, or, for a relative one from an older ledger, nothing (what it was relative
to is not known). What a warm hit saved is ledger/savings.py's, as `ledger runs` and the
report say it: its cell's median cold compile on a host not loaded, or, where the ledger
never saw the cell cold, the whole seconds JAX recorded inside the entry when they are at
least 1; less what the warm compile took. A hit with neither is unknown.
"""

from __future__ import annotations

import os
import re
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from ledger import savings
from ledger.cache.entries import Entry, scan
from ledger.record import WARM
from ledger.rows import ok_sql

DAY = 86400.0
DEAD_NEVER_HIT, DEAD_UNUSED, DEAD_OLD_JAX = "never hit", "unused", "old jax"


@dataclass
class Item:
    entry: Entry
    serves: str | None = None
    hits: int = 0
    saved_s: float = 0.0
    saved_7d_s: float = 0.0
    unknown: int = 0  # hits whose saving is unknown (ledger/savings.py)
    saved_loaded_s: float = 0.0  # what those of them cold only on a loaded host saved by those rows
    last_used: float | None = None
    jax_versions: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        e = self.entry
        return {"key": e.key, "function": e.function, "bytes": e.bytes, "jax_compile_s": e.jax_compile_s, "unread": e.unread,
                "hits": self.hits, "saved_s": round(self.saved_s, 6), "saved_unknown": self.unknown,
                "saved_loaded_s": round(self.saved_loaded_s, 6), "last_used": iso(self.last_used),
                "written": iso(e.mtime), "serves": self.serves, "jax_versions": self.jax_versions,
                "dead": self.dead}


@dataclass
class Inventory:
    cache_dir: str
    items: list[Item]
    unused_days: int
    ledger_rows: int  # rows of the ledger that name a key of this dir
    ledger: str | None = None  # the ledger read, as shown; None: none, the files alone

    def totals(self) -> dict:
        dead = [i for i in self.items if i.dead]
        return {"entries": len(self.items), "bytes": sum(i.entry.bytes for i in self.items),
                "jax_compile_s": sum(i.entry.jax_compile_s or 0 for i in self.items),
                "saved_s": round(sum(i.saved_s for i in self.items), 6),
                "saved_7d_s": round(sum(i.saved_7d_s for i in self.items), 6),
                "saved_unknown": sum(i.unknown for i in self.items),
                "saved_loaded_s": round(sum(i.saved_loaded_s for i in self.items), 6),
                "dead_entries": len(dead), "dead_bytes": sum(i.entry.bytes for i in dead),
                "dead_by_reason": {r: sum(r in i.dead for i in self.items)
                                   for r in (DEAD_NEVER_HIT, DEAD_UNUSED, DEAD_OLD_JAX)},
                "ledger_rows": self.ledger_rows, "unused_days": self.unused_days}

    def as_json(self) -> dict:
        return {"cache_dir": self.cache_dir, "ledger": self.ledger, "entries": [i.as_json() for i in self.items],
                "totals": self.totals()}


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    from datetime import datetime, timezone

    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")


def epoch(ts: str | None) -> float | None:
    from datetime import datetime, timezone

    try:
        t = datetime.fromisoformat(ts) if ts else None
    except ValueError:
        return None
    if t is None:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()  # legacy naive times read as UTC


def _version(v: str | None) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", v or ""))


def _rows(conn, keys: set[str], cache_dir: Path) -> dict[str, list[dict]]:
    """The ok rows of each key that used this very dir (its real path, whichever link a
    row named it by), on this host unless the dir is on a network filesystem."""
    from functools import cache

    from ledger.storage.sqlite_file import network_filesystem

    here = os.path.realpath(cache_dir)
    host = None if network_filesystem(Path(cache_dir)) else socket.gethostname()

    @cache
    def same_dir(stored: str | None) -> bool:  # an absolute path reads the same from any directory
        return bool(stored) and os.path.isabs(stored) and os.path.realpath(stored) == here

    cols = ", ".join(dict.fromkeys(("cache_key", "cache_dir", "hostname", "cache_state", "compile_s", "timestamp",
                                    "command", "objective", "transform", "function", "jax_version", *savings.CELL)))
    sql = f"SELECT {cols} FROM compile_records WHERE cache_key IS NOT NULL AND {ok_sql()}"
    out: dict[str, list[dict]] = {}
    for r in conn.execute(sa.text(sql)).mappings():
        if r["cache_key"] in keys and host in (None, r["hostname"]) and same_dir(r["cache_dir"]):
            out.setdefault(r["cache_key"], []).append(dict(r))
    return out


def _saved(conn, rows: dict[str, list[dict]], items: list[Item]) -> None:
    """Each warm row's saving (ledger/savings.py), kept on the row as "saved"."""
    warm = [r for rs in rows.values() for r in rs if r["cache_state"] == WARM and r["compile_s"] is not None]
    jax_s = {i.entry.key: i.entry.jax_compile_s for i in items}
    for r, s in zip(warm, savings.of_rows(conn, warm, jax_s)):
        r["saved"] = s


def _serves(rows: list[dict]) -> str | None:
    r = rows[-1]
    if r["command"]:
        return f"{r['command']}: {r['function']}"
    return f"{r['objective'] or '?'} {r['transform']}"


def _fill(item: Item, rows: list[dict], now: float) -> None:
    for r in rows:
        when = epoch(r["timestamp"])
        if when is not None:
            item.last_used = max(item.last_used or when, when)
        if r["cache_state"] != WARM:
            continue
        item.hits += 1
        s = r.get("saved")
        if s is None:  # a hit without its seconds
            continue
        item.unknown += s.unknown
        item.saved_loaded_s += s.loaded_s
        item.saved_s += s.seconds
        if when is not None and when >= now - 7 * DAY:
            item.saved_7d_s += s.seconds
    item.serves = _serves(rows)
    item.jax_versions = sorted({r["jax_version"] for r in rows if r["jax_version"]}, key=_version)


def last_use(item: Item) -> float:
    """The newest of its last row in the ledger, its -atime and its write (seconds)."""
    return max(item.last_used or 0.0, item.entry.atime or 0.0, item.entry.mtime)


def _dead(items: list[Item], unused_days: int, now: float, known: bool) -> None:
    """``known``: a ledger was read (without one, no entry is called never hit)."""
    newest_jax = max((v for i in items for v in i.jax_versions), key=_version, default=None)
    for i in items:
        if known and i.hits == 0:
            i.dead.append(DEAD_NEVER_HIT)
        if last_use(i) < now - unused_days * DAY:
            i.dead.append(DEAD_UNUSED)
        if i.jax_versions and newest_jax and _version(i.jax_versions[-1]) < _version(newest_jax):
            i.dead.append(DEAD_OLD_JAX)


def build(cache_dir: Path, engine=None, unused_days: int = 30, now: float | None = None,
          ledger: str | None = None) -> Inventory:
    """The inventory of ``cache_dir``; ``engine`` None: from the files alone."""
    now = time.time() if now is None else now
    items = [Item(e, last_used=e.atime) for e in scan(cache_dir)]
    rows: dict[str, list[dict]] = {}
    if engine is not None:
        with engine.connect() as conn:
            rows = _rows(conn, {i.entry.key for i in items}, cache_dir)
            _saved(conn, rows, items)
    for i in items:
        if i.entry.key in rows:
            _fill(i, rows[i.entry.key], now)
    _dead(items, unused_days, now, engine is not None)
    return Inventory(os.path.realpath(cache_dir), items, unused_days, sum(len(v) for v in rows.values()), ledger)
