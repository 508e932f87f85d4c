"""recompiled: one function at one input signature compiled more than once by one
process of a recorded run. JAX's in-memory cache should have served every call after
the first; each further compile is paid again (warm from the persistent cache or cold).

Why it happened shows in the cache keys and in what compiled: the same key each time is
the same program compiled again (a new `jax.jit` wrapper made per call, a jitted function
defined inside a loop); keys that differ are other programs of one name and signature
(a static argument or a closed-over value that changes). An op run outside jit (eager)
at one signature gets other keys from what the signature does not show: a Python
scalar, weakly typed, in one call and an array in another, or other op parameters. The
finding counts the compiles, their seconds and those past the first (what it costs a
run), says which it is, and names the call sites. It is about a run (the newest of each
program, as the other health findings, ledger/watch/health.py), and does not fail the check.
"""

from __future__ import annotations

from ledger.record import FUNCTION_KIND_EAGER, STATELESS_KEY, WARM
from ledger.watch.causes import C_RECOMPILED, Cause
from ledger.watch.judge import Finding, program_of
from ledger.watch.kinds import RECOMPILED

# One process's compiles of one function at one signature: its host key and cell, less the
# variant (a variant is another cache key: here that is what says why) and the cache state.
# Under `pytest --ledger` each test and phase is apart: compile_budget clears JAX's caches
# before a test's call, so a function every test uses compiles again in each, by design.
SAME = ("run_id", "pid", "test_id", "test_phase", *(f for f in STATELESS_KEY if f != "variant"))
COLUMNS = ("pid", "test_id", "test_phase", "call_site", "function_kind", "variant", *STATELESS_KEY)  # health.py reads
SITES = 3  # call sites named; the rest counted


def recompiled(rows: list[dict]) -> list[Finding]:
    """One run's rows (oldest first): a finding per function and signature that one of its
    processes compiled more than once."""
    by: dict[tuple, list[dict]] = {}
    for r in rows:
        if r.get("function") is not None and r.get("pid") is not None:
            by.setdefault(tuple(r.get(f) for f in SAME), []).append(r)
    return [_finding(same) for same in by.values() if len(same) > 1]


def _finding(same: list[dict]) -> Finding:
    first, last = same[0], same[-1]
    seconds = [r.get("compile_s") or 0.0 for r in same]
    sites = list(dict.fromkeys(r["call_site"] for r in same if r.get("call_site")))  # first seen first
    facts = {"function": first["function"], "signature": first.get("input_signature"), "pid": first["pid"],
             "n": len(same), "seconds": sum(seconds), "again_s": sum(seconds[1:]),
             "keys": len({(r.get("cache_key"), r.get("variant")) for r in same}),
             "eager": all(r.get("function_kind") == FUNCTION_KIND_EAGER for r in same),
             "warm": sum(r.get("cache_state") == WARM for r in same),
             "call_sites": sites[:SITES], "more_sites": max(0, len(sites) - SITES), "rows": [r["id"] for r in same]}
    return Finding(RECOMPILED, last["id"], Cause(C_RECOMPILED, facts), False, None, program_of(last),
                   last["run_id"], facts["again_s"])
