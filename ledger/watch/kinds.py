"""The kinds of verdict `ledger check` gives, each defined once: its name, whether it
fails the check, how the report ranks and marks it, and the line people read.

check.py (the counts, the exit status, the lines, the JSON), the report (ledger/report/
lines.py: which finding a key shows first, which rows a chart marks) and findings.py
(the cache passes that produce them) and health.py (the cache's health) all take the
kinds from here. A new kind is one `Kind(...)` in KINDS and, for a cache finding, its
pass in findings.PASSES, or for a health finding its judge in health.py
(docs/layout.md, "a new finding kind").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ledger.rows import describe_key

OK, REGRESSION, INCONCLUSIVE = "ok", "regression", "inconclusive"
WENT_COLD, CACHE_OFF, CACHE_NOT_REUSED, JAX_CHANGED = "went-cold", "cache-off", "cache-not-reused", "jax-changed"
# the cache's health (ledger/watch/health.py)
CACHE_NOT_WRITTEN, BELOW_THRESHOLD, EVICTED = "cache-not-written", "below-threshold", "evicted"
RECOMPILED = "recompiled"  # one process compiled a function at one signature again (recompiled.py)
PINNED_KINDS = (OK, REGRESSION, INCONCLUSIVE)  # a warm row against its pin (check.py's SQL)
HEALTH_KINDS = (CACHE_NOT_WRITTEN, BELOW_THRESHOLD, EVICTED, RECOMPILED)  # about a run or an entry (health.py)
# every other kind is a cell's, found by a cache pass (judge.PASSES)


@dataclass(frozen=True)
class Kind:
    name: str
    severity: int  # the report shows a key's worst finding first: higher is worse
    fails: bool  # fails the check; a finding may say otherwise (cache-not-reused by its cause)
    marked: bool  # the report's charts mark its rows
    always_counted: bool  # check's summary names it even when there is none
    line: Callable[[dict, str], str]  # the line for one finding (a verdict row), given its head


def _head(f: dict) -> str:
    """A finding's head: its kind and what it is about, the cell (host and cell), or for a
    finding about a run (health.py's) the program and the run."""
    facts = f.get("facts") or {}
    if f["verdict"] in HEALTH_KINDS and facts.get("program") is not None:
        run = f" run {facts['run'][:12]}" if facts.get("run") else ""
        return f"{f['verdict']:<13} {program_text(facts['program'])}{run}"
    return f"{f['verdict']:<13} {describe_key(f)}"


PROGRAM_WIDTH = 100


def program_text(program: str | None) -> str:
    """A program (a recorded command line, or `objective NAME`) as a line shows it: in
    backticks, its middle elided past PROGRAM_WIDTH characters (the whole in --json)."""
    if program is None:
        return "(no program)"
    if len(program) > PROGRAM_WIDTH:
        half = PROGRAM_WIDTH // 2 - 1
        program = f"{program[:half]}…{program[-half:]}"
    return f"`{program}`"


def _g(x, spec: str = ".4g") -> str:
    """A stored number as a line shows it; one a verdict does not hold (a hand-written or
    older verdict) reads '?', never a failed format."""
    return "?" if x is None else format(x, spec)


def _versus(f: dict) -> str:
    return f"row {f['row_id']} compile_s {_g(f['compile_s'])}s vs pin {_g(f['pin_compile_s'])}s (pin {f['pin_id']})"


def _regression(f: dict, head: str) -> str:
    from ledger.watch.history import HISTORY, rule_text

    if f.get("rule") == HISTORY:
        return f"{head}: row {f['row_id']} compile_s {f['compile_s']:.4g}s > {rule_text(f)} (pin {f['pin_id']})"
    return f"{head}: {_versus(f)} = {_ratio(f)} > {_g(f['tolerance'], 'g')}x"


def _ratio(f: dict) -> str:
    return f"{f['ratio']:.2f}x" if f["ratio"] is not None else "n/a"


def _not_judged(f: dict, head: str) -> str:
    return f"{head}: {_versus(f)} = {_ratio(f)}, not judged: {f['cause']}"


def _cache_off(f: dict, head: str) -> str:
    against = f" = {f['ratio']:.3g}x pin {f['pin_compile_s']:.3g}s (pin {f['pin_id']})" if f["ratio"] is not None else ""
    return f"{head}: row {f['row_id']} compiled with no cache dir, {f['compile_s']:.3g}s{against}: {f['cause']}"


def _said(f: dict, head: str) -> str:
    return f"{head}: row {f['row_id']}: {f['cause']}" + ("" if f["fails"] else " [does not fail]")


# In the order check counts and lists them.
KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind(OK, 1, False, False, True, _not_judged),
    Kind(REGRESSION, 3, True, True, True, _regression),
    Kind(INCONCLUSIVE, 2, False, False, True, _not_judged),
    Kind(WENT_COLD, 5, True, True, True,
         lambda f, head: f"{head}, cache dir {f['cache_dir']}: row {f['row_id']} is cold: {f['cause']}"),
    Kind(CACHE_OFF, 6, True, True, False, _cache_off),
    Kind(CACHE_NOT_REUSED, 4, False, True, False, _said),
    Kind(JAX_CHANGED, 2, False, False, False, _said),
    Kind(CACHE_NOT_WRITTEN, 5, True, True, False, _said),
    Kind(EVICTED, 5, True, True, False, _said),
    Kind(BELOW_THRESHOLD, 2, False, False, False, _said),
    Kind(RECOMPILED, 2, False, False, False, _said),
)}


def failing() -> tuple[str, ...]:
    return tuple(k.name for k in KINDS.values() if k.fails)


def marked() -> tuple[str, ...]:
    return tuple(k.name for k in KINDS.values() if k.marked)


def severity_sql(column: str = "v.verdict") -> str:
    """The kinds' severity as SQL over a verdict column (an unknown name ranks lowest)."""
    return f"CASE {column} " + " ".join(f"WHEN '{k.name}' THEN {k.severity}" for k in KINDS.values()) + " ELSE 0 END"


def order_sql(column: str = "v.verdict") -> str:
    """The kinds' order (KINDS) as SQL, for listing findings."""
    return f"CASE {column} " + " ".join(f"WHEN '{name}' THEN {i}" for i, name in enumerate(KINDS)) + " END"


def finding_line(f: dict) -> str:
    """One line per finding, for people; --json gives CI the same fields."""
    return KINDS[f["verdict"]].line(f, _head(f))
