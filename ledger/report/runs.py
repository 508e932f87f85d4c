"""`ledger runs`: one line per run, newest first, and what the cache saved it.

A run is one run id: a probe (its --cold-warm pair included) or one `ledger record` of a
program, all its processes. Rows without a run id (legacy imports) belong to no run and
are counted apart. Saved seconds: for each warm compile, its cell's median cold compile
time (all runs, this cache dir or not) minus its own; a cell never cold has no estimate,
and its warm compiles are counted as unknown, not as zero.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

import sqlalchemy as sa

from ledger.filters import filter_sql
from ledger.record import COLD, STATELESS_KEY, WARM
from ledger.rows import key_values, ok_sql, time_sql

SAVED_FROM = "the cell's median cold compile minus the warm one"


@dataclass
class Run:
    run_id: str
    started: str
    host: str
    what: str
    compiles: int
    cold: int
    warm: int
    compile_s: float
    saved_s: float | None  # None: no warm compile has a cold one to compare with
    saved_unknown: int  # warm compiles of cells never cold

    def as_dict(self) -> dict:
        return asdict(self)


def _listed(conn, where: str, params: dict, limit: int | None) -> list[dict]:
    t = time_sql()
    sql = (f"SELECT run_id, MIN({t}) AS started, MIN(hostname) AS host, COUNT(DISTINCT hostname) AS hosts,"
           " MIN(command) AS command, MIN(objective) AS objective, COUNT(*) AS compiles,"
           f" SUM(CASE WHEN cache_state = '{COLD}' THEN 1 ELSE 0 END) AS cold,"
           f" SUM(CASE WHEN cache_state = '{WARM}' THEN 1 ELSE 0 END) AS warm,"
           " COALESCE(SUM(compile_s), 0) AS compile_s"
           f" FROM compile_records WHERE run_id IS NOT NULL AND {ok_sql()}{where}"
           " GROUP BY run_id ORDER BY started DESC, MAX(id) DESC" + (" LIMIT :limit" if limit else ""))
    return [dict(r) for r in conn.execute(sa.text(sql), {**params, "limit": limit}).mappings()]


def _transforms(conn, run_ids: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    sql = sa.text("SELECT DISTINCT run_id, transform FROM compile_records WHERE run_id IN :ids ORDER BY transform")
    for run_id, transform in conn.execute(sql.bindparams(sa.bindparam("ids", expanding=True)), {"ids": run_ids}):
        out.setdefault(run_id, []).append(transform)
    return out


def _what(row: dict, transforms: list[str]) -> str:
    if row["command"]:
        return row["command"]
    return f"{row['objective'] or '?'} ({', '.join(transforms)})"


def median_cold(conn, cells: set[tuple]) -> dict[tuple, float]:
    """Each cell's median cold compile seconds (the cell: the stateless key, all dirs);
    read as plain tuples: at 50k cold rows, mapping each row cost more than the query."""
    cols = ", ".join(STATELESS_KEY)
    mp = STATELESS_KEY.index("mixed_precision")
    found: dict[tuple, list[float]] = {}
    sql = f"SELECT compile_s, {cols} FROM compile_records WHERE cache_state = '{COLD}' AND {ok_sql()}" \
          " AND compile_s IS NOT NULL"
    for seconds, *key in conn.execute(sa.text(sql)).all():
        if key[mp] is not None:
            key[mp] = bool(key[mp])
        cell = tuple(key)
        if cell in cells:
            found.setdefault(cell, []).append(seconds)
    return {c: statistics.median(v) for c, v in found.items()}


def _saved(conn, run_ids: list[str]) -> dict[str, tuple[float | None, int]]:
    cols = ", ".join(STATELESS_KEY)
    sql = sa.text(f"SELECT run_id, {cols}, compile_s FROM compile_records WHERE run_id IN :ids"
                  f" AND cache_state = '{WARM}' AND {ok_sql()} AND compile_s IS NOT NULL")
    warm = [(r["run_id"], key_values(r, STATELESS_KEY), r["compile_s"])
            for r in conn.execute(sql.bindparams(sa.bindparam("ids", expanding=True)), {"ids": run_ids}).mappings()]
    medians = median_cold(conn, {cell for _, cell, _ in warm})
    out: dict[str, tuple[float | None, int]] = {}
    for run_id, cell, seconds in warm:
        total, unknown = out.get(run_id, (None, 0))
        if cell in medians:
            total = (total or 0.0) + max(medians[cell] - seconds, 0.0)
        else:
            unknown += 1
        out[run_id] = (total, unknown)
    return out


def list_runs(engine, filters: dict | None = None, limit: int | None = 20) -> list[Run]:
    """The runs, newest first (at most ``limit``; None: all)."""
    where, params = filter_sql(filters)
    with engine.connect() as conn:
        rows = _listed(conn, where, params, limit)
        ids = [r["run_id"] for r in rows]
        transforms = _transforms(conn, ids) if ids else {}
        saved = _saved(conn, ids) if ids else {}
    out = []
    for r in rows:
        host = r["host"] if r["hosts"] == 1 else f"{r['host']} and {r['hosts'] - 1} more"
        s, unknown = saved.get(r["run_id"], (None, 0))
        out.append(Run(r["run_id"], r["started"], host, _what(r, transforms.get(r["run_id"], [])), r["compiles"],
                       r["cold"], r["warm"], float(r["compile_s"]), s, unknown))
    return out


def unrun_rows(engine, filters: dict | None = None) -> int:
    """Rows that belong to no run (no run id: legacy imports)."""
    where, params = filter_sql(filters)
    with engine.connect() as conn:
        return conn.execute(sa.text(f"SELECT COUNT(*) FROM compile_records WHERE run_id IS NULL{where}"),
                            params).scalar()
