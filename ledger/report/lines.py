"""What the report shows, read from the ledger: one line per cell and transform within
each host key, and the points the HTML charts draw.

A compile time compares only within one comparability key, so the report never
ranks across keys: each (hardware, hostname, jax_version, mixed_precision) gets its
own heading and table, and a line of a table is one cell and transform, with its
newest warm and cold row side by side (the cold/warm speed-up is the cache's win
within that key), its pin and the newest verdict the check stored for it.

The database does the work: one window pass picks the newest warm and cold row of
every key (the table read once), so Python only sees one row per key, plus the pins
and the newest verdict per cell (small tables). Nothing here reads the current
time: the README block (readme_block.py) must be the same text for the same ledger.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.filters import filter_sql
from ledger.record import CELL_FIELDS, COLD, HOST_KEY_FIELDS, SHAPE_FIELDS, STATELESS_KEY, WARM
from ledger.rows import key_values, newest_first, not_eager_sql, ok_sql, oldest_first
from ledger.storage.cell_ids import all_assigned
from ledger.storage.in_lists import with_lists
from ledger.watch import kinds
from ledger.watch.keys import LOADED_SQL

# The host part of the key a table stands for; cache_state is not in it because a
# table line shows warm and cold side by side (each is its own key, never pooled).
HOST = tuple(f for f in HOST_KEY_FIELDS if f != "cache_state")
GROUP = STATELESS_KEY  # HOST, then the cell
assert GROUP == (*HOST, *CELL_FIELDS)
# Within one check run a cell may get several verdicts: the worst one speaks for it
# (a cache that stopped applying before a slow warm compile, a note before an ok), by
# each kind's severity (ledger/watch/kinds.py); the charts mark the kinds marked there.
# Newest first by partition of GROUP and cache_state; a NULL timestamp is the oldest.
_NEWEST = ", ".join((*GROUP, "cache_state"))


def _ranked(by_id: bool) -> str:
    """Each row's rank within its cell and cache_state, newest first. Where every row has
    its cell id (cell_ids.all_assigned) the window partitions by it: sorting 61k rows by one integer
    instead of thirteen columns halves the window (cache_state first: with cell_id first,
    SQLite walks the cell_id index and looks up every row instead of sorting)."""
    partition = "cache_state, cell_id" if by_id else _NEWEST
    return f"ROW_NUMBER() OVER (PARTITION BY {partition} ORDER BY {newest_first()}) AS rn"


@dataclass
class Line:
    """One table line: one cell and transform within one host key."""

    host: tuple
    cell: tuple  # dataset_class, model_type, instrument, transform
    warm: dict | None = None  # {id, compile_s, tag, timestamp, loaded}
    cold: dict | None = None
    pin: dict | None = None  # {id, row_id, compile_s, tag, timestamp, loaded}
    verdict: str | None = None
    # the batch shape is part of the cell; shown where a table has two shapes of one
    # cell and transform (else every legacy line would read n_batch 1, batch_size 1)
    show_shape: bool = False

    @property
    def shape(self) -> tuple:
        return self.cell[len(CELL_FIELDS) - len(SHAPE_FIELDS):]

    @property
    def source(self) -> dict | None:
        """The newest row shown on the line (warm or cold): what was measured last."""
        rows = [r for r in (self.warm, self.cold) if r is not None]
        return max(rows, key=lambda r: (r["timestamp"] or "", r["id"])) if rows else None

    @property
    def loaded(self) -> bool:
        """Whether a number on the line was measured on a loaded host."""
        return any(r is not None and r["loaded"] for r in (self.warm, self.cold, self.pin))


def _shown_sql(where: str) -> str:
    """The rows a report shows: ok warm and cold compiles (none and unknown rows sit
    on neither side of the cache's line, and a failed row has no compile time)."""
    return (f"r.cache_state IN ('{WARM}', '{COLD}') AND {ok_sql('r')} AND r.compile_s IS NOT NULL"
            f" AND {not_eager_sql('r')}{where}")


def _newest_rows_sql(where: str, ranked: str) -> str:
    # the window ranks ids only and the newest rows are read after it by id: carrying every
    # shown column through the window's sort was a third of its time at 250k rows
    cols = ", ".join(f"r.{c}" for c in (*GROUP, "cache_state", "id", "compile_s", "tag", "timestamp"))
    return (
        f"SELECT {cols}, CASE WHEN {LOADED_SQL} THEN 1 ELSE 0 END AS loaded FROM compile_records r JOIN ("
        f" SELECT id FROM (SELECT r.id, {ranked} FROM compile_records r WHERE {_shown_sql(where)}) ranked"
        " WHERE rn = 1) newest ON newest.id = r.id"
    )


def _verdicts_sql(where: str) -> str:
    cols = ", ".join(f"r.{c}" for c in GROUP)
    return (
        f"SELECT {', '.join(GROUP)}, verdict FROM ("
        f" SELECT {cols}, v.verdict, ROW_NUMBER() OVER (PARTITION BY {cols}"
        f"  ORDER BY v.check_run_id DESC, {kinds.severity_sql()} DESC, v.id DESC) AS rn"
        f" FROM verdicts v JOIN compile_records r ON r.id = v.row_id WHERE 1 = 1{where}"
        ") newest WHERE rn = 1"
    )


def collect(conn, filters: dict | None = None) -> list[Line]:
    """The report's lines, in report order (host key, then cell, then transform)."""
    import sqlalchemy as sa

    where, params = filter_sql(filters, "r")
    lines: dict[tuple, Line] = {}

    def line(row) -> Line:
        key = key_values(row, GROUP)
        if key not in lines:
            lines[key] = Line(host=key[: len(HOST)], cell=key[len(HOST):])
        return lines[key]

    for row in conn.execute(sa.text(_newest_rows_sql(where, _ranked(all_assigned(conn)))), params).mappings():
        shown = {k: row[k] for k in ("id", "compile_s", "tag", "timestamp")} | {"loaded": bool(row["loaded"])}
        setattr(line(row), "warm" if row["cache_state"] == WARM else "cold", shown)
    cols = ", ".join(f"r.{c}" for c in GROUP)
    pin_sql = (f"SELECT {cols}, r.id, r.row_id, r.compile_s, r.tag, r.timestamp, r.loaded_host FROM pins r"
               f" LEFT JOIN compile_records c ON c.id = r.row_id"
               f" WHERE r.cache_state = '{WARM}' AND {not_eager_sql('c')}{where}")
    for row in conn.execute(sa.text(pin_sql), params).mappings():
        line(row).pin = {k: row[k] for k in ("id", "row_id", "compile_s", "tag", "timestamp")} | {
            "loaded": bool(row["loaded_host"])}
    for row in conn.execute(sa.text(_verdicts_sql(where)), params).mappings():
        key = key_values(row, GROUP)
        if key in lines:  # a verdict about a cell with nothing left to show stays out
            lines[key].verdict = row["verdict"]
    _mark_shapes(lines.values())
    return [lines[k] for k in sorted(lines, key=_sort_key)]


def _mark_shapes(lines) -> None:
    seen: dict[tuple, list[Line]] = {}
    for ln in lines:
        seen.setdefault((ln.host, ln.cell[: len(CELL_FIELDS) - len(SHAPE_FIELDS)]), []).append(ln)
    for same in seen.values():
        if len(same) > 1:
            for ln in same:
                ln.show_shape = True


def _sort_key(key: tuple) -> tuple:
    return tuple((v is None, v if v is not None else "") for v in key)


def group_by_host(lines: list[Line]) -> list[tuple[tuple, list[Line]]]:
    groups: dict[tuple, list[Line]] = {}
    for ln in lines:
        groups.setdefault(ln.host, []).append(ln)
    return list(groups.items())


def build(engine, filters: dict | None = None) -> list[Line]:
    with engine.connect() as conn:
        return collect(conn, filters)


# -- what the charts draw (the HTML report) ------------------------------------------------
def series(conn, filters: dict | None = None, per_key: int = 200,
           only: list[Line] | None = None) -> dict[tuple, list[dict]]:
    """The newest `per_key` warm and cold ok rows of each key, oldest first, by line
    key (host + cell), each with the verdict a check marked it with (regression or
    went-cold), if any. A chart of a million points says no more than 200 per key.
    ``only``: the lines a chart draws; the window then sorts their transforms' and
    functions' rows only, not the whole table, and where every row has its cell id, finds
    them through its index (their cells' ids read from `cells`) instead of a scan."""
    where, params = filter_sql(filters, "r")
    by_id = all_assigned(conn)
    if only is not None:
        at = len(HOST) + CELL_FIELDS.index("transform"), len(HOST) + CELL_FIELDS.index("function")
        transforms = sorted({(ln.host + ln.cell)[at[0]] for ln in only} - {None}) or [""]
        functions = sorted({(ln.host + ln.cell)[at[1]] for ln in only} - {None}) or [""]
        where += f" AND r.cell_id IN (SELECT id FROM cells c WHERE {_drawn('c')})" if by_id else f" AND {_drawn('r')}"
        params = {**params, "s_transforms": transforms, "s_functions": functions}
    marks = ", ".join(f"'{v}'" for v in kinds.marked())
    # as in collect: the window ranks ids, the rows it keeps are read after it by id
    cols = ", ".join(f"r.{c}" for c in (*GROUP, "cache_state", "id", "compile_s", "timestamp"))
    sql = (
        f"SELECT {cols}, m.mark FROM compile_records r JOIN ("
        f" SELECT id FROM (SELECT r.id, {_ranked(by_id)} FROM compile_records r WHERE {_shown_sql(where)}) ranked"
        f" WHERE rn <= {int(per_key)}) newest ON newest.id = r.id"
        " LEFT JOIN (SELECT row_id, max(verdict) AS mark FROM verdicts"
        f"  WHERE verdict IN ({marks}) GROUP BY row_id) m ON m.row_id = r.id ORDER BY {oldest_first('r')}"
    )
    stmt = with_lists(sql, "s_transforms", "s_functions")
    out: dict[tuple, list[dict]] = {}
    for row in conn.execute(stmt, params).mappings():
        out.setdefault(key_values(row, GROUP), []).append(
            {k: row[k] for k in ("cache_state", "id", "compile_s", "timestamp", "mark")})
    return out


def _drawn(alias: str) -> str:
    """The rows (or cells) of the transforms and functions series() is asked to chart."""
    return (f"{alias}.transform IN :s_transforms"
            f" AND ({alias}.function IS NULL OR {alias}.function IN :s_functions)")
