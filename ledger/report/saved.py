"""What the cache saved, per host, cache dir and day: the report's "time saved" section.

Each warm compile saved its cell's median cold compile time (ledger/report/runs.median_cold:
the same estimate as `ledger runs`) minus its own; a warm compile of a cell never cold saved
an unknown amount, counted apart. The hit rate is warm compiles over warm and cold ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from ledger.filters import filter_sql
from ledger.record import COLD, STATELESS_KEY, WARM
from ledger.report.runs import median_cold
from ledger.rows import key_values, ok_sql

DAYS = 14  # the newest days shown per host and cache dir


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


def per_day(engine, filters: dict | None = None) -> list[Day]:
    """Host and cache dir, then newest day first; at most DAYS days of each."""
    where, params = filter_sql(filters)
    cols = ", ".join(STATELESS_KEY)
    sql = (f"SELECT timestamp, cache_dir, cache_state, compile_s, {cols} FROM compile_records"
           f" WHERE cache_state IN ('{COLD}', '{WARM}') AND {ok_sql()} AND compile_s IS NOT NULL"
           f" AND cache_dir IS NOT NULL AND cache_dir <> '' AND timestamp IS NOT NULL{where}")
    with engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(sa.text(sql), params).mappings()]
        medians = median_cold(conn, {key_values(r, STATELESS_KEY) for r in rows if r["cache_state"] == WARM})
    days: dict[tuple, Day] = {}
    for r in rows:
        at = (r["hostname"], r["cache_dir"], r["timestamp"][:10])
        d = days.setdefault(at, Day(*at))
        d.compiles += 1
        if r["cache_state"] == WARM:
            d.warm += 1
            cold = medians.get(key_values(r, STATELESS_KEY))
            if cold is None:
                d.unknown += 1
            else:
                d.saved_s += max(cold - r["compile_s"], 0.0)
    out, shown = [], {}
    for at in sorted(days, key=lambda k: (str(k[0]), k[1], _newest_first(k[2]))):
        n = shown.get(at[:2], 0)
        if n < DAYS:
            out.append(days[at])
        shown[at[:2]] = n + 1
    return out


def _newest_first(day: str) -> tuple:
    return tuple(-ord(c) for c in day)
