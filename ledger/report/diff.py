"""`ledger diff RUN_A RUN_B`: what changed between two runs, function by function.

A function is (transform, function, input_signature, variant): a recorded program's
function at one signature, or a probe's transform. Each run is read at the function's first
compile in it (what the persistent cache decided for that run; a later compile of the same
function in the same run is a second process or the warm phase of --cold-warm). Slower and
faster are judged against noise: warm against warm or cold against cold, on hosts that
were not loaded, beyond the spread of the function's own history where it has one (as a
pin's history judges a regression: ledger/watch/history.py), else over TOLERANCE times and
more than MIN_DIFF seconds apart; what the raw numbers call slower but noise explains is
"same (noise)". A went-cold function's cause is `ledger explain`'s (ledger/watch/judge.py:
one judgement for every command). A run is named by its id or the start of it (the 12
characters `ledger record` prints).
What the cache saved each run, and each function's warm compile, is ledger/savings.py's.
A function one process of a run compiled more than once says so on its line (check's
recompiled, ledger/watch/recompiled.py), with its count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa

from ledger import savings
from ledger.errors import LedgerError
from ledger.record import COLD, WARM
from ledger.rows import before_sql, function_name, newest_first, ok_sql, time_sql
from ledger.watch.check import MIN_DIFF, TOLERANCE
from ledger.watch.history import WINDOW, stats
from ledger.watch.keys import loaded_sql

NEW, GONE, WENT_COLD, WENT_WARM, SLOWER, FASTER, SAME = (
    "new", "gone", "went-cold", "went-warm", "slower", "faster", "same")
CHANGES = (WENT_COLD, SLOWER, NEW, GONE, WENT_WARM, FASTER, SAME)  # the order lines are shown in
FAILS = (WENT_COLD, SLOWER)
NAME = ("transform", "function", "input_signature", "variant")
NOISE = "noise"  # a same whose raw numbers said slower or faster: within its spread, or a loaded host


class DiffUsageError(LedgerError):
    """An unknown run, or not two runs to compare: a usage error, exit 2 (1 says something went cold)."""

    exit_code = 2


@dataclass
class Diff:
    a: str
    b: str
    functions: list[dict] = field(default_factory=list)
    saved: dict[str, savings.Saved] = field(default_factory=dict)  # by run id

    @property
    def exit_code(self) -> int:
        return 1 if any(f["change"] in FAILS for f in self.functions) else 0

    def counts(self) -> dict[str, int]:
        return {c: sum(f["change"] == c for f in self.functions) for c in CHANGES}

    def as_json(self) -> dict:
        return {"a": self.a, "b": self.b, "exit_code": self.exit_code, "counts": self.counts(),
                "saved": {side: self.saved.get(run, savings.Saved()).as_dict()
                          for side, run in (("a", self.a), ("b", self.b))},
                "functions": [{k: f[k] for k in (*NAME, "a", "b", "change", "note", "cause")} for f in self.functions]}

    def saved_words(self) -> str:
        a, b = (self.saved.get(run, savings.Saved()) for run in (self.a, self.b))
        return f"the cache saved {savings.words(a)}, then {savings.words(b)}"



def resolve_run(conn, given: str) -> str:
    """A run id as given, or the one run whose id starts with it (the 12 characters
    `ledger record` prints); an unknown or ambiguous one is a usage error."""
    found = conn.execute(sa.text("SELECT 1 FROM compile_records WHERE run_id = :run LIMIT 1"), {"run": given}).first()
    if found is not None:
        return given
    like = given.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    runs = [r[0] for r in conn.execute(sa.text("SELECT DISTINCT run_id FROM compile_records WHERE run_id LIKE :p"
                                               " ESCAPE '\\' LIMIT 2"), {"p": like})]
    if len(runs) == 1:
        return runs[0]
    shown = given if len(given) <= 40 else given[:37] + "..."
    if runs:
        raise DiffUsageError(f"{shown!r} starts more than one run id: give more of it (`ledger runs` lists them)")
    raise DiffUsageError(f"no run {shown!r} in this ledger (`ledger runs` lists them)")


# What a function's first compile in a run is read as: its name, state, seconds, and what
# says whether its host was loaded and which comparability key its history is.
_READ = ("id", *NAME, "cache_state", "compile_s", "timestamp", "host_load_avg_1m", "host_cpu_count",
         "host_cpu_affinity", "pid")


def _first_compiles(conn, run_id: str) -> dict[tuple, dict]:
    sql = (f"SELECT {', '.join(_READ)}, {loaded_sql()} AS loaded FROM compile_records"
           f" WHERE run_id = :run AND {ok_sql()} ORDER BY {time_sql()}, id")
    out: dict[tuple, dict] = {}
    per_process: dict[tuple, int] = {}  # (function less its variant, pid): compiles (recompiled.py's key)
    for r in conn.execute(sa.text(sql), {"run": run_id}).mappings():
        key = tuple(r[k] for k in NAME)
        if key not in out:
            out[key] = {**r, "loaded": bool(r["loaded"])}
        if r["function"] is not None and r["pid"] is not None:
            per_process[key[:-1], r["pid"]] = per_process.get((key[:-1], r["pid"]), 0) + 1
    if not out:
        raise DiffUsageError(f"no run {run_id!r} in this ledger (`ledger runs` lists them)")
    for key, r in out.items():  # the most compiles of the function by one process of the run
        r["times"] = max((n for (name, _), n in per_process.items() if name == key[:-1]), default=1)
    return out


def change_of(a: dict | None, b: dict | None, history: list[float] | None = None) -> str:
    """How a function changed from run a to run b. Slower and faster are said of warm
    against warm or cold against cold on hosts that were not loaded, beyond the spread of
    the function's own history where it has one (history.MIN_HISTORY compiles of its key,
    unloaded), else beyond the fixed tolerance; anything else is the same."""
    return _change(a, b, history)[0]


def _change(a, b, history) -> tuple[str, str | None]:
    if a is None or b is None:
        return (NEW if a is None else GONE), None
    if a["cache_state"] == WARM and b["cache_state"] == COLD:
        return WENT_COLD, None
    if a["cache_state"] == COLD and b["cache_state"] == WARM:
        return WENT_WARM, None
    x, y = a["compile_s"], b["compile_s"]
    if x is None or y is None or a["cache_state"] != b["cache_state"]:
        return SAME, None
    raw = SLOWER if y > x * TOLERANCE and y - x > MIN_DIFF else FASTER if x > y * TOLERANCE and x - y > MIN_DIFF \
        else SAME
    if raw == SAME:
        return SAME, None
    if a.get("loaded") or b.get("loaded"):
        return SAME, NOISE
    found = stats(history or [])
    if found["threshold_s"] is not None:
        spread = found["threshold_s"] - found["history_median_s"]
        beyond = y - x > max(spread, MIN_DIFF) if raw == SLOWER else x - y > max(spread, MIN_DIFF)
        if not beyond:
            return SAME, NOISE
    return raw, None


def _histories(conn, run_b: str, names: list[tuple]) -> dict[tuple, list[float]]:
    """Each named function's history in run b's key: its compiles of b's state before b,
    on hosts that were not loaded, the newest WINDOW."""
    from ledger.record import COMPARABILITY_KEY
    from ledger.watch.keys import same_as_sql

    out: dict[tuple, list[float]] = {}
    d = conn.dialect.name
    for name in names:
        row = conn.execute(sa.text(f"SELECT * FROM compile_records WHERE run_id = :run AND {ok_sql()} AND"
                                   f" {same_as_sql(NAME, d)} ORDER BY {time_sql()}, id LIMIT 1"),
                           {"run": run_b, **dict(zip(NAME, name))}).mappings().first()
        sql = (f"SELECT compile_s FROM compile_records WHERE {ok_sql()} AND compile_s IS NOT NULL"
               f" AND NOT {loaded_sql()} AND {same_as_sql(COMPARABILITY_KEY, d)}"
               f" AND {before_sql('', ':ts', ':id')} ORDER BY {newest_first()} LIMIT {WINDOW}")
        params = {f: row[f] for f in COMPARABILITY_KEY} | {"ts": row["timestamp"] or "", "id": row["id"]}
        out[name] = [v for (v,) in conn.execute(sa.text(sql), params)]
    return out


def _causes(engine, pairs: list[tuple[int, int]]) -> dict[int, str]:
    """Each went-cold row's cause, as `ledger explain` and `ledger check` name it: one
    judgement (ledger/watch/judge.py), prunes and evictions included."""
    from ledger.watch.causes import UNKNOWN_CAUSE, fetch_rows
    from ledger.watch.explain import explain

    with engine.connect() as conn:
        rows = fetch_rows(conn, [cold_id for _, cold_id in pairs])
        return {cold_id: explain(conn, rows[cold_id]).cause or UNKNOWN_CAUSE for _, cold_id in pairs}


def _shown(r: dict | None, saved: dict[int, savings.Saved]) -> dict | None:
    if r is None:
        return None
    s = saved.get(r["id"])
    return {"cache_state": r["cache_state"], "compile_s": r["compile_s"], "row_id": r["id"],
            "saved_s": None if s is None else s.value, "times": r["times"]}


def _saved(engine, runs: tuple[str, str]) -> tuple[dict, dict]:
    """What each warm row of the two runs saved, by row id, and each run in all
    (ledger/savings.py): one read of the cells' cold rows for both."""
    from ledger.report.runs import saved_by_run, saved_rows

    with engine.connect() as conn:
        rows = saved_rows(conn, list(runs))
        return {r["id"]: s for r, s in rows}, saved_by_run(conn, list(runs), rows)


def diff_runs(engine, a: str, b: str) -> Diff:
    with engine.connect() as conn:
        a, b = resolve_run(conn, a), resolve_run(conn, b)
        first, second = _first_compiles(conn, a), _first_compiles(conn, b)
        names = sorted(first.keys() | second.keys(), key=lambda k: tuple("" if v is None else str(v) for v in k))
        raw = {name: _change(first.get(name), second.get(name), None) for name in names}
        judged = [n for n in names if raw[n][0] in (SLOWER, FASTER)]
        histories = _histories(conn, b, judged) if judged else {}
    changes = {n: _change(first.get(n), second.get(n), histories[n]) if n in histories else raw[n] for n in names}
    out = Diff(a, b)
    saved, out.saved = _saved(engine, (a, b))
    causes = _causes(engine, [(first[n]["id"], second[n]["id"]) for n in names if changes[n][0] == WENT_COLD])
    for name in names:
        x, y = first.get(name), second.get(name)
        change, note = changes[name]
        out.functions.append({**dict(zip(NAME, name)), "a": _shown(x, saved), "b": _shown(y, saved),
                              "change": change, "note": note,
                              "cause": causes.get(y["id"]) if change == WENT_COLD else None})
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
    from ledger.rows import fold_signature

    name = function_name(f["function"], f.get("variant")) if f["function"] else f["transform"]
    if f["input_signature"]:
        name += f"({fold_signature(f['input_signature'])})"
    side = [("-" if s is None else f"{s['cache_state']} {s['compile_s']:.3f} s" if s["compile_s"] is not None
             else s["cache_state"]) for s in (f["a"], f["b"])]
    change = f"{f['change']} ({f['note']})" if f.get("note") else f["change"]
    text = f"{change:<9} {name}: {side[0]} -> {side[1]}"
    return text + (f": {f['cause']}" if f["cause"] else "") + _recompiled(f["a"], f["b"])


def listed(f: dict) -> bool:
    """Whether diff lists a function without --all: it changed, or run b recompiled it."""
    return f["change"] != SAME or (f["b"] or {}).get("times", 1) > 1


def _recompiled(a: dict | None, b: dict | None) -> str:
    """A function one process of run b compiled more than once (check's recompiled), and
    how often in run a, where that differs."""
    times = (b or {}).get("times", 1)
    if times < 2:
        return ""
    before = (a or {}).get("times")
    was = f" (run a: {before})" if before is not None and before != times else ""
    return f"; recompiled: {times} compiles in one process{was}"
