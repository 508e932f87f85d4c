"""The cache findings of `ledger check`: which lineages to judge, their rows read once,
judged by ledger/watch/judge.py, and the previous check's findings carried where nothing
changed.

The kept cache cells (ledger/watch/cells.py: a row per cell, jax version and cache dir,
with its newest row and state, its last warm row and its cold count) say which lineages
can hold a finding: one with a cache cell whose newest row is cold, or whose newest row
has no cache dir after a warm one. Only those lineages' rows are read, through the index
on each row's cell id (revision 0018: ledger/storage/cell_ids.py), from where their
judgement starts (_start); a lineage with no row since the previous check keeps that
check's findings, as facts (verdicts.facts), unless a prune since could change its cause.
A lineage never warm anywhere has no warm row to start from: each of its jax's cold
streaks is carried as state (streaks.py, kept in its finding's facts), and only its rows
since the previous check are read (_never_warm).

A cell here is the comparability key without cache_state (record.STATELESS_KEY); a
lineage is that without jax_version, so a bump is seen as the same cell moving on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from operator import itemgetter

import sqlalchemy as sa

from ledger.filters import given
from ledger.record import COLD, NONE, NOT_PERSISTED_PROCESS_INDEX, STATELESS_KEY, WARM
from ledger.rows import key_values, ok_sql, oldest_first
from ledger.storage.in_lists import rows_in, with_lists
from ledger.watch import cells, streaks
from ledger.watch.causes import C_EMPTIED, C_EVICTED, C_KEY_CHANGED, C_PRUNED, C_SAME_KEY, fetch_rows
from ledger.watch.cells import Group
from ledger.watch.judge import COLUMNS, Evidence, Finding, judge, judged, newest_enough, streak_finding
from ledger.watch.keys import pin_key
from ledger.watch.kinds import HEALTH_KINDS, PINNED_KINDS

LINEAGE = tuple(f for f in STATELESS_KEY if f != "jax_version")
# Causes a `ledger cache prune` since the last check can change (same key -> pruned): a
# lineage holding one is judged again, whatever its rows.
_PRUNABLE = (C_SAME_KEY, C_EMPTIED, C_EVICTED, C_PRUNED, C_KEY_CHANGED)


def lineage_key(values) -> tuple:
    """A lineage's values as one key (rows.key_values: a tuple, not key_text's JSON, which
    cost a check a tenth of a second over 17,000 cells)."""
    return key_values(values, LINEAGE)


# a lineage's fields out of a cache cell's key (a tuple, as lineage_key gives)
_LINEAGE_IN_CELL = itemgetter(*(cells.CACHE_CELL.index(f) for f in LINEAGE))


def lineages_of(keys: list[str]) -> dict[str, tuple]:
    """Each cache cell's lineage (lineage_key) and its values, from its key text
    (cells.cell_keys): {key: (lineage, values)}."""
    return {k: (_LINEAGE_IN_CELL(v), v) for k, v in zip(keys, cells.parsed(keys), strict=True)}


def by_lineage(summaries: dict[str, tuple], parsed: dict[str, tuple],
               filters: dict | None) -> dict[tuple, list[Group]]:
    """The groups of each lineage a cell of which has a newest row that is not warm, from the
    cache cells' summaries (cells.fold) and their lineages_of: no other lineage can hold a
    finding (may_find)."""
    of: dict[tuple, list[str]] = {}
    for k, (lineage, _) in parsed.items():
        of.setdefault(lineage, []).append(k)
    out: dict[tuple, list[Group]] = {}
    for lineage, ks in of.items():
        if all(cells.newest_state(summaries[k]) == WARM for k in ks):
            continue
        found = cells.groups({k: summaries[k] for k in ks}, filters, {k: parsed[k][1] for k in ks})
        if found:
            out[lineage] = found
    return out


def may_find(groups: list[Group]) -> bool:
    """Whether a lineage's summaries leave room for a cache finding: a cache cell whose
    newest row is cold, or the lineage's newest row without a cache dir after a warm one."""
    if any(g.has_dir and g.newest_state == COLD for g in groups):
        return True
    newest = max(groups, key=lambda g: g.newest)
    return newest.newest_state == NONE and any(g.has_dir and g.last_warm for g in groups)


@dataclass
class Earlier:
    """The previous check run's cache findings, by lineage, where that run read the same
    rows up to its `upto` (the fold was not reset since) with the same filters and no
    --since (check._earlier); `touched`: the lineages with a row above `upto`."""

    upto: int
    found: dict[tuple, list[Finding]]
    touched: set  # lineage keys; {"*"}: every lineage


def earlier(conn, run_id: int, upto: int, touched: set[tuple]) -> Earlier:
    """Run `run_id`'s cache findings (from their facts); `touched`: the lineages of the
    cells with rows above `upto` (cells.fold's `new`)."""
    cols = ", ".join(f"r.{c}" for c in LINEAGE)
    others = ", ".join(f"'{k}'" for k in (*PINNED_KINDS, *HEALTH_KINDS))
    sql = (f"SELECT v.verdict, v.row_id, v.facts, {cols} FROM verdicts v JOIN compile_records r ON r.id = v.row_id"
           f" WHERE v.check_run_id = :run AND v.verdict NOT IN ({others})")
    found: dict[tuple, list[Finding]] = {}
    for r in conn.execute(sa.text(sql), {"run": run_id}).mappings().all():
        if not r["facts"]:
            return Earlier(upto, {}, {"*"})  # a run before facts were kept: judge every lineage
        found.setdefault(lineage_key(r), []).append(Finding.from_facts(r["verdict"], r["row_id"],
                                                                        json.loads(r["facts"])))
    return Earlier(upto, found, touched)


def _carried(kept: Earlier | None, lineage: tuple) -> list[Finding] | None:
    """The previous check's findings of a lineage, where they still stand; else None."""
    if kept is None or "*" in kept.touched or lineage in kept.touched:
        return None
    found = kept.found.get(lineage, [])
    if any(f.cause.code in _PRUNABLE for f in found):
        return None
    return found


def cache_findings(conn, summaries: dict[str, tuple], parsed: dict[str, tuple], filters: dict | None,
                   since: str | None, kept: Earlier | None = None) -> list[Finding]:
    """Every finding of the cache passes, oldest row first, from the cells' summaries and
    their lineages_of. `kept`: the previous run's findings, where they stand: a lineage
    with nothing new keeps its own."""
    found: list[Finding] = []
    wanted: dict[tuple, list[Group]] = {}
    for lineage, groups in by_lineage(summaries, parsed, filters).items():
        if not may_find(groups):
            continue
        carried = _carried(kept, lineage)
        if carried is not None:
            found += carried
        else:
            wanted[lineage] = groups
    if wanted:
        ev = Evidence(conn, later=True)
        jax_of = _cells_of(conn, set(wanted))
        mine = {lineage: list(cells_jax) for lineage, cells_jax in jax_of.items()}
        starts = {lineage: _start(groups) for lineage, groups in wanted.items()}
        # never warm anywhere: each jax's streak from its kept state and the rows since, where it can be
        never = {lineage: jax_of[lineage] for lineage, start in starts.items() if start is None}
        streaked = {lineage: {g.values["jax_version"] for g in wanted[lineage] if g.has_dir and g.n_cold}
                    for lineage in never}
        kept_never, whole = _never_warm(conn, kept if not given(filters) else None, never, streaked, ev)
        found += kept_never
        starts = {lineage: start for lineage, start in starts.items() if lineage not in never}
        for lineage, rows in _rows_by_cell(conn, mine, starts).items():
            warm_dirs = {(g.values["jax_version"], g.values["cache_dir"]) for g in wanted[lineage] if g.last_warm}
            if newest_enough(rows, warm_dirs):
                found += judge(rows, ev)
            else:
                whole[lineage] = mine[lineage]
        for rows in _rows_by_cell(conn, whole, dict.fromkeys(whole)).values():
            found += judge(rows, ev)
        ev.settle()
    if since is not None:
        times = {r["id"]: r["timestamp"] or "" for r in fetch_rows(conn, [f.row_id for f in found]).values()}
        found = [f for f in found if times[f.row_id] >= since]
    return sorted(found, key=lambda f: f.row_id)


def _never_warm(conn, kept: Earlier | None, never: dict[tuple, dict[int, str]], streaked: dict[tuple, set[str]],
                ev: Evidence) -> tuple[list[Finding], dict[tuple, list[int]]]:
    """The findings of lineages no cell of which was ever warm (`never`: each one's cells
    and their jax; `streaked`: the jax versions with a cold row in a cache dir), each
    jax's made from the state its previous check kept (streaks.py) and its cold rows
    since; and the cells whose rows are read whole, by lineage: all of them where no
    state was kept (a first check, facts from before states), else a jax's with no state
    (its previous check may not have judged it: a lineage is judged only where a cell's
    newest row leaves room for a finding), a new row older than the state's newest, or an
    older run the newest again."""
    found: list[Finding] = []
    states: dict[tuple, dict[str, Finding]] = {}
    for lineage in never:
        before = kept.found.get(lineage, []) if kept is not None and "*" not in kept.touched else None
        if before is not None and all("streak" in f.extra for f in before):
            states[lineage] = {f.extra["streak"]["jax"]: f for f in before}
    whole = {lineage: list(cells_jax) for lineage, cells_jax in never.items() if lineage not in states}
    if not states:
        return found, whole
    pending: dict[tuple[tuple, str], tuple[dict, list[dict]]] = {}
    new = _rows_by_cell(conn, {lineage: list(never[lineage]) for lineage in states}, dict.fromkeys(states),
                        above=kept.upto)
    for lineage, by_jax in states.items():
        colds: dict[str, list[dict]] = {}
        for r in judged(new[lineage]):
            if r["cache_dir"] and r["cache_state"] == COLD:
                colds.setdefault(r["jax_version"], []).append(r)
        for jax in by_jax.keys() | colds.keys() | streaked[lineage]:
            before, rows = by_jax.get(jax), colds.get(jax, [])
            if before is not None and not rows:  # its rows as they were: its finding made again from its state
                row = {"id": before.row_id, "run_id": before.run, "command": before.program}
                found.append(streak_finding(before.extra["streak"], ev, row))
            elif before is not None and streaks.place(rows[0]) > before.extra["streak"]["newest"]:
                pending[lineage, jax] = (before.extra["streak"], rows)
            else:
                whole.setdefault(lineage, []).extend(c for c, j in never[lineage].items() if j == jax)
    seen = _seen_runs(conn, pending, never, kept.upto)
    for (lineage, jax), (state, rows) in pending.items():
        state = streaks.fold(state, rows, seen.get((lineage, jax), set()))
        if state is None:
            whole.setdefault(lineage, []).extend(c for c, j in never[lineage].items() if j == jax)
        elif state["runs"] >= 2:
            found.append(streak_finding(state, ev, rows[-1]))
    return found, whole


def _seen_runs(conn, pending: dict[tuple[tuple, str], tuple[dict, list[dict]]], jax_of: dict[tuple, dict[int, str]],
               upto: int) -> dict[tuple[tuple, str], set[tuple]]:
    """For each streak, the runs of its new rows that had cold rows in it at or below
    `upto` (one query for all, through the index on run_id), as streaks.run_key."""
    runs = {r["run_id"] for _, rows in pending.values() for r in rows if r["run_id"] is not None}
    streak_of = {cell: (lineage, jax) for (lineage, jax) in pending for cell, j in jax_of[lineage].items() if j == jax}
    sql = (f"SELECT cell_id, run_id, phase FROM compile_records WHERE run_id IN :runs AND id <= :upto AND {ok_sql()}"
           f" AND cache_state = '{COLD}' AND cache_dir <> '' AND COALESCE(cache_not_persisted, '') <> :unwritten")
    seen: dict[tuple[tuple, str], set[tuple]] = {}
    for r in rows_in(conn, sql, "runs", sorted(runs), {"upto": upto, "unwritten": NOT_PERSISTED_PROCESS_INDEX}):
        if r["cell_id"] in streak_of:
            seen.setdefault(streak_of[r["cell_id"]], set()).add(("run", r["run_id"], r["phase"]))
    return seen


def lineage_rows(conn, wanted: dict[tuple, dict]) -> dict[tuple, list[dict]]:
    """The ok warm, cold and none rows of each lineage asked for (lineage text -> its
    values), oldest first, in one scan: each lineage column IN the values asked for,
    and each row kept only where its whole lineage was asked for. explain's way (one
    lineage, by its values): it writes nothing, so it cannot give a row inserted by hand
    its cell id as check does first; check reads by cell id (_rows_by_cell)."""
    if not wanted:
        return {}
    where, params = [], {}
    for f in LINEAGE:
        values = {v[f] for v in wanted.values()}
        known = sorted((x for x in values if x is not None), key=str)
        either = ([f"{f} IN :in_{f}"] if known else []) + ([f"{f} IS NULL"] if None in values else [])
        where.append(f"({' OR '.join(either)})")
        if known:
            params[f"in_{f}"] = known
    cols = ", ".join(dict.fromkeys((*LINEAGE, *COLUMNS)))
    sql = (f"SELECT {cols} FROM compile_records WHERE {ok_sql()} AND cache_state IN ('{WARM}', '{COLD}', '{NONE}')"
           f" AND {' AND '.join(where)} ORDER BY {oldest_first()}")
    stmt = with_lists(sql, *params)
    out: dict[tuple, list[dict]] = {k: [] for k in wanted}
    for r in conn.execute(stmt, params).mappings():
        lineage = lineage_key(r)
        if lineage in out:
            out[lineage].append(dict(r))
    return out


def _start(groups: list[Group]) -> str | None:
    """Where a lineage's judgement can start reading: the oldest of its cache cells' last
    warm rows (each pass looks back from the newest rows to a warm row, and no further)
    and of the first cold rows of a jax never warm in any of them (its cold streak is
    every cold row it has); None (every row) where no cell was ever warm.
    judge.newest_enough() tells whether the rows from there sufficed."""
    warm = [g for g in groups if g.has_dir and g.last_warm]
    if not warm:
        return None
    warm_jax = {g.values["jax_version"] for g in warm}
    never = [g.first_cold for g in groups if g.has_dir and g.first_cold and g.values["jax_version"] not in warm_jax]
    return min([g.last_warm for g in warm] + never)


def _cells_of(conn, lineages: set[tuple]) -> dict[tuple, dict[int, str]]:
    """The cell ids (revision 0018) of each lineage asked for, each with its jax version."""
    mine: dict[tuple, dict[int, str]] = {}
    for cell, values in cells.cell_values(conn).items():
        lineage = lineage_key(values)
        if lineage in lineages:
            mine.setdefault(lineage, {})[cell] = values["jax_version"]
    return mine


def _rows_by_cell(conn, mine: dict[tuple, list[int]], starts: dict[tuple, str | None],
                  above: int = 0) -> dict[tuple, list[dict]]:
    """lineage_rows for check, through the index on (cell_id, timestamp) (revisions 0018,
    0021): the rows of the cells (`mine`: _cells_of) of each lineage in `starts`, from its
    start (a stamp, cells.stamp_sql; None: every row) and above row `above`, oldest first,
    a few hundred cells a query."""
    out: dict[tuple, list[dict]] = {k: [] for k in starts}
    # a start at a NULL timestamp reads every row (a superset: the judge looks back no further than it needs)
    starts = {k: s if s is None or cells.stamp_time(s) else None for k, s in starts.items()}
    mine = {lineage: ids for lineage, ids in mine.items() if lineage in starts}
    lineage_of = {cell: lineage for lineage, ids in mine.items() for cell in ids}
    cols = tuple(dict.fromkeys(("cell_id", *COLUMNS)))
    for bounded in (False, True):
        part = [(lineage, ids) for lineage, ids in mine.items() if (starts[lineage] is not None) == bounded]
        for chunk in _chunks(part, 500):  # a lineage's cells in one query, so its rows stay in order
            for r in conn.execute(*_cells_sql(conn.dialect.name, chunk, starts, cols, above, bounded)).all():
                out[lineage_of[r[0]]].append(dict(zip(cols, r)))
    return out


def _cells_sql(dialect: str, chunk: list[tuple[tuple, list[int]]], starts: dict[tuple, str | None], cols: tuple,
               above: int, bounded: bool) -> tuple:
    """One query of _rows_by_cell: each cell (and its start, where `bounded`) a VALUES row
    joined through the index (an OR of one IN per lineage made PostgreSQL scan every row);
    the ids are the cells table's own integers, the starts bound. Where bounded, the
    start's time bounds the index range (every row at or after a stamp is at or after its
    time, cells.SEP) and the stamp itself the rows read from it."""
    values, params = [], {}
    for i, (lineage, ids) in enumerate(chunk):
        if bounded:
            params[f"s{i}"], params[f"t{i}"] = starts[lineage], cells.stamp_time(starts[lineage])
            values += [f"({int(c)}, CAST(:s{i} AS TEXT), CAST(:t{i} AS TEXT))" for c in ids]
        else:
            values += [f"({int(c)})" for c in ids]
    on = "r.cell_id = v.column1"
    if bounded:
        c = ' COLLATE "C"' if dialect == "postgresql" else ""  # as 0021 indexes it
        on += f" AND r.timestamp{c} >= v.column3 AND {cells.stamp_sql(dialect, 'r')} >= v.column2"
    above_sql = f" AND r.id > {int(above)}" if above else ""
    where = f"{on}{above_sql} AND {ok_sql('r')} AND r.cache_state IN ('{WARM}', '{COLD}', '{NONE}')"
    listed = ", ".join("r." + c for c in cols)
    if dialect == "postgresql":
        # each cell's rows through the index (LATERAL; OFFSET 0 keeps it from being folded into
        # a join): PostgreSQL's estimate of the ok rows is a few thousand, and it scanned the
        # whole table for a hash join instead (0.25 s of a daily check at 1M rows)
        rows = f"CROSS JOIN LATERAL (SELECT {listed} FROM compile_records r WHERE {where} OFFSET 0) r"
    else:
        rows = f"JOIN compile_records r ON {where}"
    sql = (f"SELECT {listed} FROM (VALUES {', '.join(values)}) v {rows}"
           f" ORDER BY {oldest_first('r')}")
    return sa.text(sql), params


def _chunks(lineages: list[tuple[tuple, list[int]]], size: int):
    chunk: list[tuple[tuple, list[int]]] = []
    cells = 0  # in the chunk: counted as it grows (summed at each lineage, 2,000 lineages took 0.15 s)
    for lineage in lineages:
        if chunk and cells + len(lineage[1]) > size:
            yield chunk
            chunk, cells = [], 0
        chunk.append(lineage)
        cells += len(lineage[1])
    if chunk:
        yield chunk


def rows_of_lineage(conn, row: dict) -> list[dict]:
    """One row's lineage, as the judge reads it (explain)."""
    text = lineage_key(row)
    return lineage_rows(conn, {text: {f: row[f] for f in LINEAGE}})[text]


def link_pin(pinned: dict, rows: dict, f: Finding) -> dict:
    """The pin of the warm key a finding is read against, if any: what it costs now."""
    warm = rows.get(f.versus_id)
    return pinned.get(pin_key(warm)) if warm else None
