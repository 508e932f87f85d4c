"""The cache findings of `ledger check`: what a cell's rows say about the cache itself,
whatever its pin says about speed.

The kept cache cells (ledger/watch/cells.py: a row per cell, jax version and cache
dir, with its newest row and state, its last warm row and its cold count) give Python
a few thousand summaries; each finding below is read from them, and only a finding's
own rows are fetched again.

- went-cold: a cache cell (cell + jax + cache dir) whose newest row is cold after a
  warm one. The cause is what differs from the last warm row (causes.diagnose).
- cache-off: a cell that was warm under a cache dir whose newest row has none at all.
  The commonest way the cache stops applying: a job script without
  JAX_COMPILATION_CACHE_DIR. Fails.
- cache-not-reused: a cell with 2 or more cold runs under a cache dir and never a warm
  one. Fails when the runs used different dirs (a per-job $TMPDIR), the same dir lost
  its entries, or the cache key changed each run; reported without failing when the
  entries were never written by design (a compile under the cache's thresholds).
- jax-changed: the first cold compile of a cell under a new jax after warm ones under
  the old: expected, said, never failing. Still cold on its second run under the new
  jax, it is a went-cold, its cause read as for cache-not-reused.

A cell here is the comparability key without cache_state (record.STATELESS_KEY); a
lineage is that without jax_version, so a bump is seen as the same cell moving on.
"""

from __future__ import annotations

import json
import re
from contextvars import ContextVar
from dataclasses import dataclass, field
from itertools import pairwise

import sqlalchemy as sa

from ledger.record import COLD, NONE, STATELESS_KEY, WARM
from ledger.rows import before_sql, describe_key, key_text, newest_first, ok_sql, oldest_first
from ledger.watch import cells
from ledger.watch.causes import (
    SAME_KEY,
    UNKNOWN_CAUSE,
    cause_text,
    diagnose,
    diagnose_pruned,
    fetch_rows,
)
from ledger.watch.cells import Group
from ledger.watch.cells import row_id as _id
from ledger.watch.keys import pin_key, same_as_sql, same_sql
from ledger.watch.kinds import CACHE_NOT_REUSED, CACHE_OFF, JAX_CHANGED, WENT_COLD

LINEAGE = tuple(f for f in STATELESS_KEY if f != "jax_version")


def by_lineage(summaries: dict[str, tuple], filters: dict | None) -> dict[tuple, list[Group]]:
    """Every cell's groups, by lineage, from the cache cells' summaries (cells.fold)."""
    out: dict[tuple, list[Group]] = {}
    for g in cells.groups(summaries, filters):
        out.setdefault(tuple(g.values[f] for f in LINEAGE), []).append(g)
    return out


@dataclass
class Finding:
    """One verdict to store: its row, the row it is read against, and why."""

    verdict: str
    row_id: int
    cause: str
    fails: bool
    versus_id: int | None = None  # the warm row whose key's pin the verdict links
    extra: dict = field(default_factory=dict)


def cache_findings(conn, summaries: dict[str, tuple], filters: dict | None, since: str | None,
                   earlier: Earlier | None = None) -> list[Finding]:
    """Every finding of the cache passes, oldest row first. `earlier`: the previous
    run's findings, where they stand (Earlier): what the passes read of the rows is
    taken from them and the rows since, not read again."""
    lineages = by_lineage(summaries, filters).values()
    reads = Reads(conn, earlier)
    reads.plan(lineages)
    token = _READS.set(reads)
    try:
        found: list[Finding] = []
        for groups in lineages:
            for cache_pass in PASSES:
                found += cache_pass(conn, groups)
    finally:
        _READS.reset(token)
    if since is not None:
        times = {r["id"]: r["timestamp"] or "" for r in fetch_rows(conn, [f.row_id for f in found]).values()}
        found = [f for f in found if times[f.row_id] >= since]
    return sorted(found, key=lambda f: f.row_id)


def _went_cold(conn, groups: list[Group]) -> list[Finding]:
    out = []
    for g in groups:
        if g.has_dir and g.newest_state == COLD and g.last_warm is not None:
            cold_id, warm_id = _id(g.newest), _id(g.last_warm)
            rows = fetch_rows(conn, [cold_id, warm_id])
            cause = f"{cause_text(diagnose_pruned(conn, rows[cold_id], rows[warm_id]))} (last warm row {warm_id})"
            out.append(Finding(WENT_COLD, cold_id, cause, True, warm_id))
    return out


def _off(groups: list[Group]) -> tuple[Group, Group] | None:
    """cache-off's question of a lineage: its newest row has no cache, and it was warm
    under a cache dir before: (the newest row's group, the group of the last warm row)."""
    newest = max(groups, key=lambda g: g.newest)
    warm = [g for g in groups if g.has_dir and g.last_warm is not None]
    if newest.newest_state != NONE or not warm:
        return None
    return newest, max(warm, key=lambda g: g.last_warm)


def _cache_off(conn, groups: list[Group]) -> list[Finding]:
    asked = _off(groups)
    if asked is None:
        return []
    newest, last = asked
    first_none = _first_none_after(conn, newest.values, last.last_warm)
    cache_dir = last.values["cache_dir"]
    cause = (f"no cache dir since row {first_none} (cache_state none); the cell was warm under cache dir"
             f" {cache_dir} (last warm row {_id(last.last_warm)})")
    return [Finding(CACHE_OFF, first_none, cause, True, _id(last.last_warm), {"old_cache_dir": cache_dir})]


def _first_none_after(conn, values: dict, stamp: str) -> int:
    """The first none row of the cell after the stamp: when the cache went off."""
    reads = _READS.get()
    if reads is not None and (_cell(values), stamp) in reads.first_none:
        return reads.first_none[_cell(values), stamp]
    same = same_as_sql(STATELESS_KEY, conn.dialect.name)
    row_stamp = cells.stamp_sql(conn.dialect.name)
    sql = (f"SELECT MIN({row_stamp}) FROM compile_records WHERE {ok_sql()} AND cache_state = '{NONE}'"
           f" AND {same} AND {row_stamp} > :stamp")
    return _id(conn.execute(sa.text(sql), {f: values[f] for f in STATELESS_KEY} | {"stamp": stamp}).scalar())


@dataclass
class NeverWarm:
    """One jax of a lineage never warm under any dir, cold under one: its groups, those
    with a cold row under a dir, its first cold row, and the other jax it was warm
    under before that (jax, last warm row), if any."""

    jax: str
    cell: list[Group]
    colds: list[Group]
    first: str
    was: tuple[str, int] | None

    @property
    def n_cold(self) -> int:
        return sum(g.n_cold for g in self.colds)

    @property
    def dirs(self) -> list[str]:
        return [g.values["cache_dir"] for g in sorted(self.colds, key=lambda g: g.first_cold)]


def _never_warm(groups: list[Group]) -> list[NeverWarm]:
    """cache-not-reused's and jax-changed's question of a lineage, one per jax."""
    by_jax: dict = {}
    for g in groups:
        by_jax.setdefault(g.values["jax_version"], []).append(g)
    out = []
    for jax, cell in by_jax.items():
        colds = [g for g in cell if g.has_dir and g.n_cold]
        if any(g.last_warm for g in cell) or not colds:
            continue
        first = min(g.first_cold for g in colds)
        before = [g for g in groups if g.values["jax_version"] != jax and g.last_warm and g.last_warm < first]
        old = max(before, key=lambda g: g.last_warm) if before else None
        was = (old.values["jax_version"], _id(old.last_warm)) if old is not None else None
        out.append(NeverWarm(jax, cell, colds, first, was))
    return out


def _by_jax(conn, groups: list[Group]) -> list[Finding]:
    """cache-not-reused and jax-changed: cells (one jax) never warm under any dir."""
    out = []
    reads = _READS.get()
    for nw in _never_warm(groups):
        kept = reads.kept_cold(nw) if reads is not None else _MISSING
        if kept is not _MISSING:
            found = kept
        else:
            rows = None
            if nw.n_cold >= 2:
                rows = reads.cold_rows(nw.cell[0].values) if reads is not None else None
                rows = rows if rows is not None else cold_rows(conn, nw.cell[0].values)
            found = _from_cold_rows(rows, nw)
        if found is not None:
            out.append(found)
    return out


def _from_cold_rows(rows: list[dict] | None, nw: NeverWarm) -> Finding | None:
    """The finding of a never-warm cell from its cold rows (None: it has one cold row)."""
    runs = runs_of(rows) if rows else 1
    if nw.was is not None and runs == 1:
        return _jax_changed(nw.was, nw.jax, _id(nw.first))
    if runs >= 2:
        return _not_reused(rows, nw.jax, nw.was)
    return None


def runs_of(colds: list[dict]) -> int:
    """How many runs the cold rows are: one run may compile a cell more than once (two
    processes of a recorded program, a retry), and that is one run that never reused
    the cache, not two. A run is a run id and phase (a probe's --cold-warm pair is two
    processes under one run id); a row without a run id is a run of its own."""
    return len({(r["run_id"], r["phase"]) if r["run_id"] is not None else r["id"] for r in colds})


def _jax_changed(old: tuple[str, int], jax: str, row_id: int) -> Finding:
    """The first cold row under a new jax; ``old``: the jax it was warm under, and the
    last warm row there."""
    was, warm_id = old
    cause = (f"jax {was} → {jax}: the first compile under the new jax is cold, as expected"
             f" (last warm row {warm_id} under jax {was})")
    return Finding(JAX_CHANGED, row_id, cause, False, warm_id, {"old_jax": was, "new_jax": jax})


def cold_rows(conn, values: dict) -> list[dict]:
    """The ok cold rows of one cell (all cache dirs), oldest first."""
    same = same_as_sql(STATELESS_KEY, conn.dialect.name)
    sql = (f"SELECT * FROM compile_records WHERE {ok_sql()} AND cache_state = '{COLD}' AND {same}"
           f" AND cache_dir IS NOT NULL AND cache_dir <> '' ORDER BY {oldest_first()}")
    return [dict(r) for r in conn.execute(sa.text(sql), {f: values[f] for f in STATELESS_KEY}).mappings()]


def _not_reused(colds: list[dict], jax: str, old: tuple[str, int] | None) -> Finding:
    cause, fails = not_reused_cause(colds)
    return _not_reused_finding(cause, fails, colds[-1]["id"], runs_of(colds), jax, old)


def _not_reused_finding(cause: str, fails: bool, newest: int, runs: int, jax: str,
                        old: tuple[str, int] | None) -> Finding:
    """A never-warm cell's finding from its cold runs' cause, on its newest cold row."""
    if old is None:
        return Finding(CACHE_NOT_REUSED, newest, cause, fails)
    # still cold on its second run under a new jax: an ordinary went-cold
    was, warm_id = old
    cause += f" (still cold after {runs} runs under jax {jax}; last warm row {warm_id} under jax {was})"
    return Finding(WENT_COLD, newest, cause, True, warm_id)


def _new_dirs_cause(runs: int, dirs: list[str]) -> str:
    return f"each run used a new directory: {runs} cold runs in {len(dirs)} distinct cache dirs ({', '.join(dirs)})"


def not_reused_cause(colds: list[dict]) -> tuple[str, bool]:
    """Why a cell's cold runs (2 or more, oldest first) never reused the cache, and
    whether that fails the check."""
    dirs = list(dict.fromkeys(r["cache_dir"] for r in colds))
    runs = runs_of(colds)
    if len(dirs) > 1:
        return _new_dirs_cause(runs, dirs), True
    by_design = _never_written(colds)
    if by_design:
        return (f"{runs} cold runs in {dirs[0]}, never warm: the entries were never written, by design:"
                f" {by_design}, so there is nothing to reuse"), False
    for a, b in pairwise(colds):
        wrote = a["cache_files_after"] is not None and a["cache_files_before"] is not None \
            and a["cache_files_after"] > a["cache_files_before"]
        if wrote and b["cache_files_before"] is not None and b["cache_files_before"] < a["cache_files_after"]:
            return (f"the same dir lost its entries: row {a['id']} left {a['cache_files_after']} entries in {dirs[0]},"
                    f" row {b['id']} found {b['cache_files_before']} before its compile"), True
    a, b = colds[-2], colds[-1]
    causes = diagnose(b, a)
    if causes in ([UNKNOWN_CAUSE], [SAME_KEY]):
        return f"{runs} cold runs in {dirs[0]}, never warm: {UNKNOWN_CAUSE} (the rows show no missing entry)", False
    return f"{runs} cold runs in {dirs[0]}: the cache key changed between rows {a['id']} and {b['id']}: {cause_text(causes)}", True


# What not_reused_cause (and runs_of, _never_written) reads of a cell's cold rows but its
# last two, which it diagnoses whole: the one scan reads these, not every column of each.
COLD_RUN_COLUMNS = ("id", "run_id", "phase", "cache_dir", "compile_s", "cache_files_before", "cache_files_after",
                    "cache_requests", "cache_misses", "cache_min_compile_time_s", "cache_min_entry_size_bytes")


def _never_written(colds: list[dict]) -> str | None:
    """What kept every run's entry out of the cache (the probe records the evidence:
    no entry added, JAX's own miss-written event silent, and the thresholds), or None."""
    for r in colds:
        unwritten = (r["cache_files_after"] is not None and r["cache_files_after"] == r["cache_files_before"]) \
            or (r["cache_requests"] and r["cache_misses"] == 0)
        if not unwritten:
            return None
    floors = {r["cache_min_compile_time_s"] for r in colds}
    times = [r["compile_s"] for r in colds]
    if len(floors) == 1 and None not in floors and None not in times and max(times) < min(floors):
        span = f"{min(times):.3g}" if min(times) == max(times) else f"{min(times):.3g}–{max(times):.3g}"
        return f"every compile ({span} s) was under jax_persistent_cache_min_compile_time_secs {floors.pop():g}"
    sizes = {r["cache_min_entry_size_bytes"] for r in colds}
    if len(sizes) == 1 and None not in sizes and sizes.pop() > 0:
        return f"every entry was under jax_persistent_cache_min_entry_size_bytes {colds[0]['cache_min_entry_size_bytes']}"
    return None


# -- what the passes read of the rows, read once per check ----------------------------
# Two reads of the rows are a cell's own: cache-off's first none row after the last warm
# one, and a never-warm cell's cold rows (cache-not-reused, jax-changed). Read cell by
# cell they were a scan of the table each, for every finding, at every check. A check
# now takes them from the previous run's findings where those still stand (the cell has
# no row since, or only none rows since: cache-off's first none row is the earlier one
# or one of those), and reads the rest in one scan for every cell (Reads.plan).

CACHE_KINDS = (WENT_COLD, CACHE_OFF, CACHE_NOT_REUSED, JAX_CHANGED)
_MISSING = object()  # no answer kept: read the rows


def _cell(values) -> str:
    """A cell's text over STATELESS_KEY: a cell at one jax version, across cache dirs."""
    return key_text(values, STATELESS_KEY)


@dataclass
class Earlier:
    """The previous check run's cache findings, by the cell of their row: (kind, row,
    cause). Taken only where that run read the same rows up to its `upto` (the fold was
    not reset since) with the same filters and no --since (check._earlier); `touched`:
    the cells with a row above `upto`."""

    upto: int
    found: dict[str, list[tuple[str, int, str]]]
    touched: set[str]


def earlier(conn, run_id: int, upto: int, new: dict[str, tuple]) -> Earlier:
    """Run `run_id`'s cache findings, and the cells of the summaries `new` (cells.fold's
    summaries of the rows above `upto`)."""
    cols = ", ".join(f"r.{c}" for c in STATELESS_KEY)
    kinds = ", ".join(f"'{k}'" for k in CACHE_KINDS)
    sql = (f"SELECT v.verdict, v.row_id, v.cause, {cols} FROM verdicts v JOIN compile_records r ON r.id = v.row_id"
           f" WHERE v.check_run_id = :run AND v.verdict IN ({kinds})")
    found: dict[str, list] = {}
    for r in conn.execute(sa.text(sql), {"run": run_id}).mappings():
        found.setdefault(_cell(r), []).append((r["verdict"], r["row_id"], r["cause"] or ""))
    # a cache cell's text is its cell's values and then its cache dir (record.CACHE_CELL)
    touched = {json.dumps(json.loads(k)[:-1], separators=(",", ":")) for k in new}
    return Earlier(upto, found, touched)


def _not_reused_fails(cause: str, dirs: list[str]) -> bool:
    """Whether a cache-not-reused with this cause (not_reused_cause's, over cold rows in
    `dirs`) fails: all but its two by-design forms, "N cold runs in DIR, never warm: ..."
    of one dir (the other one-dir forms are "N cold runs in DIR: ..." and "the same dir
    lost ...")."""
    return len(dirs) != 1 or re.match(rf"\d+ cold runs in {re.escape(dirs[0])}, never warm: ", cause) is None


class Reads:
    """The passes' reads of the rows in one check, answered before the passes run."""

    def __init__(self, conn, kept: Earlier | None):
        self.conn, self.kept = conn, kept
        self.first_none: dict[tuple[str, str], int | None] = {}  # (cell, last warm stamp) -> row
        self.colds: dict[str, list[dict]] = {}  # cell -> its cold rows under a dir, oldest first
        self.since: dict[str, list[dict]] = {}  # a touched cell -> its new ok none and cold rows, in row order
        self.stamps: dict[int, str] = {}  # earlier findings' rows: their stamps
        self.place: dict[int, int] = {}  # and their places in row order

    def plan(self, lineages) -> None:
        if self.kept is not None:
            self._read_since()
        nones, colds = {}, {}
        for groups in lineages:
            asked = _off(groups)
            if asked is not None:
                newest, last = asked
                key = (_cell(newest.values), last.last_warm)
                kept = self._kept_none(key, newest.values)
                if kept is None:
                    nones[key] = newest.values
                else:
                    self.first_none[key] = kept
            for nw in _never_warm(groups):
                if nw.n_cold >= 2 and self.kept_cold(nw) is _MISSING:
                    colds[_cell(nw.cell[0].values)] = nw.cell[0].values
        if nones or colds:
            self._scan(nones, colds)

    def cold_rows(self, values: dict) -> list[dict] | None:
        return self.colds.get(_cell(values))

    def _read_since(self) -> None:
        """The ok none and cold rows above `upto` of the touched cells with an earlier
        finding, and those findings' rows, in one read of the new rows, in row order."""
        wanted = self.kept.touched & self.kept.found.keys()
        if not wanted:
            return
        d = self.conn.dialect.name
        earlier_rows = [row for cell in wanted for _, row, _ in self.kept.found[cell]]
        sql = (f"SELECT *, {cells.stamp_sql(d)} AS ledger_stamp FROM compile_records WHERE (id > :upto AND {ok_sql()}"
               f" AND cache_state IN ('{NONE}', '{COLD}')) OR id IN :rows ORDER BY {oldest_first()}")
        stmt = sa.text(sql).bindparams(sa.bindparam("rows", expanding=True))
        for r in self.conn.execute(stmt, {"upto": self.kept.upto, "rows": earlier_rows}).mappings():
            if r["id"] <= self.kept.upto:
                self.stamps[r["id"]], self.place[r["id"]] = r["ledger_stamp"], len(self.place)
            elif (cell := _cell(r)) in wanted:
                self.since.setdefault(cell, []).append({**r, "place": len(self.place)})

    def _kept_none(self, key: tuple[str, str], values: dict) -> int | None:
        """cache-off's first none row, from the previous run's cache-off of the cell
        after the same last warm row (its cause names both): that row, or a none row
        since that comes before it."""
        cell, stamp = key
        offs = [(row, cause) for kind, row, cause in self.kept.found.get(cell, ()) if kind == CACHE_OFF] \
            if self.kept is not None else []
        if len(offs) != 1 or not offs[0][1].endswith(f" (last warm row {_id(stamp)})"):
            return None
        row = offs[0][0]
        if cell not in self.kept.touched:
            return row
        new = [r["ledger_stamp"] for r in self.since.get(cell, ()) if r["cache_state"] == NONE and r["ledger_stamp"] > stamp]
        return _id(min([self.stamps[row], *new]))

    def kept_cold(self, nw: NeverWarm):
        """A never-warm cell's finding (or None), from the previous run's where the
        cell has no row since; _MISSING where its cold rows must be read."""
        cell = _cell(nw.cell[0].values)
        if self.kept is None:
            return _MISSING
        mine = [f for f in self.kept.found.get(cell, ()) if f[0] in (JAX_CHANGED, CACHE_NOT_REUSED, WENT_COLD)]
        if len(mine) > 1:
            return _MISSING
        if cell in self.kept.touched:
            return self._new_runs(nw, mine[0]) if mine else _MISSING
        if not mine or mine[0][0] == JAX_CHANGED:
            return _from_cold_rows(None, nw)  # nothing, or a jax-changed: its cold rows are one run
        kind, row, cause = mine[0]
        if kind == CACHE_NOT_REUSED and nw.was is None:
            return Finding(CACHE_NOT_REUSED, row, cause, _not_reused_fails(cause, nw.dirs))
        still = rf" \(still cold after \d+ runs under jax {re.escape(str(nw.jax))}; last warm row"
        if kind == WENT_COLD and nw.was is not None and re.search(
                still + rf" {nw.was[1]} under jax {re.escape(str(nw.was[0]))}\)$", cause):
            return Finding(WENT_COLD, row, cause, True, nw.was[1])
        return _MISSING

    def _new_runs(self, nw: NeverWarm, found: tuple[str, int, str]):
        """A cell whose runs each used a new directory, with cold rows since: each of
        them a run of its own (no run id) after every earlier cold row. The earlier
        finding says how many runs there were and in which dirs; else _MISSING."""
        kind, row, cause = found
        new = [r for r in self.since.get(_cell(nw.cell[0].values), ()) if r["cache_state"] == COLD
               and r["cache_dir"]]
        counted = re.match(r"(?:each run used a new directory: )?(\d+) cold runs in ", cause)
        if (kind not in (CACHE_NOT_REUSED, WENT_COLD) or not new or counted is None or len(nw.dirs) < 2
                or any(r["run_id"] is not None or r["place"] <= self.place[row] for r in new)):
            return _MISSING
        added = list(dict.fromkeys(r["cache_dir"] for r in new))
        old = [g.values["cache_dir"] for g in sorted(nw.colds, key=lambda g: g.first_cold)
               if g.n_cold > sum(r["cache_dir"] == g.values["cache_dir"] for r in new)]
        runs = int(counted.group(1))
        said = _new_dirs_cause(runs, old) if len(old) > 1 else None
        if not old or (said is not None and not cause.startswith(said)) or (said is None and not re.match(
                rf"(\d+) cold runs in {re.escape(old[0])}[,:]", cause)):
            return _MISSING
        dirs = [*old, *(d for d in added if d not in old)]
        return _not_reused_finding(_new_dirs_cause(runs + len(new), dirs), True, new[-1]["id"], runs + len(new),
                                   nw.jax, nw.was)

    def _scan(self, nones: dict[tuple[str, str], dict], colds: dict[str, dict]) -> None:
        """The cold rows and first none rows asked for, of every cell, in one scan."""
        d = self.conn.dialect.name
        wanted = [*colds.values(), *nones.values()]
        where, params = [], {}
        for f in STATELESS_KEY:
            values = {v[f] for v in wanted}
            known = [x for x in values if x is not None]
            either = ([f"{f} IN :in_{f}"] if known else []) + ([f"{f} IS NULL"] if None in values else [])
            where.append(f"({' OR '.join(either)})")
            if known:
                params[f"in_{f}"] = known
        # a none row counts only after a last warm row: the earliest of those asked about
        states = ([f"(cache_state = '{COLD}' AND cache_dir IS NOT NULL AND cache_dir <> '')"] if colds else []) + (
            [f"(cache_state = '{NONE}' AND {cells.stamp_sql(d)} > :after)"] if nones else [])
        if nones:
            params["after"] = min(stamp for _, stamp in nones)
        sql = (f"SELECT id, cache_state, {cells.stamp_sql(d)} AS stamp, {', '.join(STATELESS_KEY)},"
               f" {', '.join(c for c in COLD_RUN_COLUMNS if c not in ('id', *STATELESS_KEY))}"
               f" FROM compile_records WHERE {ok_sql()} AND ({' OR '.join(states)}) AND {' AND '.join(where)}"
               f" ORDER BY {oldest_first()}")
        stmt = sa.text(sql).bindparams(*(sa.bindparam(k, expanding=True) for k in params if k.startswith("in_")))
        after: dict[str, list[str]] = {}
        for cell, stamp in nones:
            after.setdefault(cell, []).append(stamp)
        first: dict[tuple[str, str], str] = {}
        found: dict[str, list[dict]] = {cell: [] for cell in colds}
        for r in self.conn.execute(stmt, params).mappings():
            cell = _cell(r)
            if r["cache_state"] == COLD:
                if cell in found:
                    found[cell].append({c: r[c] for c in COLD_RUN_COLUMNS})
                continue
            for stamp in after.get(cell, ()):
                if r["stamp"] > stamp and ((cell, stamp) not in first or r["stamp"] < first[cell, stamp]):
                    first[cell, stamp] = r["stamp"]
        for key in nones:
            self.first_none[key] = _id(first.get(key))
        # whole rows for the last two of each cell (diagnose's), what not_reused_cause reads of the rest
        rows = fetch_rows(self.conn, [r["id"] for got in found.values() for r in got[-2:]])
        self.colds.update((cell, [*got[:-2], *(rows[r["id"]] for r in got[-2:])]) for cell, got in found.items())


_READS: ContextVar[Reads | None] = ContextVar("ledger_cache_reads", default=None)


def link_pin(pinned: dict, rows: dict, f: Finding) -> dict:
    """The pin of the warm key a finding is read against, if any: what it costs now."""
    warm = rows.get(f.versus_id)
    return pinned.get(pin_key(warm)) if warm else None


# The cache passes, each over one lineage's groups (a cell across its jax versions and
# cache dirs), in this order. A new cache finding kind is its Kind in kinds.py and its
# pass here. _by_jax finds three kinds: cache-not-reused, jax-changed, and the went-cold
# of a cell still cold on its second run under a new jax.
PASSES = [_went_cold, _cache_off, _by_jax]


# -- `ledger explain ROW`: the same causes for one row -----------------------------------

@dataclass
class Told:
    """An explanation that is not a went-cold diagnosis: its lines, as the CLI prints them."""

    text: list[str]

    def lines(self) -> list[str]:
        return self.text

    @property
    def cause(self) -> str | None:
        """What its "cause: " line names (a Diagnosis has the same property), if any."""
        return next((ln[len("cause: "):] for ln in self.text if ln.startswith("cause: ")), None)


def _last_warm(conn, row: dict, other_jax: bool) -> dict | None:
    """The newest warm ok row of the row's lineage under a cache dir, older than it;
    with `other_jax`, under another jax version only."""
    same = same_as_sql(LINEAGE, conn.dialect.name)
    older = before_sql("", ":ts", ":id")
    jax = f" AND NOT ({same_sql('jax_version', ':jax', conn.dialect.name)})" if other_jax else ""
    sql = (f"SELECT * FROM compile_records WHERE cache_state = '{WARM}' AND {ok_sql()} AND {same} AND {older}"
           f" AND cache_dir IS NOT NULL AND cache_dir <> ''{jax} ORDER BY {newest_first()} LIMIT 1")
    params = {f: row[f] for f in LINEAGE} | {"ts": row["timestamp"] or "", "id": row["id"], "jax": row["jax_version"]}
    found = conn.execute(sa.text(sql), params).mappings().first()
    return dict(found) if found else None


def _head(row: dict) -> list[str]:
    return [f"row {row['id']}: {row['cache_state']}, compile_s {row['compile_s']:.4g}, tag {row['tag']}, {row['timestamp']}",
            f"cell: {describe_key(row)}, cache dir {row['cache_dir'] or '(none)'}"]


def explain_none(conn, row: dict) -> Told:
    """A row without a cache dir: cache-off if its cell was warm under one before."""
    warm = _last_warm(conn, row, other_jax=False)
    if warm is None:
        return Told([*_head(row), ("no cache dir, and no earlier warm row of this cell: the persistent cache was"
                                   " not in play, and nothing shows it ever was")])
    return Told([*_head(row), (f"last warm row before it: row {warm['id']}, compile_s {warm['compile_s']:.4g},"
                               f" cache dir {warm['cache_dir']}, {warm['timestamp']}"),
                 (f"cause: {CACHE_OFF}: no cache dir on this compile; the cell was warm under cache dir"
                  f" {warm['cache_dir']} (last warm row {warm['id']})")])


def explain_first_cold(conn, row: dict) -> Told | None:
    """A cold row with no earlier warm row in its cache cell: a jax bump's first
    compile, or one of a cell's cold runs that never reuse the cache; None when it
    is simply the first compile into its cache dir. The finding is built by the same
    functions as check's (_jax_changed, _not_reused), so the two agree by construction."""
    colds = [r for r in cold_rows(conn, row) if (r["timestamp"] or "", r["id"]) <= (row["timestamp"] or "", row["id"])]
    # warm under another jax before the cell's *first* cold row, as check's _by_jax reads it:
    # a warm row of another jax between two cold runs of this one is not what this jax lost
    old = _last_warm(conn, colds[0] if colds else row, other_jax=True)
    was = (old["jax_version"], old["id"]) if old is not None else None
    if runs_of(colds) >= 2:
        f = _not_reused(colds, row["jax_version"], was)
        return Told([*_head(row), f"cause: {f.verdict}: {f.cause}",
                     "this fails the check" if f.fails else "this is reported and does not fail the check"])
    if was is not None:
        f = _jax_changed(was, row["jax_version"], row["id"])
        return Told([*_head(row), f"cause: {f.verdict}: {f.cause}"])
    return None