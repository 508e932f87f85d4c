"""The causes of a cold compile: what differs between a cold row and the last warm row
of its cell and cache dir, component by component of JAX's cache key. `ledger explain`
(explain.py), check's findings (findings.py) and `ledger predict` (ledger/predict/causes.py)
all name causes from here.
"""

from __future__ import annotations

import json
import os

import sqlalchemy as sa

from ledger.record import CACHE_CELL, WARM
from ledger.rows import before_sql, newest_first, ok_sql
from ledger.watch.keys import same_as_sql

COMPUTATION = "computation"
UNKNOWN_CAUSE = "cause unknown"
EMPTY_DIR = "cache dir was empty before the compile"
PRECISION = "precision: jax_enable_x64 changed"
SAME_KEY = "same cache key as the warm row (its entry was removed or never written)"
MAX_SIZE = "jax_compilation_cache_max_size"
PRUNED = "pruned"  # the entry was removed by `ledger cache prune` (its cache_prunes row)
# The columns that show a component's actual values, where the probe recorded them.
SHOWN_BY = {"XLA flags": "xla_flags", "jax_lib version": "jaxlib_version"}


def _components(row) -> dict | None:
    text = row.get("cache_key_components")
    if not text:
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) and parsed else None


def _computation(cold, warm) -> str:
    before, after = warm.get("program_fingerprint"), cold.get("program_fingerprint")
    if not before or not after:
        return COMPUTATION
    return f"{COMPUTATION} (program changed)" if before != after else f"{COMPUTATION} (same program, different hash)"


def _precision(cold, warm) -> list[str]:
    """x64 on one side and off on the other: float64 traced as float32 (or the reverse)
    is another program, whatever else differs; unknown on either side says nothing."""
    before, after = warm.get("x64"), cold.get("x64")
    if before is None or after is None or bool(before) == bool(after):
        return []
    return [f"{PRECISION} ({_on(before)} in the warm row, {_on(after)} now)"]


def _on(value) -> str:
    return "on" if value else "off"


def diagnose(cold: dict, warm: dict) -> list[str]:
    """The causes, from the evidence on both rows; never empty."""
    causes = _precision(cold, warm)
    if cold.get("cache_files_before") == 0:
        causes.append(EMPTY_DIR)
    a, b = _components(warm), _components(cold)
    if a is None or b is None:  # no components to compare; the keys themselves may still be
        same = cold.get("cache_key") is not None and cold.get("cache_key") == warm.get("cache_key")
        return causes or [SAME_KEY if same else UNKNOWN_CAUSE]
    for name in sorted(a.keys() | b.keys()):
        if a.get(name) != b.get(name):
            causes.append(_computation(cold, warm) if name == COMPUTATION else name)
    return causes or [SAME_KEY]


def diagnose_pruned(conn, cold: dict, warm: dict) -> list[str]:
    """diagnose(), and where the key did not change (same key, or only an emptied dir) and
    `ledger cache prune` removed that key's entry from the dir after the warm row (and
    before the cold row, where it has a time), that removal as the cause."""
    causes = diagnose(cold, warm)
    if not set(causes) <= {SAME_KEY, EMPTY_DIR}:
        return causes
    found = _pruned(conn, cold, warm)
    if found:
        return [found]
    limit = max_size(cold.get("jax_cache_settings"))
    if causes == [SAME_KEY] and limit is not None:
        return [(f"same cache key as the warm row, under {MAX_SIZE}={limit} bytes: likely evicted (JAX removes the"
                " least recently used entries when the dir is full)")]
    return causes


def max_size(settings: str | None) -> int | None:
    """jax_compilation_cache_max_size from a row's recorded cache settings, where a limit
    was in force (JAX's default -1 is none)."""
    try:
        value = json.loads(settings or "{}").get(MAX_SIZE)
    except (ValueError, AttributeError):
        return None
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def _pruned(conn, cold: dict, warm: dict) -> str | None:
    key = warm.get("cache_key")
    if not key or cold.get("cache_key") not in (None, key) or not sa.inspect(conn).has_table("cache_prunes"):
        return None  # the table is revision 0014's: an older ledger has no prunes to name
    sql = "SELECT cache_dir, pruned_at, reason FROM cache_prunes WHERE cache_key = :key ORDER BY pruned_at DESC, id DESC"
    prunes = [dict(r) for r in conn.execute(sa.text(sql), {"key": key}).mappings()]
    dirs = {cold.get("cache_dir"), warm.get("cache_dir")}
    row = next((p for d in dirs if (p := pruned_between(prunes, d, warm.get("timestamp"), cold.get("timestamp")))),
               None)
    return f"{PRUNED}: entry removed by ledger cache prune at {row['pruned_at']} ({row['reason']})" if row else None


def pruned_between(prunes: list[dict], cache_dir: str | None, after: str | None, before: str | None) -> dict | None:
    """The first of `prunes` (cache_prunes rows of one key) that removed it from `cache_dir`
    at or after the time `after` and at or before `before` (either None: unbounded), in
    real time (naive legacy times and aware ones alike), the dir's path normalized."""
    from ledger.cache.inventory import epoch

    start, end, where = epoch(after), epoch(before), _dir(cache_dir)
    for row in prunes:
        when = epoch(row["pruned_at"])
        if (where is not None and _dir(row["cache_dir"]) == where and when is not None
                and (start is None or when >= start) and (end is None or when <= end)):
            return row
    return None


def _dir(path: str | None) -> str | None:
    return os.path.normpath(os.path.abspath(os.path.expanduser(path))) if path else None


def cause_text(causes: list[str]) -> str:
    return "; ".join(causes)


def fetch_rows(conn, ids) -> dict[int, dict]:
    ids = sorted(set(ids))
    out = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        rows = conn.execute(sa.text("SELECT * FROM compile_records WHERE id IN :ids")
                            .bindparams(sa.bindparam("ids", expanding=True)), {"ids": chunk}).mappings()
        out.update((r["id"], dict(r)) for r in rows)
    return out


def last_warm_before(conn, row: dict) -> dict | None:
    """The newest warm ok row of the row's cell and cache dir that is older than it."""
    same = same_as_sql(CACHE_CELL, conn.dialect.name)
    older = before_sql("", ":ts", ":id")
    sql = (f"SELECT * FROM compile_records WHERE cache_state = '{WARM}' AND {ok_sql()} AND {same} AND {older}"
           f" ORDER BY {newest_first()} LIMIT 1")
    params = {f: row[f] for f in CACHE_CELL} | {"ts": row["timestamp"] or "", "id": row["id"]}
    found = conn.execute(sa.text(sql), params).mappings().first()
    return dict(found) if found else None
