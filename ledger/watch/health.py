"""Cache health: what the rows say the cache silently fails to keep, in `ledger check`.

- cache-not-written: the newest run of a job of more than one process (one run's rows
  with process index 0 and above) where a process above 0, on another host than process
  0 under the same cache dir path, compiled cold what JAX did not write (only process 0
  writes entries) and what it had compiled cold with the same key in an earlier run: no
  entry appeared. Where process 0 found those keys warm, the dir is not shared (each
  host has its own copy of the path): fails, and names the fix. Where process 0's keys
  for the same functions differ (on CPU the accelerator_config component names each
  process's own devices), no process writes them: said, not failing.
- below-threshold: the newest run of a program (its recorded command, or a probe's
  objective) whose compiles JAX did not write because they took less than
  jax_persistent_cache_min_compile_time_secs cost more than `below_s` seconds in all:
  each is paid again on every run. Names the setting and what it would save; does not fail.
- recompiled: in the newest run of a program, one process compiled a function at one
  input signature more than once (ledger/watch/recompiled.py); does not fail.
- evicted: an entry (host, cache dir, key) warm and then cold again with its key
  unchanged, more than once, while jax_compilation_cache_max_size was in force (JAX's LRU
  eviction), with no `ledger cache prune` of it in between: churn. Fails. (churn.py)

A daily check reads only what arrived since the previous one (the runs and keys of the
new rows, through the indexes of revision 0014) and keeps that run's health findings
for the programs and entries with nothing new; an entry with new rows has them added to
the churn it counted before (churn.since), where it can.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from ledger.filters import filter_sql
from ledger.record import COLD, NOT_PERSISTED_COMPILE_TIME, NOT_PERSISTED_PROCESS_INDEX, WARM
from ledger.rows import ok_sql, oldest_first, time_sql
from ledger.storage.engine import planned
from ledger.storage.in_lists import rows_in
from ledger.watch import churn
from ledger.watch.causes import (
    C_COMPONENTS,
    C_NOT_SHARED,
    C_OTHER_KEYS,
    C_RUN_UNDER_THRESHOLD,
    MAX_SIZE,
    Cause,
    compared,
    fetch_rows,
    max_size,
    prunes_of,
)
from ledger.watch.judge import Finding, program_of
from ledger.watch.kinds import BELOW_THRESHOLD, CACHE_NOT_WRITTEN, EVICTED, HEALTH_KINDS
from ledger.watch.recompiled import COLUMNS as RECOMPILED_COLUMNS
from ledger.watch.recompiled import recompiled

BELOW_THRESHOLD_S = 5.0  # seconds a run: what check --below-threshold-s defaults to
PROGRAM_SQL = "COALESCE(r.command, r.objective)"  # what ran: the recorded command, or the probe's objective
_COLUMNS = ("id", "run_id", "function", "input_signature", "transform", "cache_key_components", "x64",
            "cache_files_before", "program_fingerprint", "command", "objective", "hostname", "process_index", "cache_state", "cache_dir",
            "cache_key", "compile_s", "cache_not_persisted", "cache_min_compile_time_s", "jax_cache_settings",
            "timestamp")
_COLUMNS = tuple(dict.fromkeys((*_COLUMNS, *RECOMPILED_COLUMNS)))


@dataclass
class Kept:
    """The previous check run, where its health findings stand for what has no row since;
    `newest`: its check_runs.newest_run_time (None: not known)."""

    run_id: int
    upto: int
    newest: str | None = None


def health_findings(conn, filters: dict | None, below_s: float, kept: Kept | None) -> tuple[list[Finding], str]:
    """Every health finding, oldest row first; and the newest time of an ok row with a run
    id (up to the last row, under the filters; '' for none), for the next check."""
    where, params = filter_sql(filters, "r")
    if kept is None:
        times = _run_times(conn, where, params)
        runs, keys, carried, redo = _newest_runs(times), _churn_keys(conn, where, params, 0), [], {}
        newest = max((t for _, _, t in times), default="")
    else:
        runs, keys, carried, redo, newest = _since(conn, where, params, kept)
    found = list(carried)
    by_run = _rows_by(conn, "run_id", runs, where, params)
    unwritten = {r["cache_key"] for rows in by_run.values() for r in _unwritten(rows)}
    by_key = _rows_by(conn, "cache_key", unwritten, where, params)
    for rows in by_run.values():
        found += _not_written(rows, by_key) + _below_threshold(rows, below_s) + recompiled(rows)
    pruned = prunes_of(conn, keys)
    # an entry with churn counted before: its rows since, added to its kept count (churn.py)
    whole = set(keys)
    new = _rows_by(conn, "cache_key", set(redo), where, params, above=kept.upto) if redo else {}
    for key, before in redo.items():
        counted = churn.since(before, new.get(key, []), pruned)
        if counted is not None:
            found += counted
            whole.discard(key)
    for rows in _rows_by(conn, "cache_key", whole, where, params).values():
        found += churn.evicted(rows, pruned)
    return sorted(found, key=lambda f: f.row_id), newest


# On SQLite `column || '' IS NOT NULL`: `column IS NOT NULL` that no index serves. For a test
# true of nearly every row SQLite otherwise walks the column's index and fetches each row from
# the table out of order, slower than reading the table through (ix_compile_records_run_id
# as 0019 made it: 2.0 s against 1.0 s; ix_compile_records_cache_key: 1.4 s against 0.15 s,
# at 1M rows). Since 0024 the run_id index holds all _run_times reads: there it is used.
# PostgreSQL's planner reads the table through by itself.
def _present(conn, column: str) -> str:
    return f"{column} || '' IS NOT NULL" if conn.dialect.name == "sqlite" else f"{column} IS NOT NULL"


def _run_times(conn, where: str, params: dict) -> list[tuple]:
    """(program, run_id, t): each program's ok rows in each run, with the newest one's time,
    in SQL: a run's rows are never fetched to find it. Grouped by the run and the two
    columns a program is made of, in the order revision 0024's index holds them: on SQLite
    the rows come out of the index grouped, and the table is not read (1.9-2.0 s -> 0.40 s
    of a first check at 1M rows); the groups of one program in one run (its command in
    some rows, the same text as objective in others) are one here. Hashed on PostgreSQL:
    sorting every row by program and run took 1.06 s at 1M rows, the hash 0.45 s."""
    # under filters the index does not hold their columns, and a walk of it that fetches
    # each row out of order is slower than the scan (_present)
    present = _present(conn, "r.run_id") if where else "r.run_id IS NOT NULL"
    sql = (f"SELECT {PROGRAM_SQL} AS program, r.run_id, MAX({time_sql('r')}) AS t FROM compile_records r"
           f" WHERE {present} AND {ok_sql('r')}{where} GROUP BY r.run_id, r.command, r.objective")
    times: dict[tuple[str, str], str] = {}
    with planned(conn, enable_sort="off"):
        for program, run, t in conn.execute(sa.text(sql), params):
            times[program, run] = max(t, times.get((program, run), t))
    return [(*pair, t) for pair, t in times.items()]


def _newest_runs(times) -> set[str]:
    """Of (program, run_id, t), each program's newest run: the newest time, then the
    greatest run id."""
    newest: dict[str, tuple[str, str]] = {}
    for program, run, t in times:
        if program not in newest or (t, run) > newest[program]:
            newest[program] = (t, run)
    return {run for _, run in newest.values()}


def _churn_keys(conn, where: str, params: dict, above: int) -> set[str]:
    """The keys of cold rows above row `above` compiled with a cache size limit in force."""
    # GROUP BY, not DISTINCT: SQLite walks the cache_key index for a DISTINCT that leads with it
    sql = (f"SELECT r.cache_key, r.jax_cache_settings FROM compile_records r WHERE r.id > :above"
           f" AND r.cache_state = '{COLD}' AND {_present(conn, 'r.cache_key')} AND r.jax_cache_settings LIKE :like{where}"
           " GROUP BY r.jax_cache_settings, r.cache_key")
    rows = conn.execute(sa.text(sql), params | {"above": above, "like": f'%"{MAX_SIZE}"%'}).all()
    return {key for key, settings in rows if max_size(settings) is not None}


def _since(conn, where: str, params: dict, kept: Kept) -> tuple[set[str], set[str], list[Finding], dict, str]:
    """The newest run of each program with new rows, the churn keys of the new rows, the
    previous run's health findings of programs and keys with nothing new, its evicted
    findings of keys with new rows, by key, and the newest time of an ok row in a run."""
    sql = (f"SELECT {PROGRAM_SQL} AS program, r.run_id, r.cache_key, MAX(CASE WHEN {ok_sql('r')}"
           f" THEN {time_sql('r')} END) AS t FROM compile_records r WHERE r.id > :above{where}"
           f" GROUP BY {PROGRAM_SQL}, r.run_id, r.cache_key")
    new = conn.execute(sa.text(sql), params | {"above": kept.upto}).mappings().all()
    programs = {r["program"] for r in new if r["run_id"] is not None}
    touched_keys = {r["cache_key"] for r in new if r["cache_key"] is not None}
    in_runs = [r for r in new if r["run_id"] is not None]
    before = kept.newest if kept.newest is not None else _newest_time(conn, where, params, kept.upto)
    times = _new_times(in_runs, before)
    if times is None:  # a program's new rows are not all newer than every older row: every run of it is read
        times = [t for t in _run_times(conn, where, params) if t[0] in programs]
    runs = _newest_runs(times)
    newest = max([before, *(r["t"] for r in in_runs if r["t"] is not None)])
    keys = _churn_keys(conn, where, params, kept.upto)
    earlier = _earlier(conn, kept.run_id)
    carried, redo = [], {}
    for f, row in earlier:
        touched = row["cache_key"] in touched_keys if f.verdict == EVICTED else row["program"] in programs
        if not touched:
            carried.append(f)
        elif f.verdict == EVICTED:
            keys.add(row["cache_key"])  # an entry with new rows: its churn counted again
            redo.setdefault(row["cache_key"], []).append(f)
    return runs, keys, carried, redo, newest


def _newest_time(conn, where: str, params: dict, upto: int) -> str:
    """The newest time of an ok row with a run id at or below row `upto` ('' for none): a
    scan, once, where the last check run kept none (one from before revision 0022)."""
    sql = (f"SELECT MAX({time_sql('r')}) FROM compile_records r WHERE r.id <= :upto AND {_present(conn, 'r.run_id')}"
           f" AND {ok_sql('r')}{where}")
    return conn.execute(sa.text(sql), params | {"upto": upto}).scalar() or ""


def _new_times(new: list, before: str) -> list[tuple] | None:
    """_run_times of the programs of the new rows (`new`: their program, run, key and
    newest ok time), from the new rows alone, where that is exact: each program's new rows
    hold a time newer than `before`, the newest of every older row in a run, so no older
    row is its newest run's (a run's older rows, or a run without new rows: reading those
    was 0.13 s of a daily check at 1M rows, 49,600 rows of runs a day long). Else None."""
    times: dict[tuple, str] = {}
    for r in new:
        pair = (r["program"], r["run_id"])
        if r["t"] is not None and (pair not in times or r["t"] > times[pair]):
            times[pair] = r["t"]
    newest: dict[str, str] = {}
    for (program, _), t in times.items():
        newest[program] = max(t, newest.get(program, t))
    if any(newest.get(r["program"], "") <= before for r in new):
        return None
    return [(*pair, t) for pair, t in times.items()]


def _earlier(conn, run_id: int) -> list[tuple[Finding, dict]]:
    import json

    kinds = ", ".join(f"'{k}'" for k in HEALTH_KINDS)
    sql = (f"SELECT v.verdict, v.row_id, v.facts, {PROGRAM_SQL} AS program, r.cache_key FROM verdicts v"
           f" JOIN compile_records r ON r.id = v.row_id WHERE v.check_run_id = :run AND v.verdict IN ({kinds})")
    return [(Finding.from_facts(r["verdict"], r["row_id"], json.loads(r["facts"])), dict(r))
            for r in conn.execute(sa.text(sql), {"run": run_id}).mappings().all() if r["facts"]]


def _rows_by(conn, column: str, values: set[str], where: str, params: dict, above: int = 0) -> dict[str, list[dict]]:
    """The ok rows above row `above` whose `column` is one of `values`, by value, oldest first."""
    out: dict[str, list[dict]] = {}
    cols = ", ".join(f"r.{c}" for c in _COLUMNS)
    sql = (f"SELECT {cols} FROM compile_records r WHERE r.{column} IN :among AND r.id > {int(above)}"
           f" AND {ok_sql('r')}{where} ORDER BY {oldest_first('r')}")
    for r in rows_in(conn, sql, "among", sorted(values), params):
        out.setdefault(r[column], []).append(r)
    return out


def _not_written(rows: list[dict], by_key: dict[str, list[dict]]) -> list[Finding]:
    """One run's rows: compiles of a process above 0, on another host than process 0 under
    the same cache dir path, that JAX did not write and that were cold with the same key in
    an earlier run too (no entry appeared). `by_key`: every row of their keys."""
    zero = {(r["cache_dir"], r["hostname"]) for r in rows if r["process_index"] == 0 and r["cache_dir"]}
    warm0 = {(r["cache_dir"], r["cache_key"]): r for r in rows if r["process_index"] == 0 and r["cache_state"] == WARM}
    lost: dict[tuple, list[dict]] = {}
    for r in _unwritten(rows):
        if any(d == r["cache_dir"] and h != r["hostname"] for d, h in zero) and any(
                e["run_id"] != r["run_id"] and e["cache_state"] == COLD and (e["hostname"], e["cache_dir"]) ==
                (r["hostname"], r["cache_dir"]) and (e["timestamp"] or "") <= (r["timestamp"] or "")
                for e in by_key.get(r["cache_key"], ())):
            lost.setdefault((r["process_index"], r["hostname"], r["cache_dir"]), []).append(r)
    return [_not_written_finding(key, found, warm0, rows) for key, found in lost.items()]


def _unwritten(rows: list[dict]) -> list[dict]:
    """A run's cold compiles that a process above 0 did not write (JAX said why)."""
    return [r for r in rows if (r["process_index"] or 0) > 0 and r["cache_state"] == COLD and r["cache_dir"]
            and r["cache_key"] and r["cache_not_persisted"] == NOT_PERSISTED_PROCESS_INDEX]


def _not_written_finding(key: tuple, found: list[dict], warm0: dict, run: list[dict]) -> Finding:
    index, host, cache_dir = key
    seen = [warm0[cache_dir, r["cache_key"]] for r in found if (cache_dir, r["cache_key"]) in warm0]
    facts = {"index": index, "host": host, "dir": cache_dir, "n": len(found),
             "seconds": sum(r["compile_s"] or 0 for r in found)}
    last = found[-1]
    if seen:
        cause = Cause(C_NOT_SHARED, facts | {"found": len(seen), "on": seen[-1]["hostname"], "warm_row": seen[-1]["id"]})
        return Finding(CACHE_NOT_WRITTEN, last["id"], cause, True, seen[-1]["id"], program_of(last), last["run_id"],
                       facts["seconds"])
    cause = Cause(C_OTHER_KEYS, facts | {"differ": _differing(found, run)})
    return Finding(CACHE_NOT_WRITTEN, last["id"], cause, False, None, program_of(last), last["run_id"],
                   facts["seconds"])


def _differing(found: list[dict], run: list[dict]) -> list[str]:
    """What process 0's key for the same function differs in (the key's components), if known."""
    what = ("function", "input_signature", "transform")
    zero = {tuple(r[f] for f in what): r for r in run if r["process_index"] == 0}
    names = set()
    for r in found:
        z = zero.get(tuple(r[f] for f in what))
        if z is not None and (c := compared(r, z)).code == C_COMPONENTS:
            names.update(c.facts["differ"])
    return sorted(names)


def _below_threshold(rows: list[dict], below_s: float) -> list[Finding]:
    """One run's compiles JAX did not write for taking less than its threshold."""
    under = [r for r in rows if r["cache_state"] == COLD and r["cache_not_persisted"] == NOT_PERSISTED_COMPILE_TIME]
    total = sum(r["compile_s"] or 0 for r in under)
    if not under or total <= below_s:
        return []
    limits = sorted({r["cache_min_compile_time_s"] for r in under if r["cache_min_compile_time_s"] is not None})
    compiled = sum(r["cache_state"] in (COLD, WARM) for r in rows)
    written = sum(r["cache_state"] == COLD and r["cache_not_persisted"] is None for r in rows)
    last = under[-1]
    cause = Cause(C_RUN_UNDER_THRESHOLD, {"n": len(under), "seconds": total, "limits": limits, "run": last["run_id"],
                                          "compiles": compiled, "written": written})
    return [Finding(BELOW_THRESHOLD, last["id"], cause, False, None, program_of(last), last["run_id"], total)]


def since_filter(conn, found: list[Finding], since: str | None) -> list[Finding]:
    """check --since: only the findings of rows at or after it."""
    if since is None:
        return found
    times = {i: r["timestamp"] or "" for i, r in fetch_rows(conn, [f.row_id for f in found]).items()}
    return [f for f in found if times[f.row_id] >= since]
