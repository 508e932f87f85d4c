"""`ledger diff RUN_A RUN_B`: what changed between two runs, function by function.

A function is (transform, function, input_signature): a recorded program's function at
one signature, or a probe's transform. Each run is read at the function's first compile
in it (what the persistent cache decided for that run; a later compile of the same
function in the same run is a second process or the warm phase of --cold-warm). Slower
and faster are judged as `ledger check` judges a regression against its pin when no
history is known: over TOLERANCE times and more than MIN_DIFF seconds apart. A went-cold
function's cause is what differs between its two rows (ledger/watch/judge.py, as
`ledger explain` names it), or explain's own answer where the runs used two cache dirs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa

from ledger.errors import LedgerError
from ledger.record import COLD, WARM
from ledger.rows import ok_sql, time_sql
from ledger.watch.check import MIN_DIFF, TOLERANCE

NEW, GONE, WENT_COLD, WENT_WARM, SLOWER, FASTER, SAME = (
    "new", "gone", "went-cold", "went-warm", "slower", "faster", "same")
CHANGES = (WENT_COLD, SLOWER, NEW, GONE, WENT_WARM, FASTER, SAME)  # the order lines are shown in
FAILS = (WENT_COLD, SLOWER)
NAME = ("transform", "function", "input_signature")


class DiffUsageError(LedgerError):
    """An unknown run, or not two runs to compare: a usage error, exit 2 (1 says something went cold)."""

    exit_code = 2


@dataclass
class Diff:
    a: str
    b: str
    functions: list[dict] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if any(f["change"] in FAILS for f in self.functions) else 0

    def counts(self) -> dict[str, int]:
        return {c: sum(f["change"] == c for f in self.functions) for c in CHANGES}

    def as_json(self) -> dict:
        return {"a": self.a, "b": self.b, "exit_code": self.exit_code, "counts": self.counts(),
                "functions": [{k: f[k] for k in (*NAME, "a", "b", "change", "cause")} for f in self.functions]}


def _first_compiles(conn, run_id: str) -> dict[tuple, dict]:
    sql = (f"SELECT id, {', '.join(NAME)}, cache_state, compile_s FROM compile_records"
           f" WHERE run_id = :run AND {ok_sql()} ORDER BY {time_sql()}, id")
    out: dict[tuple, dict] = {}
    for r in conn.execute(sa.text(sql), {"run": run_id}).mappings():
        out.setdefault(tuple(r[k] for k in NAME), dict(r))
    if not out:
        raise DiffUsageError(f"no run {run_id!r} in this ledger (`ledger runs` lists them)")
    return out


def change_of(a: dict | None, b: dict | None) -> str:
    if a is None or b is None:
        return NEW if a is None else GONE
    if a["cache_state"] == WARM and b["cache_state"] == COLD:
        return WENT_COLD
    if a["cache_state"] == COLD and b["cache_state"] == WARM:
        return WENT_WARM
    x, y = a["compile_s"], b["compile_s"]
    if x is None or y is None:
        return SAME
    if y > x * TOLERANCE and y - x > MIN_DIFF:
        return SLOWER
    if x > y * TOLERANCE and x - y > MIN_DIFF:
        return FASTER
    return SAME


def _causes(engine, pairs: list[tuple[int, int]]) -> dict[int, str]:
    """Each went-cold row's cause, as `ledger explain` and `ledger check` name it: one
    judgement (ledger/watch/judge.py), prunes and evictions included."""
    from ledger.watch.causes import UNKNOWN_CAUSE, fetch_rows
    from ledger.watch.explain import explain

    with engine.connect() as conn:
        rows = fetch_rows(conn, [cold_id for _, cold_id in pairs])
        return {cold_id: explain(conn, rows[cold_id]).cause or UNKNOWN_CAUSE for _, cold_id in pairs}


def _shown(r: dict | None) -> dict | None:
    return None if r is None else {"cache_state": r["cache_state"], "compile_s": r["compile_s"], "row_id": r["id"]}


def diff_runs(engine, a: str, b: str) -> Diff:
    with engine.connect() as conn:
        first, second = _first_compiles(conn, a), _first_compiles(conn, b)
    out = Diff(a, b)
    names = sorted(first.keys() | second.keys(), key=lambda k: tuple("" if v is None else str(v) for v in k))
    changes = {name: change_of(first.get(name), second.get(name)) for name in names}
    causes = _causes(engine, [(first[n]["id"], second[n]["id"]) for n in names if changes[n] == WENT_COLD])
    for name in names:
        x, y = first.get(name), second.get(name)
        out.functions.append({**dict(zip(NAME, name)), "a": _shown(x), "b": _shown(y), "change": changes[name],
                              "cause": causes.get(y["id"]) if changes[name] == WENT_COLD else None})
    out.functions.sort(key=lambda f: CHANGES.index(f["change"]))
    return out


def last_two(engine) -> tuple[str, str]:
    """The newest run and the run before it of the same command (recorded) or objective."""
    t = time_sql()
    sql = (f"SELECT run_id, MIN(command) AS command, MIN(objective) AS objective, MIN({t}) AS started"
           f" FROM compile_records WHERE run_id IS NOT NULL AND {ok_sql()}"
           " GROUP BY run_id ORDER BY started DESC, MAX(id) DESC")
    with engine.connect() as conn:
        runs = [dict(r) for r in conn.execute(sa.text(sql)).mappings()]
    if not runs:
        raise DiffUsageError("no runs in this ledger: nothing to compare (`ledger probe` or `ledger record` make runs)")
    newest = runs[0]
    same = [r for r in runs[1:] if (r["command"], r["objective"]) == (newest["command"], newest["objective"])]
    if not same:
        what = newest["command"] or f"objective {newest['objective']}"
        raise DiffUsageError(f"run {newest['run_id']} is the only run of {what}: give two run ids (`ledger runs`)")
    return same[0]["run_id"], newest["run_id"]


def line(f: dict) -> str:
    """One function, for people."""
    name = f["function"] or f["transform"]
    if f["input_signature"]:
        name += f"({f['input_signature']})"
    side = [("-" if s is None else f"{s['cache_state']} {s['compile_s']:.3f} s" if s["compile_s"] is not None
             else s["cache_state"]) for s in (f["a"], f["b"])]
    text = f"{f['change']:<9} {name}: {side[0]} -> {side[1]}"
    return text + (f": {f['cause']}" if f["cause"] else "")
