"""What the cache saved, per host, cache dir and day: the report's "time saved" section.

Each warm compile saved its cell's median cold compile time (ledger/report/runs.median_cold:
the same estimate as `ledger runs`) minus its own, summed per cell and day in the database;
a warm compile of a cell never cold saved an unknown amount, counted apart. The hit rate is warm compiles over warm and cold ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from ledger.filters import filter_sql
from ledger.record import COLD, STATELESS_KEY, WARM
from ledger.report.runs import median_cold
from ledger.rows import key_values, ok_sql

DAYS = 14  # the ledger's newest days shown


@dataclass
class Day:
    hostname: str | None
    cache_dir: str
    day: str
    compiles: int = 0
    warm: int = 0
    saved_s: float = 0.0
    unknown: int = 0

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
    dir, day and cell in the database: the report reads a few thousand groups, not
    every row."""
    where, params = filter_sql(filters)
    where += " AND timestamp >= :since"
    params = {**params, "since": _since(conn, *filter_sql(filters))}
    cols = ", ".join(STATELESS_KEY)
    sql = (f"SELECT cache_dir, SUBSTR(timestamp, 1, 10) AS day, {cols}, COUNT(*) AS n,"
           f" SUM(CASE WHEN cache_state = '{WARM}' THEN 1 ELSE 0 END) AS n_warm,"
           f" SUM(CASE WHEN cache_state = '{WARM}' THEN compile_s ELSE 0 END) AS warm_s"
           f" FROM compile_records WHERE cache_state IN ('{COLD}', '{WARM}') AND {ok_sql()}"
           f" AND compile_s IS NOT NULL AND cache_dir IS NOT NULL AND cache_dir <> '' AND timestamp IS NOT NULL{where}"
           f" GROUP BY cache_dir, SUBSTR(timestamp, 1, 10), {cols}")
    return [dict(r) for r in conn.execute(sa.text(sql), params).mappings()]


def per_day(engine, filters: dict | None = None) -> list[Day]:
    """Host and cache dir, then newest day first; at most DAYS days of each. A cell's warm
    compiles of one day saved their number times its median cold compile, less what they
    took (never below 0)."""
    with engine.connect() as conn:
        groups = _groups(conn, filters)
        medians = median_cold(conn, {key_values(g, STATELESS_KEY) for g in groups if g["n_warm"]})
    days: dict[tuple, Day] = {}
    for g in groups:
        at = (g["hostname"], g["cache_dir"], g["day"])
        d = days.setdefault(at, Day(*at))
        d.compiles += g["n"]
        d.warm += g["n_warm"]
        if not g["n_warm"]:
            continue
        cold = medians.get(key_values(g, STATELESS_KEY))
        if cold is None:
            d.unknown += g["n_warm"]
        else:
            d.saved_s += max(g["n_warm"] * cold - g["warm_s"], 0.0)
    out, shown = [], {}
    newest_first = sorted(days, key=lambda k: k[2], reverse=True)
    for at in sorted(newest_first, key=lambda k: (str(k[0]), k[1])):  # stable: days stay newest first
        n = shown.get(at[:2], 0)
        if n < DAYS:
            out.append(days[at])
        shown[at[:2]] = n + 1
    return out
