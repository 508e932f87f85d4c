"""A cold streak's state: what its finding and causes.streak_cause read of its cold rows,
folded row by row, so that a check can add the rows since its last run to the state that
run stored instead of reading every cold row of the streak again.

A streak here is one jax's cold rows with a cache dir in a lineage (judge._streak), oldest
first. Everything its finding says is a count, a set, a MIN or MAX, or the newest of
something, so the state of rows 1..n folded with rows n+1..m is the state of rows 1..m,
but for two things the state cannot hold: whether a run of the new rows had rows before
them (the caller answers that from the ledger: `seen`), and the seconds of a run other
than the newest that becomes the newest again (fold returns None: read the rows whole).
A never-warm cell's cache-not-reused keeps its state in its facts (verdicts.facts
"streak"); findings.py carries it to the next check.
"""

from __future__ import annotations

from ledger.watch.causes import run_of, unwritten_by


def place(row: dict) -> list:
    """A row's place in the order the rows are read in (rows.oldest_first: its time, NULL
    the oldest, then its id), as a JSON-able value that compares as that order does, a
    time that is another's prefix ("...10:00:00" and "...10:00:00+00:00") first."""
    return [row.get("timestamp") or "", row["id"]]


def run_key(row: dict) -> tuple:
    """causes.run_of as a JSON-able value: ("run", run id, phase) or ("row", id)."""
    run = run_of(row)
    return ("run", *run) if isinstance(run, tuple) else ("row", run)


def empty(jax: str) -> dict:
    return {"jax": jax, "newest": None, "runs": 0, "unwritten": True,
            "settings": [], "limits": [], "min_s": None, "max_s": None, "dirs": [], "last_in_dir": {},
            "pair": None, "last_run": None, "last_run_s": None}


def of(jax: str, colds: list[dict]) -> dict:
    """The state of a streak's cold rows (oldest first), from nothing."""
    state = fold(empty(jax), colds, set())
    assert state is not None  # from nothing, every run of the rows is among them
    return state


def fold(state: dict, rows: list[dict], seen: set[tuple]) -> dict | None:
    """`state` with `rows` added (cold, with a cache dir, oldest first, every one after the
    state's newest row). `seen`: the run keys (run_key) of the new rows that had rows in
    the streak before them (the caller asks the ledger); None where the newest run of
    the rows is an older run than the state's newest, whose seconds the state lacks."""
    # a copy of what the fold adds to (two lists and a dict); every other value it replaces
    # whole, so `state` is left as it was (a deepcopy here was 15,000 calls a daily check)
    s = dict(state, dirs=list(state["dirs"]), settings=list(state["settings"]),
             last_in_dir=dict(state["last_in_dir"]))
    last = tuple(s["last_run"]) if s["last_run"] is not None else None
    earlier = set(seen) | ({last} if last else set())
    counted, dirs = set(earlier), set(s["dirs"])
    sums = {last: s["last_run_s"]} if last else {}  # a run's compile seconds (None: none known): the finding's cost
    for r in rows:
        key = run_key(r)
        if key not in counted:
            counted.add(key)
            s["runs"] += 1
        _unwritten(s, unwritten_by(r))
        seconds = r.get("compile_s")
        if seconds is not None:
            s["min_s"] = seconds if s["min_s"] is None else min(s["min_s"], seconds)
            s["max_s"] = seconds if s["max_s"] is None else max(s["max_s"], seconds)
            total = sums.get(key)
            sums[key] = (0 if total is None else total) + seconds  # sum()'s order: oldest first, from 0
        else:
            sums.setdefault(key, None)
        where = r["cache_dir"]
        if where not in dirs:
            dirs.add(where)
            s["dirs"].append(where)
        before = s["last_in_dir"].get(where)
        if before is not None and tuple(before[1]) != key:  # the newest two of different runs in one dir
            s["pair"] = [before[0], r["id"]]
        s["last_in_dir"][where] = [r["id"], list(key)]
        s["newest"] = place(r)
    if rows:
        newest = run_key(rows[-1])
        if newest in earlier and newest != last:
            return None  # an older run is the newest again: its earlier seconds are not in the state
        s["last_run"], s["last_run_s"] = list(newest), sums[newest]
    return s


def _unwritten(s: dict, by: tuple | None) -> None:
    """What kept a row's entry out (causes.unwritten_by), into the state: every row kept
    out so far, by which settings, at which limits."""
    if by is None:
        s["unwritten"] = False
        return
    if by[0] not in s["settings"]:
        s["settings"].append(by[0])
    if by[1] is not None and by[1] not in s["limits"]:
        s["limits"] = sorted([*s["limits"], by[1]])
