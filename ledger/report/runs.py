"""`ledger runs`: one line per run, newest first: its time, the share of it spent
compiling, and what the cache saved it.

A run is one run id: a probe (its --cold-warm pair included) or one `ledger record` of a
program, all its processes. Rows without a run id (legacy imports) belong to no run and
are counted apart.

- Compiling is tracing and lowering (trace_s: JAX's jaxpr trace and MLIR lowering, which
  no cache removes) plus XLA's compile (compile_s: the backend compile, or the cache read
  when warm).
- A recorded run's time is its processes' (recorded_processes): from the first start to
  the last end; its compile share is its compiling seconds over its processes' seconds
  (for one process, over its wall time). A probe run keeps no process time: unknown.
- Saved seconds are ledger/savings.py's, the one definition.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime

from ledger import savings
from ledger.filters import filter_sql
from ledger.record import COLD, ENDED_EXIT, WARM
from ledger.rows import ok_sql, time_sql

SAVED_FROM = savings.SAVED_FROM


@dataclass
class RunTime:
    """A recorded run's time, from its processes."""

    wall_s: float  # the first start to the last end
    process_s: float  # the processes' wall seconds, summed
    processes: int
    ended_by: list[str] = field(default_factory=list)  # how each end is known, where not by its exit

    @property
    def exact(self) -> bool:
        return not self.ended_by


@dataclass
class Run:
    run_id: str
    started: str
    host: str
    what: str
    compiles: int
    cold: int
    warm: int
    compile_s: float  # XLA: backend compiles and cache reads
    trace_s: float  # tracing and lowering
    saved_s: float | None  # None: no warm compile has a cold cost
    saved_unknown: int  # warm compiles with no cold cost
    saved: savings.Saved = field(default_factory=savings.Saved)
    time: RunTime | None = None

    @property
    def compiling_s(self) -> float:
        return self.compile_s + self.trace_s

    @property
    def share(self) -> float | None:
        """The share of the run's process time spent compiling; None without its time."""
        if self.time is None or self.time.process_s <= 0:
            return None
        return self.compiling_s / self.time.process_s

    def as_dict(self) -> dict:
        out = asdict(self)
        out["saved"] = self.saved.as_dict()
        out["compiling_s"], out["share"] = self.compiling_s, self.share
        return out


def _listed(conn, where: str, params: dict, limit: int | None, ids: list[str] | None = None) -> list[dict]:
    import sqlalchemy as sa

    t = time_sql()
    among = " AND run_id IN :ids" if ids is not None else ""
    sql = (f"SELECT run_id, MIN({t}) AS started, MIN(hostname) AS host, COUNT(DISTINCT hostname) AS hosts,"
           " MIN(command) AS command, MIN(objective) AS objective, COUNT(*) AS compiles,"
           f" SUM(CASE WHEN cache_state = '{COLD}' THEN 1 ELSE 0 END) AS cold,"
           f" SUM(CASE WHEN cache_state = '{WARM}' THEN 1 ELSE 0 END) AS warm,"
           " COALESCE(SUM(compile_s), 0) AS compile_s, COALESCE(SUM(trace_s), 0) AS trace_s"
           f" FROM compile_records WHERE run_id IS NOT NULL AND {ok_sql()}{where}{among}"
           " GROUP BY run_id ORDER BY started DESC, MAX(id) DESC" + (" LIMIT :limit" if limit else ""))
    stmt = _among(sql) if ids is not None else sa.text(sql)
    return [dict(r) for r in conn.execute(stmt, {**params, "limit": limit, "ids": ids}).mappings()]


def _among(sql: str):
    import sqlalchemy as sa

    # typed: an empty list is then a typed empty list on PostgreSQL, not NULL as an integer
    return sa.text(sql).bindparams(sa.bindparam("ids", expanding=True, type_=sa.Text))


def _transforms(conn, run_ids: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    sql = _among("SELECT DISTINCT run_id, transform FROM compile_records WHERE run_id IN :ids ORDER BY transform")
    for run_id, transform in conn.execute(sql, {"ids": run_ids}):
        out.setdefault(run_id, []).append(transform)
    return out


def _what(row: dict, transforms: list[str]) -> str:
    if row["command"]:
        return row["command"]
    return f"{row['objective'] or '?'} ({', '.join(transforms)})"


def saved_rows(conn, run_ids: list[str], costs_of=savings.cold_costs) -> list[tuple[dict, savings.Saved]]:
    """Each warm row of the runs (its id and run id) with what it saved (ledger/savings.py;
    ``costs_of``: savings.of_rows')."""
    cols = ", ".join(savings.CELL)
    sql = _among(f"SELECT id, run_id, {cols}, compile_s, cache_dir, cache_key FROM compile_records"
                 f" WHERE run_id IN :ids AND cache_state = '{WARM}' AND {ok_sql()} AND compile_s IS NOT NULL")
    warm = [dict(r) for r in conn.execute(sql, {"ids": run_ids}).mappings()]
    return list(zip(warm, savings.of_rows(conn, warm, costs_of=costs_of)))


def saved_by_run(conn, run_ids: list[str], rows: list | None = None) -> dict[str, savings.Saved]:
    """What each run's warm compiles saved; ``rows``: saved_rows() of them, where read already."""
    out: dict[str, savings.Saved] = {}
    for row, s in saved_rows(conn, run_ids) if rows is None else rows:
        out.setdefault(row["run_id"], savings.Saved()).add(s)
    return out


def _epoch(ts: str) -> float:
    return datetime.fromisoformat(ts).timestamp()


def run_times(conn, run_ids: list[str]) -> dict[str, RunTime]:
    """Each recorded run's time, from its processes (a run without any: absent)."""
    sql = _among("SELECT run_id, started, ended, wall_s, ended_by FROM recorded_processes WHERE run_id IN :ids")
    procs: dict[str, list] = {}
    for r in conn.execute(sql, {"ids": run_ids}).mappings():
        procs.setdefault(r["run_id"], []).append(r)
    out = {}
    for run_id, ps in procs.items():
        start = min(_epoch(p["started"]) for p in ps)
        end = max(_epoch(p["ended"]) if p["ended"] else _epoch(p["started"]) for p in ps)
        out[run_id] = RunTime(end - start, sum(p["wall_s"] or 0.0 for p in ps), len(ps),
                              sorted({p["ended_by"] for p in ps} - {ENDED_EXIT}))
    return out


def list_runs(engine, filters: dict | None = None, limit: int | None = 20) -> list[Run]:
    """The runs, newest first (at most ``limit``; None: all)."""
    where, params = filter_sql(filters)
    with engine.connect() as conn:
        return _runs(conn, _listed(conn, where, params, limit))


def list_runs_of(conn, run_ids: list[str], saved: list | None = None) -> list[Run]:
    """The runs ``run_ids``, newest first (the report's newest run of each program);
    ``saved``: their saved_rows(), where read already."""
    return _runs(conn, _listed(conn, "", {}, None, run_ids), saved) if run_ids else []


def _runs(conn, rows: list[dict], saved_of_rows: list | None = None) -> list[Run]:
    ids = [r["run_id"] for r in rows]
    transforms = _transforms(conn, ids) if ids else {}
    saved = saved_by_run(conn, ids, saved_of_rows) if ids else {}
    times = run_times(conn, ids) if ids else {}
    out = []
    for r in rows:
        host = r["host"] if r["hosts"] == 1 else f"{r['host']} and {r['hosts'] - 1} more"
        s = saved.get(r["run_id"], savings.Saved())
        out.append(Run(r["run_id"], r["started"], host, _what(r, transforms.get(r["run_id"], [])), r["compiles"],
                       r["cold"], r["warm"], float(r["compile_s"]), float(r["trace_s"]), s.value, s.unknown, s,
                       times.get(r["run_id"])))
    return out


def unrun_rows(engine, filters: dict | None = None) -> int:
    """Rows that belong to no run (no run id: legacy imports)."""
    import sqlalchemy as sa

    where, params = filter_sql(filters)
    with engine.connect() as conn:
        return conn.execute(sa.text(f"SELECT COUNT(*) FROM compile_records WHERE run_id IS NULL{where}"),
                            params).scalar()


def summary(run: Run) -> str:
    """One run's time in one line, as `runs` and the report say it:
    '38% of 23.0 s compiling: 4.1 s tracing and lowering, 4.7 s XLA; the cache removed 2.4 s'."""
    from ledger.report.text import significant

    parts = f"{run.trace_s:.1f} s tracing and lowering, {run.compile_s:.1f} s XLA"
    if run.time is None:
        head = f"{run.compiling_s:.1f} s compiling (the run's own time was not recorded)"
    else:
        t = run.time
        of = f"{t.wall_s:.1f} s" if t.processes == 1 else f"{t.wall_s:.1f} s ({t.processes} processes, {t.process_s:.1f} s in all)"
        share = f"{100 * run.share:.0f}%" if run.share is not None else "-"
        head = f"{share} of {of} compiling"
        if not t.exact:
            head += f" ({_ends(t.ended_by)})"
    removed = savings.words(run.saved, significant)
    return f"{head}: {parts}; the cache removed {removed}"


def _ends(ended_by: list[str]) -> str:
    from ledger.record import ENDED_GONE

    if ended_by == [ENDED_GONE]:
        return "a process ended without a word, killed? its end is when it was seen gone"
    return "a process's end was never seen: at least this long"
