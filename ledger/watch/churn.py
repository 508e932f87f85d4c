"""evicted: an entry (a key on a host, in a cache dir) warm and then cold again with its key
unchanged, more than once, while jax_compilation_cache_max_size was in force (JAX's LRU
eviction), with no `ledger cache prune` of it in between: churn. Fails.

Each entry's count is folded row by row into a state (its evictions, the last one, whether
its newest row is warm), kept in its finding's facts (verdicts.facts "churn"), so the next
check adds an entry's rows since to it instead of reading every row of its key again
(health.py asks: `since`). Where that cannot give what every row gives, the key is read
whole: an entry with new rows and no state (fewer than two evictions before), a new row
older than the state's newest, or any prune of the key (a prune can fall between rows
already counted).
"""

from __future__ import annotations

from ledger.record import COLD, WARM
from ledger.watch.causes import C_CHURN, Cause, max_size, pruned_between
from ledger.watch.judge import Finding, program_of
from ledger.watch.kinds import EVICTED
from ledger.watch.streaks import place


def _entries(rows: list[dict]) -> dict[tuple, list[dict]]:
    """One key's warm and cold rows with a cache dir, by (host, cache dir), oldest first."""
    out: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["cache_dir"] and r["cache_state"] in (WARM, COLD):
            out.setdefault((r["hostname"], r["cache_dir"]), []).append(r)
    return out


def _empty(key: str, host: str, cache_dir: str) -> dict:
    return {"key": key, "host": host, "dir": cache_dir, "times": 0, "last": None, "warm": None, "newest": None}


def fold(state: dict, rows: list[dict], prunes: list[dict]) -> dict:
    """`state` with an entry's `rows` (oldest first, every one after the state's newest)
    added: each cold row right after a warm one, under a size limit, with no prune of the
    key from the dir between them, is an eviction."""
    s = dict(state)  # every value the fold changes it replaces whole: `state` is left as it was
    for r in rows:
        limit, warm = max_size(r["jax_cache_settings"]), s["warm"]
        if r["cache_state"] == COLD and warm is not None and limit is not None and pruned_between(
                prunes, s["dir"], warm["timestamp"], r["timestamp"]) is None:
            s["times"] += 1
            s["last"] = {"row": r["id"], "warm_row": warm["id"], "limit": limit, "program": program_of(r),
                         "run": r["run_id"], "compile_s": r["compile_s"]}
        s["warm"] = {"id": r["id"], "timestamp": r["timestamp"]} if r["cache_state"] == WARM else None
        s["newest"] = place(r)
    return s


def finding(state: dict) -> Finding | None:
    """The entry's finding: two evictions or more are churn (on the last), its state kept."""
    if state["times"] < 2:
        return None
    last = state["last"]
    cause = Cause(C_CHURN, {"key": state["key"], "dir": state["dir"], "host": state["host"], "times": state["times"],
                            "warm_row": last["warm_row"], "limit": last["limit"]})
    return Finding(EVICTED, last["row"], cause, True, last["warm_row"], last["program"], last["run"],
                   last["compile_s"], {"churn": state})


def evicted(rows: list[dict], pruned: dict[str, list[dict]]) -> list[Finding]:
    """One key's rows (oldest first): each entry's churn."""
    out = []
    for (host, cache_dir), entry_rows in _entries(rows).items():
        key = entry_rows[0]["cache_key"]
        f = finding(fold(_empty(key, host, cache_dir), entry_rows, pruned.get(key, [])))
        if f is not None:
            out.append(f)
    return out


def since(before: list[Finding], rows: list[dict], pruned: dict[str, list[dict]]) -> list[Finding] | None:
    """One key's findings from its previous check's (`before`, each with its state) and
    its rows since (oldest first); None where the key must be read whole."""
    states = {(f.extra["churn"]["host"], f.extra["churn"]["dir"]): f for f in before if "churn" in f.extra}
    if not before or len(states) < len(before) or any(pruned.get(f.extra["churn"]["key"]) for f in before):
        return None
    new = _entries(rows)
    if new.keys() - states.keys():
        return None  # an entry with fewer than two evictions before: its rows are not in any state
    out = []
    for entry, f in states.items():
        state, entry_rows = f.extra["churn"], new.get(entry, [])
        if entry_rows and state["newest"] is not None and place(entry_rows[0]) <= state["newest"]:
            return None
        out.append(finding(fold(state, entry_rows, [])) if entry_rows else f)
    return out
