"""The causes of a cold compile, as facts, and their words: made here, and nowhere else.

A cause is a code and the values it was found from (`Cause`): what differs between a
cold row and the warm row it is read against, component by component of JAX's cache key
(`components`); a `ledger cache prune` or JAX's size limit that took the entry; why a
cell's cold runs never reused the cache (entries never written under JAX's thresholds,
a new directory each run, a dir that lost its entries, a key that changed each run).
`ledger check` stores each finding's cause as these facts (verdicts.facts) and carries
them to the next check; `explain`, `diff`, `predict` and the report make their words
from the same facts through `words()`. Nothing parses a cause back out of its words.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import lru_cache

import sqlalchemy as sa

from ledger.output import three_digits
from ledger.probes.jax_internals import OPT_MIN_COMPILE_TIME, OPT_MIN_ENTRY_SIZE
from ledger.record import CACHE_CELL, NOT_PERSISTED_COMPILE_TIME, NOT_PERSISTED_ENTRY_SIZE, WARM
from ledger.rows import before_sql, newest_first, ok_sql
from ledger.storage.in_lists import rows_in
from ledger.watch.keys import same_as_sql

COMPUTATION = "computation"
UNKNOWN_CAUSE = "cause unknown"
EMPTY_DIR = "cache dir was empty before the compile"
PRECISION = "precision: jax_enable_x64 changed"
SAME_KEY = "same cache key as the warm row (its entry was removed or never written)"
MAX_SIZE = "jax_compilation_cache_max_size"
MIN_COMPILE_TIME, MIN_ENTRY_SIZE = OPT_MIN_COMPILE_TIME, OPT_MIN_ENTRY_SIZE  # JAX's names for its thresholds
PRUNED = "pruned"  # the entry was removed by `ledger cache prune` (its cache_prunes row)
# The columns that show a component's actual values, where the probe recorded them.
SHOWN_BY = {"XLA flags": "xla_flags", "jax_lib version": "jaxlib_version"}

# -- the codes ------------------------------------------------------------------------
# A cold row read against a warm one
C_COMPONENTS = "components"  # key components differ (and/or x64, an emptied dir)
C_SAME_KEY = "same-key"  # the key did not change: the entry went (or was never there)
C_EMPTIED = "emptied"  # no components to compare, and the dir was empty before the compile
C_UNKNOWN = "unknown"  # nothing on the rows says why
C_PRUNED = "pruned"
C_EVICTED = "likely-evicted"
# A cell's cold runs that never reused the cache
C_THRESHOLD = "under-threshold"  # never written: under JAX's compile-time or entry-size floor
C_NEW_DIRS = "new-dirs"
C_LOST = "lost-entries"
C_KEY_CHANGED = "key-changed"
C_NEVER_WARM = "never-warm"  # cold runs in one dir, no entry shown missing: unknown
# A cell's history
C_STILL_COLD = "still-cold"  # still cold on later runs under a new jax (wraps the runs' cause)
C_JAX = "jax-bump"
C_OFF = "no-cache-dir"
C_DIR_CHANGED = "dir-changed"  # the first compile into another dir after warm ones: no finding
# The cache's health (ledger/watch/health.py): about a run or an entry, not a cell
C_NOT_SHARED = "dir-not-shared"  # a process above 0 compiles cold what process 0 found warm
C_OTHER_KEYS = "keys-differ"  # ... what process 0 compiled under other keys
C_RUN_UNDER_THRESHOLD = "run-under-threshold"  # a run's compiles under JAX's min compile time
C_CHURN = "churn"  # an entry evicted and compiled cold again, more than once
C_RECOMPILED = "recompiled"  # one function and signature compiled again by the same process


@dataclass(frozen=True)
class Cause:
    """One cause: its code and the facts its words are made from (JSON values only)."""

    code: str
    facts: dict = field(default_factory=dict)

    def words(self) -> str:
        return WORDS[self.code](self.facts)

    @property
    def root(self) -> tuple:
        """What makes two findings one root cause (check prints a line per root, counted):
        the code and the facts that name what to fix, not the rows or the seconds."""
        f = self.facts
        if self.code == C_COMPONENTS:
            return (self.code, *f.get("differ", ()), *(["x64"] if f.get("x64") else []))
        if self.code == C_THRESHOLD:
            return (self.code, f["setting"], f["limit"])
        if self.code == C_STILL_COLD:
            return (self.code, f["jax"], *Cause.from_json(f["inner"]).root)
        if self.code == C_JAX:
            return (self.code, f["old"], f["new"])
        if self.code in (C_EVICTED, C_CHURN):
            return (self.code, f["limit"])
        if self.code == C_RECOMPILED:  # same key or keys differing, jitted or eager: four fixes
            return (self.code, f["keys"] > 1, bool(f.get("eager")))
        if self.code == C_RUN_UNDER_THRESHOLD:  # one root with the cells it never wrote
            return (C_THRESHOLD, MIN_COMPILE_TIME, f["limits"][0] if len(f["limits"]) == 1 else None)
        return (self.code,)

    def root_words(self) -> str:
        """The root cause in words, without the rows, dirs and seconds of one cell: what a
        line that counts the cells sharing it says."""
        return ROOT_WORDS.get(self.code, lambda c: c.words())(self)

    def as_json(self) -> dict:
        return {"code": self.code, **self.facts}

    @staticmethod
    def from_json(data: dict) -> Cause:
        facts = dict(data)
        return Cause(facts.pop("code"), facts)


# -- what differs between a cold row and a warm one ------------------------------------

def _components(row) -> dict | None:
    text = row.get("cache_key_components")
    if not text:
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) and parsed else None


def _program(cold, warm) -> str | None:
    """Whether the computation that differs is another program (fingerprints differ),
    the same program hashed otherwise, or not known (a fingerprint missing)."""
    before, after = warm.get("program_fingerprint"), cold.get("program_fingerprint")
    if not before or not after:
        return None
    return "changed" if before != after else "same"


def _x64(cold, warm) -> list | None:
    """x64 on one side and off on the other: float64 traced as float32 (or the reverse)
    is another program, whatever else differs; unknown on either side says nothing."""
    before, after = warm.get("x64"), cold.get("x64")
    if before is None or after is None or bool(before) == bool(after):
        return None
    return [bool(before), bool(after)]


def compared(cold: dict, warm: dict) -> Cause:
    """What differs between a cold row and the warm row it is read against, from the
    evidence on both."""
    x64, empty = _x64(cold, warm), cold.get("cache_files_before") == 0
    a, b = _components(warm), _components(cold)
    if a is None or b is None:  # no components to compare; the keys themselves may still be
        if x64:
            return Cause(C_COMPONENTS, {"differ": [], "x64": x64, "empty_dir": empty})
        same = cold.get("cache_key") is not None and cold.get("cache_key") == warm.get("cache_key")
        if same:
            return Cause(C_SAME_KEY, {"empty_dir": empty})
        return Cause(C_EMPTIED if empty else C_UNKNOWN)
    differ = sorted(n for n in a.keys() | b.keys() if a.get(n) != b.get(n))
    if not differ and not x64:
        return Cause(C_SAME_KEY, {"empty_dir": empty})
    facts = {"differ": differ, "x64": x64, "empty_dir": empty}
    if COMPUTATION in differ:
        facts["program"] = _program(cold, warm)
    return Cause(C_COMPONENTS, facts)


def cold_cause(cold: dict, warm: dict, prunes: list[dict]) -> Cause:
    """compared(), and where the key did not change and `ledger cache prune` removed that
    key's entry from the dir after the warm row (and before the cold row, where it has a
    time), that removal; under a size limit with no prune, a likely eviction. `prunes`:
    the cache_prunes rows of the warm row's key."""
    cause = compared(cold, warm)
    if cause.code not in (C_SAME_KEY, C_EMPTIED) or cold.get("cache_key") not in (None, warm.get("cache_key")):
        return cause
    dirs = {cold.get("cache_dir"), warm.get("cache_dir")}
    row = next((p for d in dirs if (p := pruned_between(prunes, d, warm.get("timestamp"), cold.get("timestamp")))),
               None)
    if row is not None:
        return Cause(C_PRUNED, {"at": row["pruned_at"], "reason": row["reason"]})
    limit = max_size(cold.get("jax_cache_settings"))
    if cause.code == C_SAME_KEY and not cause.facts.get("empty_dir") and limit is not None:
        return Cause(C_EVICTED, {"limit": limit})
    return cause


def has_prunes(conn) -> bool:
    """Whether the ledger has cache_prunes: the table is revision 0014's, and an older
    ledger has no prunes to name."""
    return sa.inspect(conn).has_table("cache_prunes")


def prunes_of(conn, keys, present: bool | None = None) -> dict[str, list[dict]]:
    """key -> the cache_prunes rows removing it (newest first). `present`: has_prunes, where
    the caller knows it (a check asks for one key at a time, two dozen times)."""
    keys = sorted({k for k in keys if k})
    out: dict[str, list[dict]] = {}
    if not keys or not (has_prunes(conn) if present is None else present):
        return out
    sql = ("SELECT cache_dir, cache_key, pruned_at, reason FROM cache_prunes WHERE cache_key IN :keys"
           " ORDER BY pruned_at DESC, id DESC")
    for r in rows_in(conn, sql, "keys", keys):
        out.setdefault(r["cache_key"], []).append(r)
    return out


@lru_cache(maxsize=1024)  # a ledger holds a few settings texts; a first check asked 18,908 rows (0.08 s of parsing)
def max_size(settings: str | None) -> int | None:
    """jax_compilation_cache_max_size from a row's recorded cache settings, where a limit
    was in force (JAX's default -1 is none)."""
    try:
        value = json.loads(settings or "{}").get(MAX_SIZE)
    except (ValueError, AttributeError):
        return None
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def pruned_between(prunes: list[dict], cache_dir: str | None, after: str | None, before: str | None) -> dict | None:
    """The first of `prunes` (cache_prunes rows of one key) that removed it from `cache_dir`
    at or after the time `after` and at or before `before` (either None: unbounded), in
    real time (naive legacy times and aware ones alike), the dir's path normalized."""
    from ledger.cache.inventory import epoch

    start, end, where = epoch(after), epoch(before), _dir(cache_dir)
    for row in prunes:
        when = epoch(row["pruned_at"])
        if (where is not None and _dir(row["cache_dir"]) == where and when is not None
                and (start is None or when >= start) and (end is None or when <= end)):
            return row
    return None


def _dir(path: str | None) -> str | None:
    """A stored cache dir as one text per dir. Rows keep the real, absolute dir
    (record.stored_cache_dir); an older row's relative dir is compared as stored, never
    against this command's working directory (which would make the cause depend on it)."""
    if not path:
        return None
    path = os.path.expanduser(path)
    return os.path.normpath(path) if os.path.isabs(path) else path


# -- why a cell's cold runs never reused the cache -------------------------------------

def unwritten_by(row: dict) -> tuple[str, float | int | None] | None:
    """The JAX setting that kept a cold row's entry out of the cache, and its value, where
    the row shows it: JAX said so (a recorded row's cache_not_persisted), or the probe's
    evidence does (no entry added, JAX's miss-written event silent, the compile under the
    floor); else None."""
    said = row.get("cache_not_persisted")
    if said == NOT_PERSISTED_COMPILE_TIME:
        return MIN_COMPILE_TIME, row.get("cache_min_compile_time_s")
    if said == NOT_PERSISTED_ENTRY_SIZE:
        return MIN_ENTRY_SIZE, row.get("cache_min_entry_size_bytes")
    if said is not None:
        return None
    unwritten = (row.get("cache_files_after") is not None and row["cache_files_after"] == row.get("cache_files_before")) \
        or (row.get("cache_requests") and row.get("cache_misses") == 0)
    if not unwritten:
        return None
    floor, seconds = row.get("cache_min_compile_time_s"), row.get("compile_s")
    if floor is not None and seconds is not None and seconds < floor:
        return MIN_COMPILE_TIME, floor
    size = row.get("cache_min_entry_size_bytes")
    if size:
        return MIN_ENTRY_SIZE, size
    return None


def runs_of(rows: list[dict]) -> int:
    """How many runs the rows are: one run may compile a cell more than once (two
    processes of a recorded program, a retry), and that is one run that never reused
    the cache, not two. A run is a run id and phase (a probe's --cold-warm pair is two
    processes under one run id); a row without a run id is a run of its own."""
    return len({run_of(r) for r in rows})


def run_of(row: dict):
    return (row["run_id"], row["phase"]) if row.get("run_id") is not None else row["id"]


def streak_cause(state: dict, pair: dict[int, dict], prunes: dict[str, list[dict]]) -> tuple[Cause, bool]:
    """Why a cell's cold runs (2 or more, with a cache dir) never reused the cache, and
    whether that fails the check, from their state (ledger/watch/streaks.py). The strongest
    evidence first: JAX kept every entry out by its own thresholds (by design; whatever
    the dirs were, nothing could be reused); else each run used a dir no earlier run had;
    else, in a dir used twice, the entries went, or the key changed between the newest two
    cold rows of different runs there (`pair`: their whole rows, by id)."""
    runs = state["runs"]
    if state["unwritten"]:
        settings, limits = state["settings"], state["limits"]
        facts = {"setting": settings[0] if len(settings) == 1 else "thresholds",
                 "limit": limits[0] if len(limits) == 1 else None, "runs": runs, "dirs": list(state["dirs"]),
                 "min_s": state["min_s"], "max_s": state["max_s"]}
        return Cause(C_THRESHOLD, facts), False
    if state["pair"] is None:
        return Cause(C_NEW_DIRS, {"runs": runs, "dirs": list(state["dirs"])}), True
    a, b = (pair[i] for i in state["pair"])
    wrote = a.get("cache_files_after") is not None and a.get("cache_files_before") is not None \
        and a["cache_files_after"] > a["cache_files_before"]
    if wrote and b.get("cache_files_before") is not None and b["cache_files_before"] < a["cache_files_after"]:
        return Cause(C_LOST, {"a": a["id"], "left": a["cache_files_after"], "b": b["id"],
                              "found": b["cache_files_before"], "dir": a["cache_dir"]}), True
    inner = cold_cause(b, a, prunes.get(a.get("cache_key") or "", []))
    if inner.code in (C_UNKNOWN, C_SAME_KEY, C_EMPTIED):
        return Cause(C_NEVER_WARM, {"runs": runs, "dir": a["cache_dir"]}), False
    return Cause(C_KEY_CHANGED, {"runs": runs, "dir": a["cache_dir"], "a": a["id"], "b": b["id"],
                                 "inner": inner.as_json()}), True


# -- the words ----------------------------------------------------------------------------

def _on(value) -> str:
    return "on" if value else "off"


def _components_words(f: dict) -> str:
    parts = []
    if f.get("x64"):
        before, after = f["x64"]
        parts.append(f"{PRECISION} ({_on(before)} in the warm row, {_on(after)} now)")
    if f.get("empty_dir"):
        parts.append(EMPTY_DIR)
    for name in f.get("differ", ()):
        if name == COMPUTATION:
            program = f.get("program")
            name += {"changed": " (program changed)", "same": " (same program, different hash)"}.get(program, "")
        parts.append(name)
    return "; ".join(parts) or UNKNOWN_CAUSE


def _threshold_words(f: dict) -> str:
    lo, hi = f.get("min_s"), f.get("max_s")
    span = "" if lo is None else f" ({three_digits(lo)} s)" if lo == hi else f" ({three_digits(lo)}–{three_digits(hi)} s)"
    if f["setting"] == MIN_COMPILE_TIME:
        limit = f" {f['limit']:g}" if f.get("limit") is not None else ""
        what = f"every compile{span} was under {MIN_COMPILE_TIME}{limit}"
    elif f["setting"] == MIN_ENTRY_SIZE:
        limit = f" {f['limit']}" if f.get("limit") is not None else ""
        what = f"every entry was under {MIN_ENTRY_SIZE}{limit}"
    else:
        what = f"every compile{span} was under JAX's thresholds ({MIN_COMPILE_TIME}, {MIN_ENTRY_SIZE})"
    where = f"in {f['dirs'][0]}" if len(f["dirs"]) == 1 else f"in {len(f['dirs'])} cache dirs"
    return (f"{f['runs']} cold runs {where}, never warm: the entries were never written, by design: {what},"
            " so there is nothing to reuse")


def _not_written_head(f: dict) -> str:
    n = f["n"]
    return (f"process {f['index']} on {f['host']} compiled {n} function{'s' * (n != 1)} cold ({three_digits(f['seconds'])} s)"
            f" into {f['dir']} again, as in an earlier run: JAX writes entries from process 0 only")


def _run_under_threshold_words(f: dict) -> str:
    limits = f" ({', '.join(f'{x:g}' for x in f['limits'])} s)" if f["limits"] else ""
    return (f"{f['n']} compiles under {MIN_COMPILE_TIME}{limits} took {three_digits(f['seconds'])} s"
            f" and were never written, so every run pays them again: setting it to 0"
            f" (JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0) keeps them, and would save up to {three_digits(f['seconds'])} s"
            " a run")


_SAME_KEY_AGAIN = ("the same cache key each time: JAX's in-memory cache missed the same program (a new jax.jit"
                   " wrapper made per call, or a jitted function defined inside a loop: make it once)")
_KEYS_DIFFER = ("the cache keys differ: another program each time (a static argument or a closed-over value"
                " that changes between calls)")
_EAGER_SAME_KEY = ("an op run outside jit, compiled again under the same cache key: JAX's op-by-op cache did not"
                   " keep it (jax.clear_caches, or parameters it cannot hash); inside a jitted function it compiles"
                   " once")
_EAGER_KEYS_DIFFER = ("an op run outside jit, under other cache keys at one signature: what the signature does not"
                      " show differs (a Python scalar, weakly typed, in one call and an array in another, or the"
                      " op's parameters); inside a jitted function it compiles once")


def _recompiled_why(f: dict) -> str:
    if f.get("eager"):
        return _EAGER_KEYS_DIFFER if f["keys"] > 1 else _EAGER_SAME_KEY
    return _KEYS_DIFFER if f["keys"] > 1 else _SAME_KEY_AGAIN


def _recompiled_words(f: dict) -> str:
    sig = f"({f['signature']})" if f.get("signature") else ""
    sites = f.get("call_sites") or []
    more = f" and {f['more_sites']} more" if f.get("more_sites") else ""
    site = f" at {', '.join(sites)}{more}" if sites else ""
    warm = f", {f['warm']} of them warm" if f.get("warm") else ""
    return (f"{f['function']}{sig} compiled {f['n']} times by process {f['pid']}{site} ({three_digits(f['seconds'])} s,"
            f" {three_digits(f['again_s'])} s after the first{warm}): {_recompiled_why(f)}")


def _still_cold_words(f: dict) -> str:
    return (f"{Cause.from_json(f['inner']).words()} (still cold after {f['runs']} runs under jax {f['jax']};"
            f" last warm row {f['warm_row']} under jax {f['old_jax']})")


WORDS = {
    C_COMPONENTS: _components_words,
    C_SAME_KEY: lambda f: EMPTY_DIR if f.get("empty_dir") else SAME_KEY,
    C_EMPTIED: lambda f: EMPTY_DIR,
    C_UNKNOWN: lambda f: UNKNOWN_CAUSE,
    C_PRUNED: lambda f: f"{PRUNED}: entry removed by ledger cache prune at {f['at']} ({f['reason']})",
    C_EVICTED: lambda f: (f"same cache key as the warm row, under {MAX_SIZE}={f['limit']} bytes: likely evicted"
                          " (JAX removes the least recently used entries when the dir is full)"),
    C_THRESHOLD: _threshold_words,
    C_NEW_DIRS: lambda f: (f"each run used a new directory: {f['runs']} cold runs in {len(f['dirs'])} distinct cache"
                           f" dirs ({', '.join(map(str, f['dirs']))})"),
    C_LOST: lambda f: (f"the same dir lost its entries: row {f['a']} left {f['left']} entries in {f['dir']},"
                       f" row {f['b']} found {f['found']} before its compile"),
    C_KEY_CHANGED: lambda f: (f"{f['runs']} cold runs in {f['dir']}: the cache key changed between rows {f['a']} and"
                              f" {f['b']}: {Cause.from_json(f['inner']).words()}"),
    C_NEVER_WARM: lambda f: (f"{f['runs']} cold runs in {f['dir']}, never warm: {UNKNOWN_CAUSE} (the rows show no"
                             " missing entry)"),
    C_STILL_COLD: _still_cold_words,
    C_JAX: lambda f: (f"jax {f['old']} → {f['new']}: the first compile under the new jax is cold, as expected"
                      f" (last warm row {f['warm_row']} under jax {f['old']})"),
    C_OFF: lambda f: (f"no cache dir since row {f['first_none']} (cache_state none); the cell was warm under cache dir"
                      f" {f['dir']} (last warm row {f['warm_row']})"),
    C_NOT_SHARED: lambda f: (f"{_not_written_head(f)}, and process 0 found {f['found']} of them warm on {f['on']}"
                             f" (row {f['warm_row']}): the dir is not shared, each host has its own at that path; fix:"
                             " put jax_compilation_cache_dir on a file system every host sees"),
    C_OTHER_KEYS: lambda f: (f"{_not_written_head(f)}, and process 0 compiled them under other keys"
                             + (f" (differing in {', '.join(f['differ'])})" if f["differ"] else "")
                             + f", so no process writes process {f['index']}'s: it compiles them cold on every run,"
                             " shared dir or not"),
    C_RUN_UNDER_THRESHOLD: _run_under_threshold_words,
    C_RECOMPILED: _recompiled_words,
    C_CHURN: lambda f: (f"entry {f['key']} in {f['dir']} on {f['host']} was evicted and compiled cold again"
                        f" {f['times']} times (warm, then cold with the same key; last warm row {f['warm_row']}) under"
                        f" {MAX_SIZE}={f['limit']} bytes: raise the limit, or remove dead weight (`ledger cache prune`)"),
    C_DIR_CHANGED: lambda f: (f"the first compile of this cell into cache dir {f['to']}: it was warm under"
                              f" {f['from']} (last warm row {f['warm_row']}), and a new dir starts empty"),
}


# -- rows ---------------------------------------------------------------------------------

def fetch_rows(conn, ids, columns: tuple[str, ...] | None = None) -> dict[int, dict]:
    """The rows of `ids`, by id: whole, or only `columns` (with "id"; the record's own
    names). A row has 70 columns: reading 5,000 whole took 0.14-0.22 s, their id, seconds and
    key 0.06-0.09 s."""
    listed = ", ".join(columns) if columns else "*"
    return {r["id"]: r for r in rows_in(conn, f"SELECT {listed} FROM compile_records WHERE id IN :ids", "ids",
                                              sorted(set(ids)))}


def last_warm_before(conn, row: dict) -> dict | None:
    """The newest warm ok row of the row's cell and cache dir that is older than it."""
    same = same_as_sql(CACHE_CELL, conn.dialect.name)
    older = before_sql("", ":ts", ":id")
    sql = (f"SELECT * FROM compile_records WHERE cache_state = '{WARM}' AND {ok_sql()} AND {same} AND {older}"
           f" ORDER BY {newest_first()} LIMIT 1")
    params = {f: row[f] for f in CACHE_CELL} | {"ts": row["timestamp"] or "", "id": row["id"]}
    found = conn.execute(sa.text(sql), params).mappings().first()
    return dict(found) if found else None


def _threshold_root(c: Cause) -> str:
    setting, limit = c.root[1], c.root[2]
    if setting == MIN_ENTRY_SIZE:
        return f"never written: every entry was under {MIN_ENTRY_SIZE}" + (f" = {limit} bytes" if limit else "")
    if setting == MIN_COMPILE_TIME:
        return f"never written: every compile was under {MIN_COMPILE_TIME}" + (f" = {limit:g} s" if limit else "")
    return f"never written: every compile was under JAX's thresholds ({MIN_COMPILE_TIME}, {MIN_ENTRY_SIZE})"


# A root cause in words (Cause.root_words): for a line counting the cells that share it.
ROOT_WORDS = {
    C_COMPONENTS: lambda c: "cold: " + _components_words({**c.facts, "empty_dir": False}),
    C_SAME_KEY: lambda c: "cold: " + SAME_KEY,
    C_EMPTIED: lambda c: "cold: " + EMPTY_DIR,
    C_UNKNOWN: lambda c: "cold: " + UNKNOWN_CAUSE,
    C_PRUNED: lambda c: "cold: entries removed by ledger cache prune",
    C_EVICTED: lambda c: f"cold: same cache key, under {MAX_SIZE}={c.facts['limit']} bytes: likely evicted",
    C_THRESHOLD: _threshold_root,
    C_RUN_UNDER_THRESHOLD: _threshold_root,
    C_NEW_DIRS: lambda c: "never reused: each run used a new cache directory",
    C_LOST: lambda c: "never reused: the cache dir lost its entries between runs",
    C_KEY_CHANGED: lambda c: ("never reused: the cache key changed between runs: "
                              + Cause.from_json(c.facts["inner"]).words()),
    C_NEVER_WARM: lambda c: f"never reused: {UNKNOWN_CAUSE} (the rows show no missing entry)",
    C_STILL_COLD: lambda c: (f"still cold under jax {c.facts['jax']}: "
                             + Cause.from_json(c.facts["inner"]).root_words()),
    C_JAX: lambda c: (f"jax {c.facts['old']} → {c.facts['new']}: the first compile under the new jax is cold, as"
                      " expected"),
    C_OFF: lambda c: "no cache dir any more: these cells were warm under one before",
    C_CHURN: lambda c: f"entries evicted and compiled cold again under {MAX_SIZE}={c.facts['limit']} bytes",
    C_RECOMPILED: lambda c: "compiled more than once by one process: " + _recompiled_why(c.facts),
}
