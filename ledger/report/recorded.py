"""Where a recorded program's compile time goes: its functions by total compile time in
its newest recorded run, and the part of it the cache removed.

A recorded program is a command `ledger record` ran (compile_records.command). For its
newest run, each function's compiles are summed; a warm compile removed what its own
cell's cold compile cost (the newest cold row of the same function and input signature
on the same host and jax, before it) less what the warm one still took. Only within
one host key, as everywhere in the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa

from ledger.record import COLD, FUNCTION_KIND_EAGER, RECORDED_TRANSFORM, STATUS_OK, WARM

_SAME_CELL = ("function", "input_signature", "hardware", "hostname", "jax_version", "cache_dir")


@dataclass
class FunctionLine:
    function: str
    compiles: int = 0
    signatures: set = field(default_factory=set)
    compile_s: float = 0.0
    warm: int = 0
    removed_s: float = 0.0  # cold cost of its warm compiles, less what they took
    unknown: int = 0  # warm compiles with no cold row of their cell before them
    eager: bool = False  # JAX compiling an op run outside jit, not the program's own function

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
    """Each recorded command's newest run (the run of its newest row)."""
    sql = (f"SELECT command, run_id FROM compile_records WHERE id IN"
           f" (SELECT MAX(id) FROM compile_records WHERE {where} GROUP BY command)")
    return {r["command"]: r["run_id"] for r in conn.execute(sa.text(sql), params).mappings()}


def _run_rows(conn, where: str, params: dict, run_id: str) -> list[dict]:
    sql = (f"SELECT id, command, run_id, timestamp, cache_state, compile_s, function_kind, {', '.join(_SAME_CELL)}"
           f" FROM compile_records WHERE {where} AND run_id = :run ORDER BY id")
    return [dict(r) for r in conn.execute(sa.text(sql), {**params, "run": run_id}).mappings()]


def _cold_before(conn, where: str, params: dict, first_id: int) -> dict[tuple, float]:
    """Each cell's newest cold compile written before the run began (its first row)."""
    cells = ", ".join(_SAME_CELL)
    sql = (f"SELECT {cells}, compile_s FROM (SELECT {cells}, compile_s,"
           f" ROW_NUMBER() OVER (PARTITION BY {cells} ORDER BY id DESC) AS rn FROM compile_records"
           f" WHERE {where} AND cache_state = '{COLD}' AND id < :first) newest WHERE rn = 1")
    return {tuple(r[f] for f in _SAME_CELL): r["compile_s"]
            for r in conn.execute(sa.text(sql), {**params, "first": first_id}).mappings()}


def _program(command: str, run: str, rows: list[dict], cold_before: dict[tuple, float]) -> Program:
    by_name: dict[str, FunctionLine] = {}
    for r in rows:  # in id order: a cold row of the run is known before its warm rows after it
        cell = tuple(r[f] for f in _SAME_CELL)
        fn = by_name.setdefault(r["function"], FunctionLine(r["function"]))
        fn.eager = fn.eager or r["function_kind"] == FUNCTION_KIND_EAGER
        fn.compiles += 1
        fn.signatures.add(r["input_signature"])
        fn.compile_s += r["compile_s"]
        if r["cache_state"] == WARM:
            fn.warm += 1
            if cell in cold_before:
                fn.removed_s += max(cold_before[cell] - r["compile_s"], 0.0)
            else:
                fn.unknown += 1
        if r["cache_state"] == COLD:
            cold_before[cell] = r["compile_s"]
    fns = sorted(by_name.values(), key=lambda f: (-f.compile_s, f.function))
    return Program(command, run, rows[-1]["timestamp"], rows[-1]["hostname"], fns)


def programs(conn, filters: dict | None = None) -> list[Program]:
    """Each recorded command's newest run, its functions by total compile time. Reads
    that run's rows and, per cell, the newest cold row before it: not the whole ledger
    (a cold row another run wrote while this one ran is not its comparison)."""
    where, params = _where(filters)
    out = []
    for command, run in _newest_runs(conn, where, params).items():
        rows = _run_rows(conn, where, params, run)
        out.append(_program(command, run, rows, _cold_before(conn, where, params, rows[0]["id"])))
    return sorted(out, key=lambda p: p.command)


def build(engine, filters: dict | None = None) -> list[Program]:
    with engine.connect() as conn:
        return programs(conn, filters)
