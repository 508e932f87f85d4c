"""The cache cells: each cache cell's summary, kept between checks (revision 0009).

What the cache findings read of a cell (the cell, jax version and cache dir:
record.CACHE_CELL) is its newest ok row and that row's state, its last warm row, its
first cold row and its cold count. Every one of those is a MAX, a MIN or a sum, so a
summary of the rows up to id N combined with one of the rows after N is the summary
of all of them. `ledger check` folds the rows that arrived since its last run into
cache_cells and reads the cells from there: a year of rows is grouped once, not at
every check.

Kept state can go stale; here it cannot go stale silently. Triggers on compile_records
(migrations/versions/0009_cache_cells.py) reset `upto` to 0 on anything that could
change a folded summary (a DELETE or UPDATE of a folded row, an INSERT at or below
`upto`, a TRUNCATE), and a changed cell definition does the same; at 0 the next fold
rebuilds from every row. tests/test_cache_cells.py holds the cells equal to a
from-scratch recompute after any sequence of writes, on both backends.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import sqlalchemy as sa

from ledger.filters import given
from ledger.record import CACHE_CELL, COLD, NONE, WARM
from ledger.rows import key_text, ok_sql, time_sql
from ledger.storage import cell_ids, models
from ledger.storage.aside import Aside, rows_of
from ledger.storage.batch import insert_rows, set_aside, update_rows
from ledger.storage.cell_ids import CELL_COLUMNS
from ledger.storage.engine import one_writer_at_a_time, planned, planner_settings
from ledger.storage.models import cache_cells, cache_cells_state, compile_records

_ID_PAD = 10**12  # ids as fixed-width text, so "timestamp<SEP>id" sorts as (timestamp, id)
# Below every character a time can hold: a time that is another's prefix ("...10:00:00" and
# "...10:00:00+00:00") sorts first in its stamp, as it does in rows.oldest_first. ("|" sorted
# it last: a cell's newest row could be the wrong one, and a lineage's read miss a row.)
SEP = "\x01"
# What the kept state was folded for: the cell's fields and the version of the cache passes.
# A check carries the previous run's findings of a lineage with nothing new (findings.Earlier)
# only where the fold was not reset since; so a ledger last checked by a build whose passes
# judged otherwise (or kept other cells) is folded anew, and none of its findings taken over.
# Bump the version with any change to what a cache pass finds.
CACHE_PASSES_VERSION = 6  # 5: a streak's pair read as whole rows, never-warm streaks keep their state; 6: SEP
_FIELDS = json.dumps({"cache_cell": CACHE_CELL, "passes": CACHE_PASSES_VERSION})


def stamp_sql(dialect: str, alias: str = "") -> str:
    """"timestamp<SEP>id" with the id at fixed width: its MAX is the newest row (rows.py's
    order, in one text). Compared byte by byte on every backend, as Python compares it."""
    sep = "chr(1)" if dialect == "postgresql" else "char(1)"
    stamp = f"{time_sql(alias)} || {sep} || CAST({_ID_PAD} + {alias + '.' if alias else ''}id AS TEXT)"
    return f"({stamp}) COLLATE \"C\"" if dialect == "postgresql" else stamp


def row_id(stamp: str | None) -> int | None:
    return None if stamp is None else int(stamp.rsplit(SEP, 1)[1]) - _ID_PAD


def stamp_time(stamp: str) -> str:
    """The time of a stamp (time_sql's: '' for a NULL timestamp)."""
    return stamp.rsplit(SEP, 1)[0]


@dataclass
class Group:
    """The ok rows of one cell, jax version and cache dir."""

    values: dict
    newest: str  # stamp of the newest row
    newest_state: str
    last_warm: str | None
    first_cold: str | None
    n_cold: int

    @property
    def has_dir(self) -> bool:
        return bool(self.values["cache_dir"])


# a summary: (newest "stamp|state", last_warm stamp, first_cold stamp, n_cold)
def summarize(conn, above: int = 0, upto: int | None = None) -> dict[str, tuple]:
    """Every cell's summary over the ok warm, cold and none rows with above < id <= upto:
    one GROUP BY pass, over each row's cell id (revision 0018), cache dir and state."""
    d = conn.dialect.name
    if d == "sqlite" and above == 0:
        # a sort of every ok row; SQLite's sorter can split it over worker threads
        conn.exec_driver_sql(_THREADS)
    with planned(conn, **_HASHED):
        found = conn.execute(sa.text(_summary_sql(d, upto)), {"above": above, "upto": upto}).all()
    return _keyed(conn, found)


_THREADS = f"PRAGMA threads = {min(8, os.cpu_count() or 1)}"
# hashed on PostgreSQL: every row sorted by cell and dir took 1.22 s at 1M rows, the hash 0.90 s
_HASHED = {"enable_sort": "off"}


def _summary_sql(d: str, upto: int | None) -> str:
    """A row per cell id, cache dir and state: its newest stamp, its oldest where cold, its
    count. Grouped by the state too, each row makes one stamp (two if cold), not three
    (the newest, the last warm, the first cold: at 1M rows on SQLite, 1.79 s against 1.27 s
    in one run); _keyed puts each cell's states together."""
    stamp = stamp_sql(d)
    bounds = " AND id > :above" + (" AND id <= :upto" if upto is not None else "")
    return (
        f"SELECT cell_id, cache_dir, cache_state, MAX({stamp}) AS newest,"
        f" MIN(CASE WHEN cache_state = '{COLD}' THEN {stamp} END) AS first_cold, COUNT(*) AS n"
        f" FROM compile_records WHERE {ok_sql()} AND cache_state IN ('{WARM}', '{COLD}', '{NONE}'){bounds}"
        " GROUP BY cell_id, cache_dir, cache_state"
    )


def _keyed(conn, found) -> dict[str, tuple]:
    """_summary_sql's rows as each cell's summary: (newest "stamp|state", last warm stamp,
    first cold stamp, cold count). A stamp ends in the row's id, so no two are equal."""
    summaries: dict[tuple, list] = {}
    # by position, not by name: a Row's named attribute costs as much as the rest of a cell's work here
    for cell, cache_dir, state, newest, first_cold, n in found:
        s = summaries.get((cell, cache_dir))
        if s is None:
            s = summaries[(cell, cache_dir)] = ["", None, None, 0, ""]  # the last is the newest's stamp alone
        if newest > s[4]:
            s[0], s[4] = f"{newest}|{state}", newest
        if state == WARM:
            s[1] = newest
        elif state == COLD:
            s[2], s[3] = first_cold, int(n)
    key = cell_keys(cell_values(conn, {cell for cell, _ in summaries}))
    return {key(cell, cache_dir): tuple(s[:4]) for (cell, cache_dir), s in summaries.items()}


def cell_keys(values: dict[int, dict]) -> Callable[[int, str | None], str]:
    """The key of a cache cell (cell id, cache dir): the canonical text of its values,
    key_text over CACHE_CELL, so equal cells give equal text. From the cells' `values`
    (cell_values), each cell's part made once: the dir is CACHE_CELL's last field, so the
    key's JSON is the cell's own with the dir's appended (a cell has rows under each of
    17 dirs, say)."""
    heads = {i: key_text(v, CELL_COLUMNS)[:-1] for i, v in values.items()}
    dirs: dict[str | None, str] = {}  # each dir's JSON made once too

    def key(cell_id: int, cache_dir: str | None) -> str:
        text = dirs.get(cache_dir)
        if text is None:
            text = dirs[cache_dir] = json.dumps(cache_dir)
        return f"{heads[cell_id]},{text}]"

    return key


def cell_values(conn, ids=None) -> dict[int, dict]:
    """{cell id: the cell's values} (ledger/storage/cell_ids.py), of the ids asked for, or
    of every cell (None), in one query: more than 500 ids are read as every cell (1,102 of
    1,218 cells at 1M rows: 0.01 s in three queries of 500, 0.005 s in one of every cell)."""
    select = sa.select(models.cells.c.id, *(models.cells.c[n] for n in CELL_COLUMNS))
    if ids is None or len(ids) > 500:
        found = conn.execute(select).mappings().all()
        if ids is not None:
            ids = set(ids)
            found = [r for r in found if r["id"] in ids]
    else:
        found = conn.execute(select.where(models.cells.c.id.in_(sorted(ids)))).mappings().all() if ids else []
    return {r["id"]: {n: r[n] for n in CELL_COLUMNS} for r in found}


def _combine(a: tuple, b: tuple) -> tuple:
    def pick(f, x, y):
        return y if x is None else x if y is None else f(x, y)

    return (max(a[0], b[0]), pick(max, a[1], b[1]), pick(min, a[2], b[2]), a[3] + b[3])


@dataclass
class Folded:
    """What a fold leaves: the `upto` it found (0 if reset: rows at or below it are as
    the last fold saw them), the new one, every cell's summary, and the summaries of
    the rows above `found` alone (the cells a new row touched)."""

    found: int
    upto: int
    cells: dict[str, tuple]
    new: dict[str, tuple] = field(default_factory=dict)


def fold(conn) -> Folded:
    """Bring cache_cells up to every row: fold in the rows above `upto`, or rebuild
    when it was reset (begin_fold, then its finish)."""
    return begin_fold(conn).finish()


def begin_fold(conn, aside: bool = False) -> Fold:
    """A fold of the rows up to MAX(id), begun in the caller's write transaction (a
    check's), which no other writer can interleave: SQLite's begins IMMEDIATE; on
    PostgreSQL the lock (engine.one_writer_at_a_time) waits for every open insert to
    commit, so no row can later appear below `upto`, and for any other check: two that
    held SHARE together deadlocked writing the same cells. A rebuild from every row of a
    big ledger is summed up meanwhile on a connection of its own (storage.aside), where
    the caller says (`aside`) that its transaction wrote nothing before, and this one
    gave no row its cell id: that connection sees only what is committed. finish()
    writes the cells."""
    one_writer_at_a_time(conn, "compile_records")
    given = cell_ids.assign(conn)  # a row INSERTed by hand has none yet (writers give theirs)
    state = conn.execute(sa.select(cache_cells_state.c.upto, cache_cells_state.c.cell_fields)
                         .where(cache_cells_state.c.id == 1)).first()
    upto = state.upto if state is not None and state.cell_fields == _FIELDS and _armed(conn) else 0
    top = conn.execute(sa.text("SELECT MAX(id) FROM compile_records")).scalar() or 0
    reader = None
    if aside and upto == 0 and not given and top >= ASIDE_ROWS:
        d = conn.dialect.name
        setup = (_THREADS,) if d == "sqlite" else planner_settings(d, **_HASHED)
        reader = Aside.start(conn, rows_of(_summary_sql(d, top), {"above": 0, "upto": top}, setup))
    return Fold(conn, upto, top, reader)


# A first check of a ledger with this many rows or more reads on connections of its own beside
# its own (storage.aside); below it a thread and a connection save nothing.
ASIDE_ROWS = 100_000


@dataclass
class Fold:
    """A fold begun: `found` is the `upto` it found (0: every row is summed up again), `top`
    the one it leaves; `reader`: a rebuild's read of every row on a connection of its own."""

    conn: sa.Connection
    found: int
    top: int
    reader: Aside | None = None

    def finish(self) -> Folded:
        conn, upto, top = self.conn, self.found, self.top
        if upto == 0:
            conn.execute(sa.delete(cache_cells))
        kept = stored(conn) if upto else {}
        new: dict[str, tuple] = {}
        if top > upto:
            new = _keyed(conn, self.reader.result()) if self.reader else summarize(conn, upto, top)
            merged = {k: _combine(kept[k], s) if k in kept else s for k, s in new.items()}
            update_rows(conn, cache_cells, "cell_key",
                        [{"cell_key": k, **_columns(s)} for k, s in merged.items() if k in kept])
            insert_rows(conn, cache_cells,
                        [{"cell_key": k, **_columns(s)} for k, s in merged.items() if k not in kept])
            kept |= merged
        conn.execute(sa.delete(cache_cells_state))
        conn.execute(sa.insert(cache_cells_state).values(id=1, upto=top, cell_fields=_FIELDS))
        if conn.dialect.name == "sqlite":
            _arm_sqlite_triggers(conn, top)
        return Folded(upto, top, kept, new)

    def cancel(self) -> None:
        """A fold the check gave up on (an error before finish): its summing stopped."""
        if self.reader:
            self.reader.cancel()


_RESET = "UPDATE cache_cells_state SET upto = 0 WHERE id = 1"
_TRIGGERS = ("cache_cells_on_insert", "cache_cells_on_update", "cache_cells_on_delete")


def _armed(conn) -> bool:
    """Whether every trigger is on compile_records. A SQLite migration that rebuilds the
    table (alembic's batch mode copies it into a new one) leaves it bare, and what was
    written then went unseen: the fold must rebuild."""
    if conn.dialect.name != "sqlite":
        return True
    found = {r[0] for r in conn.exec_driver_sql(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'compile_records'")}
    return found >= set(_TRIGGERS)


def _arm_sqlite_triggers(conn, upto: int) -> None:
    """The SQLite triggers (revision 0009) with `upto` written into their conditions: a
    comparison per imported row, not a query. PostgreSQL's statement triggers read it."""
    n = int(upto)
    whens = (f"AFTER INSERT ON compile_records WHEN NEW.id <= {n}",
             f"AFTER UPDATE ON compile_records WHEN OLD.id <= {n} OR NEW.id <= {n}",
             f"AFTER DELETE ON compile_records WHEN OLD.id <= {n}")
    for name, when in zip(_TRIGGERS, whens, strict=True):
        conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")
        conn.exec_driver_sql(f"CREATE TRIGGER {name} {when} BEGIN {_RESET}; END")


def _columns(s: tuple) -> dict:
    return {"newest": s[0], "last_warm": s[1], "first_cold": s[2], "n_cold": s[3]}


def stored(conn) -> dict[str, tuple]:
    """The cells as kept (for the check, after a fold; and for tests)."""
    return {r[0]: tuple(r[1:]) for r in conn.execute(sa.select(cache_cells)).all()}


def split_newest(newest: str) -> tuple[str, str]:
    """A summary's newest ("stamp|state") as (stamp, state)."""
    stamp, _, state = newest.rpartition("|")  # as newest_state reads it
    return stamp, state


def newest_state(summary: tuple) -> str:
    """The cache_state of a summary's newest row."""
    return summary[0].rpartition("|")[2]


def parsed(keys: list[str]) -> list[list]:
    """The values of many cells' keys (cell_keys' JSON text), in CACHE_CELL's order: one
    parse of them all (one json.loads a key was a tenth of a daily check at 17,000 cells)."""
    return json.loads(f"[{','.join(keys)}]")


def groups(summaries: dict[str, tuple], filters: dict | None, values: dict[str, list]) -> list[Group]:
    """The cells as Groups, those matching the filters (column = value; a NULL matches
    no filter, as in SQL). `values`: each key's values (parsed)."""
    wanted = given(filters)
    out = []
    for key, (newest, last_warm, first_cold, n_cold) in summaries.items():
        cell = dict(zip(CACHE_CELL, values[key], strict=True))
        if all(cell[k] == v for k, v in wanted.items()):
            out.append(Group(cell, *split_newest(newest), last_warm, first_cold, n_cold))
    return out


@contextmanager
def appending(conn, above: int):
    """A SQLite batch that only INSERTs rows with ids above `above` (MAX(id) when it
    began) and UPDATEs those rows, judged once for the whole batch instead of by the
    triggers row by row: what each trigger does for such a row is to reset `upto` if
    the row's id is at or below it, so the batch resets it if its lowest new id is.
    The triggers are dropped for the batch and created again, as they were, before the
    caller's transaction commits (SQLite's DDL is transactional: a batch that fails
    rolls back to the triggers it found). The caller's write transaction keeps every
    other writer out meanwhile. Their per-row evaluation was half of `ledger import`'s
    insert (bench/bench_import.py). PostgreSQL's statement triggers cost a batch
    nothing: there it yields at once."""
    if conn.dialect.name != "sqlite":
        yield
        return
    with set_aside(conn, "trigger", _TRIGGERS):
        yield
    written = sa.exists().where(compile_records.c.id > above)
    conn.execute(sa.update(cache_cells_state).values(upto=0)
                 .where(cache_cells_state.c.id == 1, cache_cells_state.c.upto > above, written))
