"""recompiled: one function at one input signature compiled more than once by one
process of a recorded run. JAX's in-memory cache should have served every call after
the first; each further compile is paid again (warm from the persistent cache or cold).

Why it happened shows in the cache keys: the same key each time is the same program
compiled again (a new `jax.jit` wrapper made per call, a jitted function defined inside
a loop); keys that differ are other programs of one name and signature (a static
argument or a closed-over value that changes). The finding counts the compiles, their
seconds and those past the first (what it costs a run), says which of the two it is,
and names the call site. It is about a run (the newest of each program, as the other
health findings, ledger/watch/health.py), and does not fail the check.
"""

from __future__ import annotations

from ledger.record import STATELESS_KEY
from ledger.watch.causes import C_RECOMPILED, Cause
from ledger.watch.judge import Finding, program_of
from ledger.watch.kinds import RECOMPILED

# One process's compiles of one function at one signature: its host key and cell, less the
# variant (a variant is another cache key: here that is what says why) and the cache state.
SAME = ("run_id", "pid", *(f for f in STATELESS_KEY if f != "variant"))
COLUMNS = ("pid", "call_site", "variant", *STATELESS_KEY)  # what health.py reads for it


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
    sites = [r["call_site"] for r in same if r.get("call_site")]
    facts = {"function": first["function"], "signature": first.get("input_signature"), "pid": first["pid"],
             "n": len(same), "seconds": sum(seconds), "again_s": sum(seconds[1:]),
             "keys": len({(r.get("cache_key"), r.get("variant")) for r in same}),
             "warm": sum(r.get("cache_state") == "warm" for r in same),
             "call_site": max(set(sites), key=sites.count) if sites else None, "rows": [r["id"] for r in same]}
    return Finding(RECOMPILED, last["id"], Cause(C_RECOMPILED, facts), False, None, program_of(last),
                   last["run_id"], facts["again_s"])
