"""`ledger diff` of two pytest sessions, test by test; and `pytest --ledger-check`'s line.

A layer over ledger/report/diff.py: the same names of a function (diff.NAME), the same
judgement of one compile against another (diff.change_of: went-cold, slower against
noise, ...), the same causes and the same way to pick the last two runs. What it adds is
the unit: a test's call, or a fixture's setup or teardown of it (test_id, test_phase),
and in each, per function, how many compiles: a test that compiles a function more
times than before (`more-compiles`: a new function, a new signature) or the same
function at the same signature again in one process (`recompiled`: a fresh jax.jit per
call, a static argument gone dynamic) is named, with the signature and, where the
ledger has it, the call site of what is new.

The counts are compared by pure functions over plain dicts ({function: Counter of
signatures}, or {function: count} for a pin), so `pytest --ledger-check` judges a test
against its pin with the very words `ledger diff` prints.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import sqlalchemy as sa

from ledger.record import PHASE_CALL, PHASE_COLLECT
from ledger.report.diff import FASTER, NAME, SLOWER, WENT_COLD, WENT_WARM, DiffUsageError, change_of
from ledger.report.diff import line as function_line
from ledger.rows import ok_sql, time_sql

RECOMPILED, MORE, FEWER = "recompiled", "more-compiles", "fewer-compiles"
CHANGES = (RECOMPILED, MORE, WENT_COLD, SLOWER, FEWER, WENT_WARM, FASTER)  # the order lines are shown in
FAILS = (RECOMPILED, MORE, WENT_COLD, SLOWER)
SECONDS_CHANGES = (WENT_COLD, SLOWER, WENT_WARM, FASTER)
# where a compile was called from, once the ledger keeps it (a column of its own)
SITE = ("call_site",)


@dataclass
class Compiled:
    """One function's compiles in one unit (a test's call, setup or teardown; a module's
    collection), counted per process: each pytest-xdist worker imports every module, and
    a unit is compared by what one process compiled in it."""

    per_process: Counter = field(default_factory=Counter)  # (pid, signature) -> compiles
    first: dict = field(default_factory=dict)  # signature -> its first row
    sites: dict = field(default_factory=dict)  # signature -> the call site of its first compile

    @property
    def signatures(self) -> Counter:
        """signature -> compiles, in the process that compiled it most."""
        out: Counter = Counter()
        for (_, sig), n in self.per_process.items():
            out[sig] = max(out[sig], n)
        return out

    @property
    def compiles(self) -> int:
        per_pid: Counter = Counter()
        for (pid, _), n in self.per_process.items():
            per_pid[pid] += n
        return max(per_pid.values(), default=0)

    def add(self, signature: str | None, pid, first: dict | None = None, site: str | None = None) -> None:
        self.per_process[(pid, signature)] += 1
        if signature not in self.sites:  # its first compile
            self.sites[signature] = site
            if first is not None:
                self.first[signature] = first


def compiled_by_function(compiles) -> dict[str, Compiled]:
    """{function: Compiled} of one unit's compiles in one process, in hand (the pytest
    plugin's tally: objects with function and input_signature)."""
    out: dict[str, Compiled] = {}
    for c in compiles:
        out.setdefault(c.function or "?", Compiled()).add(c.input_signature, 0, site=c.call_site)
    return out


Units = dict  # (test_id, test_phase) -> {function: Compiled}


def session_compiles(conn, run_id: str) -> Units:
    """A session's compiles by test and phase, then function: its rows read once."""
    cols = ", ".join(("id", *NAME, "test_id", "test_phase", "pid", "cache_state", "compile_s", *SITE))
    sql = (f"SELECT {cols} FROM compile_records WHERE run_id = :run AND test_id IS NOT NULL AND {ok_sql()}"
           f" ORDER BY {time_sql()}, id")
    units: Units = {}
    for r in conn.execute(sa.text(sql), {"run": run_id}).mappings():
        unit = units.setdefault((r["test_id"], r["test_phase"]), {})
        unit.setdefault(r["function"] or r["transform"], Compiled()).add(r["input_signature"], r["pid"], dict(r),
                                                                          r.get("call_site"))
    return units


def is_session(conn, run_id: str) -> bool:
    """Whether the run is a pytest session (its rows name tests)."""
    sql = "SELECT 1 FROM compile_records WHERE run_id = :run AND test_id IS NOT NULL LIMIT 1"
    return conn.execute(sa.text(sql), {"run": run_id}).first() is not None


def _signatures(x) -> Counter | None:
    return x.signatures if isinstance(x, Compiled) else None


def _count(x) -> int:
    return x.compiles if isinstance(x, Compiled) else int(x or 0)


def count_change(function: str, a, b) -> dict | None:
    """How ``function``'s compiles in one unit changed from ``a`` to ``b``, each a
    Compiled, a count (a pin) or None (not compiled there); None if the count held."""
    n_a, n_b = _count(a), _count(b)
    if n_a == n_b:
        return None
    out = {"function": function, "a": n_a, "b": n_b, "change": FEWER if n_b < n_a else MORE,
           "detail": None, "call_site": None}
    if n_b < n_a or not isinstance(b, Compiled):
        return out
    before, after = _signatures(a) or Counter(), b.signatures
    again = [(sig, n) for sig, n in after.most_common() if n > 1 and n > before[sig]]
    # against a pin (a count, no signatures) only a new function's signatures are new
    new = [sig for sig in after if sig not in before] if isinstance(a, Compiled) or not n_a else []
    if again:
        sig, n = again[0]
        out.update(change=RECOMPILED, detail=f"{sig or '?'} compiled {n} times in one process")
    elif not n_a:
        out["detail"] = "new function: " + ", ".join(s or "?" for s in new)
    elif new:
        out["detail"] = "new signature " + ", ".join(s or "?" for s in new)
    pick = (again[0][0] if again else new[0] if new else None)
    out["call_site"] = b.sites.get(pick) if pick in b.sites else None
    return out


def unit_changes(test_id: str, phase: str | None, a: dict | None, b: dict | None) -> list[dict]:
    """Every count change in one unit, ``a`` and ``b`` each {function: Compiled or count}."""
    a, b = a or {}, b or {}
    out = []
    for function in sorted(a.keys() | b.keys()):
        found = count_change(function, a.get(function), b.get(function))
        if found is not None:
            out.append({"test_id": test_id, "test_phase": phase, **found})
    return out


def _seconds_changes(test_id: str, phase: str, a: dict, b: dict) -> list[dict]:
    out = []
    for function in sorted(a.keys() & b.keys()):
        x, y = a[function], b[function]
        for sig in sorted(x.first.keys() & y.first.keys(), key=lambda s: s or ""):
            change = change_of(x.first[sig], y.first[sig])
            if change in SECONDS_CHANGES:
                out.append({"test_id": test_id, "test_phase": phase, "function": function, "change": change,
                            "input_signature": sig, "transform": x.first[sig]["transform"],
                            "a": _shown(x.first[sig]), "b": _shown(y.first[sig]), "cause": None})
    return out


def _shown(r: dict) -> dict:
    return {"cache_state": r["cache_state"], "compile_s": r["compile_s"], "row_id": r["id"]}


@dataclass
class TestDiff:
    a: str
    b: str
    findings: list[dict] = field(default_factory=list)
    tests: dict = field(default_factory=dict)  # same, new, gone: how many tests of each

    @property
    def exit_code(self) -> int:
        return 1 if any(f["change"] in FAILS for f in self.findings) else 0

    def counts(self) -> dict[str, int]:
        return {c: sum(f["change"] == c for f in self.findings) for c in CHANGES}

    def as_json(self) -> dict:
        return {"a": self.a, "b": self.b, "exit_code": self.exit_code, "tests": self.tests,
                "counts": self.counts(), "findings": self.findings}

    def summary(self) -> str:
        counts = ", ".join(f"{n} {c}" for c, n in self.counts().items() if n) or "no change"
        t = self.tests
        return (f"session {self.a} -> session {self.b}: {t['same'] + t['new']} tests ({t['new']} new,"
                f" {t['gone']} gone): {counts}")


def diff_sessions(engine, a: str, b: str) -> TestDiff:
    from ledger.report.diff import _causes

    with engine.connect() as conn:
        first, second = session_compiles(conn, a), session_compiles(conn, b)
    if not first or not second:
        raise DiffUsageError(f"run {a if not first else b} is no pytest session: `ledger diff` compares it function"
                             " by function only with a run of the same kind")
    out = TestDiff(a, b)
    for unit in sorted(first.keys() | second.keys(), key=lambda u: (u[0], u[1] or "")):
        x, y = first.get(unit), second.get(unit)
        out.findings += unit_changes(*unit, x, y)
        if x and y:
            out.findings += _seconds_changes(*unit, x, y)
    tests_a, tests_b = ({t for t, phase in units if phase != PHASE_COLLECT} for units in (first, second))
    out.tests = {"same": len(tests_a & tests_b), "new": len(tests_b - tests_a), "gone": len(tests_a - tests_b)}
    cold = [f for f in out.findings if f["change"] == WENT_COLD]
    causes = _causes(engine, [(f["a"]["row_id"], f["b"]["row_id"]) for f in cold])
    for f in cold:
        f["cause"] = causes.get(f["b"]["row_id"])
    out.findings.sort(key=lambda f: (CHANGES.index(f["change"]), f["test_id"], f["test_phase"] or ""))
    return out


def unit_name(f: dict) -> str:
    """A test as people read it: its node id, and the fixture's part when not its call."""
    phase = f.get("test_phase")
    return f["test_id"] + (f" ({phase})" if phase and phase != PHASE_CALL else "")


def line(f: dict) -> str:
    """One finding, for people: `recompiled t.py::test_step: jit_step 1 -> 5 compiles: ...`."""
    if f["change"] in SECONDS_CHANGES:
        return f"{f['change']:<14} {unit_name(f)}: {function_line(f).split(None, 1)[1]}"
    text = f"{f['change']:<14} {unit_name(f)}: {f['function']} {f['a']} -> {f['b']} compiles"
    if f.get("detail"):
        text += f": {f['detail']}"
    return text + (f" (at {f['call_site']})" if f.get("call_site") else "")
