"""What the cache saved, per host, cache dir and day: the report's "time saved" section.

What each warm compile saved is ledger/savings.py's (as `ledger runs` and `ledger cache`
say it): its cell's median cold compile on a host not loaded, less its own, summed per
cell, cache key and day in the database; a cell never cold saved JAX's whole seconds in
its entry where they are at least 1 s, else an unknown amount, counted apart. The hit
rate is warm compiles over warm and cold ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa

from ledger import savings
from ledger.filters import filter_sql
from ledger.record import COLD, WARM
from ledger.rows import ok_sql
from ledger.storage.cell_ids import all_assigned

DAYS = 14  # the ledger's newest days shown


@dataclass
class Day:
    hostname: str | None
    cache_dir: str
    day: str
    compiles: int = 0
    warm: int = 0
    saved: savings.Saved = field(default_factory=savings.Saved)

    @property
    def saved_s(self) -> float:
        return self.saved.seconds

    @property
    def unknown(self) -> int:
        return self.saved.unknown

    @property
    def hit_rate(self) -> float:
        return self.warm / self.compiles if self.compiles else 0.0


def _since(conn, where: str, params: dict) -> str:
    """The first of the ledger's DAYS newest days with a compile ('' when it has none)."""
    sql = (f"SELECT DISTINCT SUBSTR(timestamp, 1, 10) AS day FROM compile_records WHERE timestamp IS NOT NULL{where}"
           f" ORDER BY day DESC LIMIT {DAYS}")
    days = [r[0] for r in conn.execute(sa.text(sql), params)]
    return days[-1] if days else ""


def _groups(conn, filters: dict | None) -> list[dict]:
    """Warm and cold compiles of the ledger's DAYS newest days, summed per host, cache
    dir, day, cell and key in the database: the report reads a few thousand groups, not
    every row (a key: JAX's seconds in its entry, where the cell was never cold). Grouped
    by cell id where every row has one (cell_ids.all_assigned), its values read after."""
    where, params = filter_sql(filters)
    where += " AND timestamp >= :since"
    params = {**params, "since": _since(conn, *filter_sql(filters))}
    cols = ", ".join(savings.CELL)
    by_id = all_assigned(conn)
    sql = (f"SELECT cache_dir, SUBSTR(timestamp, 1, 10) AS day, {'cell_id' if by_id else cols}, cache_key,"
           f" COUNT(*) AS n, SUM(CASE WHEN cache_state = '{WARM}' THEN 1 ELSE 0 END) AS n_warm,"
           f" SUM(CASE WHEN cache_state = '{WARM}' THEN compile_s ELSE 0 END) AS warm_s"
           f" FROM compile_records WHERE cache_state IN ('{COLD}', '{WARM}') AND {ok_sql()}"
           f" AND compile_s IS NOT NULL AND cache_dir IS NOT NULL AND cache_dir <> '' AND timestamp IS NOT NULL{where}"
           f" GROUP BY cache_dir, SUBSTR(timestamp, 1, 10), {'cell_id' if by_id else cols}, cache_key")
    if by_id:
        sql = (f"SELECT g.cache_dir, g.day, {', '.join(f'c.{c}' for c in savings.CELL)}, g.cache_key, g.n, g.n_warm,"
               f" g.warm_s FROM ({sql}) g JOIN cells c ON c.id = g.cell_id")
    return [dict(r) for r in conn.execute(sa.text(sql), params).mappings()]


def per_day(engine, filters: dict | None = None, costs_of=savings.cold_costs) -> list[Day]:
    """Host and cache dir, then newest day first; at most DAYS days of each. A cell's warm
    compiles of one day saved their number times its cold cost, less what they took
    (``costs_of``: savings.of_rows')."""
    with engine.connect() as conn:
        groups = _groups(conn, filters)
        costs = costs_of(conn, {savings.cell_of(g) for g in groups if g["n_warm"]})
    days: dict[tuple, Day] = {}
    for g in groups:
        at = (g["hostname"], g["cache_dir"], g["day"])
        d = days.setdefault(at, Day(*at))
        d.compiles += g["n"]
        d.warm += g["n_warm"]
        if not g["n_warm"]:
            continue
        cost = costs.get(savings.cell_of(g))
        jax_s = savings.entry_seconds(g["cache_dir"], g["cache_key"]) if cost is None else None
        d.saved.add(savings.saved(g["n_warm"], g["warm_s"], cost, jax_s))
    out, shown = [], {}
    newest_first = sorted(days, key=lambda k: k[2], reverse=True)
    for at in sorted(newest_first, key=lambda k: (str(k[0]), k[1])):  # stable: days stay newest first
        n = shown.get(at[:2], 0)
        if n < DAYS:
            out.append(days[at])
        shown[at[:2]] = n + 1
    return out
