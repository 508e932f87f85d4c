"""Where a recorded program's compile time goes: its functions by total compile time in
its newest recorded run, and the part of it the cache removed.

A recorded program is a command `ledger record` ran (compile_records.command). For its
newest run, each function's compiles are summed, with the call sites that asked for them
(compile_records.call_site: the program's or a library's line); a warm compile removed
what ledger/savings.py says it saved (its cell's median cold compile on a host not
loaded, less what the warm one took), as `ledger runs` and `ledger cache` say it. The
run's time and its compile share are `ledger runs`' (ledger/report/runs.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa

from ledger import savings
from ledger.record import FUNCTION_KIND_EAGER, RECORDED_TRANSFORM, STATUS_OK, WARM


@dataclass
class FunctionLine:
    function: str
    compiles: int = 0
    signatures: set = field(default_factory=set)
    compile_s: float = 0.0  # XLA: backend compiles and cache reads
    trace_s: float = 0.0  # tracing and lowering, which no cache removes
    warm: int = 0
    removed_s: float = 0.0  # what its warm compiles saved (ledger/savings.py)
    unknown: int = 0  # warm compiles with no cold cost
    eager: bool = False  # JAX compiling an op run outside jit, not the program's own function
    call_sites: dict = field(default_factory=dict)  # call site -> its compiles' seconds (trace and XLA)

    @property
    def seconds(self) -> float:
        """Its compiles' whole cost: tracing and lowering, and XLA."""
        return self.compile_s + self.trace_s

    @property
    def call_site(self) -> str | None:
        """The call site of most of its compile time (None: not recorded)."""
        known = {k: v for k, v in self.call_sites.items() if k is not None}
        return max(sorted(known), key=lambda k: known[k]) if known else None

    @property
    def removed(self) -> float | None:
        """What the cache removed; None when no warm compile had a cold one to compare."""
        return None if self.warm and self.unknown == self.warm else self.removed_s


@dataclass
class Program:
    command: str
    run_id: str
    timestamp: str | None
    hostname: str | None
    functions: list[FunctionLine]
    run: object = None  # its ledger/report/runs.Run: time, compile share, seconds saved

    @property
    def compile_s(self) -> float:
        return sum(f.compile_s for f in self.functions)

    @property
    def removed_s(self) -> float:
        return sum(f.removed_s for f in self.functions)

    @property
    def compiles(self) -> int:
        return sum(f.compiles for f in self.functions)

    @property
    def warm(self) -> int:
        return sum(f.warm for f in self.functions)

    @property
    def unknown(self) -> int:
        return sum(f.unknown for f in self.functions)

    @property
    def own(self) -> list[FunctionLine]:
        """The program's own functions (and its libraries' jitted ones), costliest first."""
        return [f for f in self.functions if not f.eager]

    @property
    def eager(self) -> list[FunctionLine]:
        """JAX's eager primitives, costliest first: folded into one line by the report."""
        return [f for f in self.functions if f.eager]


def _where(filters: dict | None) -> tuple[str, dict]:
    where = ["transform = :t", "status = :ok", "function IS NOT NULL", "command IS NOT NULL",
             "compile_s IS NOT NULL"]
    params = {"t": RECORDED_TRANSFORM, "ok": STATUS_OK}
    for name in ("model_type", "hostname"):
        if (filters or {}).get(name) is not None:
            where.append(f"{name} = :{name}")
            params[name] = filters[name]
    return " AND ".join(where), params


def _newest_runs(conn, where: str, params: dict) -> dict[str, str]:
    """Each recorded command's newest run (the run of its newest row), through the index on
    (command, transform) (revision 0020): the distinct commands walked from one to the
    next, then each one's rows read from its newest until one is a recorded program's,
    instead of every row grouped by its command (at 250k rows, 0.14 s; this, 1 ms)."""
    sql = ("WITH RECURSIVE commands (command) AS ("
           " SELECT MIN(command) FROM compile_records WHERE command IS NOT NULL"
           " UNION ALL SELECT (SELECT MIN(command) FROM compile_records WHERE command > commands.command)"
           " FROM commands WHERE command IS NOT NULL),"
           " newest (id) AS (SELECT (SELECT id FROM compile_records WHERE command = commands.command"
           f" AND {where} ORDER BY id DESC LIMIT 1) FROM commands WHERE command IS NOT NULL)"
           " SELECT r.command, r.run_id FROM compile_records r JOIN newest ON r.id = newest.id")
    return {r["command"]: r["run_id"] for r in conn.execute(sa.text(sql), params).mappings()}


def _run_rows(conn, where: str, params: dict, run_id: str) -> list[dict]:
    sql = ("SELECT id, command, run_id, timestamp, cache_state, compile_s, trace_s, function_kind, call_site,"
           f" function, input_signature, hostname FROM compile_records WHERE {where} AND run_id = :run ORDER BY id")
    return [dict(r) for r in conn.execute(sa.text(sql), {**params, "run": run_id}).mappings()]


def _program(command: str, run: str, rows: list[dict], saved: dict[int, savings.Saved]) -> Program:
    by_name: dict[str, FunctionLine] = {}
    for r in rows:
        fn = by_name.setdefault(r["function"], FunctionLine(r["function"]))
        fn.eager = fn.eager or r["function_kind"] == FUNCTION_KIND_EAGER
        fn.compiles += 1
        fn.signatures.add(r["input_signature"])
        fn.compile_s += r["compile_s"]
        fn.trace_s += r["trace_s"] or 0.0
        site = r["call_site"]
        fn.call_sites[site] = fn.call_sites.get(site, 0.0) + r["compile_s"] + (r["trace_s"] or 0.0)
        if r["cache_state"] == WARM:
            fn.warm += 1
            s = saved[r["id"]]
            fn.removed_s += s.seconds
            fn.unknown += s.unknown
    fns = sorted(by_name.values(), key=lambda f: (-f.compile_s, f.function))
    return Program(command, run, rows[-1]["timestamp"], rows[-1]["hostname"], fns)


def programs(conn, filters: dict | None = None, costs_of=savings.cold_costs) -> list[Program]:
    """Each recorded command's newest run, its functions by total compile time (tracing,
    lowering and XLA), its time and what the cache removed (`ledger runs`' line;
    ``costs_of``: savings.of_rows')."""
    from ledger.report.runs import list_runs_of, saved_rows

    where, params = _where(filters)
    out = []
    newest = _newest_runs(conn, where, params)
    warm = saved_rows(conn, list(newest.values()), costs_of)  # one read of their cells' cold rows, for runs and functions
    runs = {r.run_id: r for r in list_runs_of(conn, list(newest.values()), warm)}
    saved = {r["id"]: s for r, s in warm}
    for command, run in newest.items():
        out.append(_program(command, run, _run_rows(conn, where, params, run), saved))
        out[-1].run = runs.get(run)
    return sorted(out, key=lambda p: p.command)


def build(engine, filters: dict | None = None, costs_of=savings.cold_costs) -> list[Program]:
    with engine.connect() as conn:
        return programs(conn, filters, costs_of)

