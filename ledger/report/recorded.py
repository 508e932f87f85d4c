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


def _rows(conn, filters: dict | None) -> list[dict]:
    where = ["transform = :t", "status = :ok", "function IS NOT NULL", "command IS NOT NULL",
             "compile_s IS NOT NULL"]
    params = {"t": RECORDED_TRANSFORM, "ok": STATUS_OK}
    for name in ("model_type", "hostname"):
        if (filters or {}).get(name) is not None:
            where.append(f"{name} = :{name}")
            params[name] = filters[name]
    sql = (f"SELECT id, command, run_id, timestamp, cache_state, compile_s, function_kind, {', '.join(_SAME_CELL)}"
           f" FROM compile_records WHERE {' AND '.join(where)} ORDER BY id")
    return [dict(r) for r in conn.execute(sa.text(sql), params).mappings()]


def programs(conn, filters: dict | None = None) -> list[Program]:
    """Each recorded command's newest run, its functions by total compile time."""
    rows = _rows(conn, filters)
    newest: dict[str, str] = {}  # command -> run_id of its newest row
    for r in rows:
        newest[r["command"]] = r["run_id"]
    cold_before: dict[tuple, float] = {}
    out = []
    by_run: dict[str, dict[str, FunctionLine]] = {run: {} for run in newest.values()}
    for r in rows:  # in id order: a cold row is known before the warm rows after it
        cell = tuple(r[f] for f in _SAME_CELL)
        if r["run_id"] in by_run:
            fn = by_run[r["run_id"]].setdefault(r["function"], FunctionLine(r["function"]))
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
    for command, run in newest.items():
        last = max((r for r in rows if r["run_id"] == run), key=lambda r: r["id"])
        fns = sorted(by_run[run].values(), key=lambda f: (-f.compile_s, f.function))
        out.append(Program(command, run, last["timestamp"], last["hostname"], fns))
    return sorted(out, key=lambda p: p.command)


def build(engine, filters: dict | None = None) -> list[Program]:
    with engine.connect() as conn:
        return programs(conn, filters)
