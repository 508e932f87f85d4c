"""The comparability key and the loaded-host rule, as the watch features use them.

The key's fields are defined once in ledger/record.py; this module turns them into
what pins, check and the report (ledger/report) need: a canonical text for one key and
SQL for the columns and for the loaded-host test, so the whole ledger is grouped
by the database, not in Python.
"""

from __future__ import annotations

from ledger.record import COMPARABILITY_KEY, STATELESS_KEY
from ledger.rows import key_text


def pinned_rows_sql(dialect: str, new_only: bool = False) -> str:
    """FROM compile_records r joined to the pin p of its comparability key, through the
    row's cell id (revision 0018): pins meet the cells table's rows (thousands) on the
    key's columns, and the rows meet those on one integer and their cache state; rows
    without a cell id are none here (`ledger check` gives every row its cell first).
    Joining every row to the pins on 14 columns was most of a first check on PostgreSQL
    (9 s at 1M rows), and on SQLite 1.5-2.5 s, where this takes 0.93-1.07 s.

    On SQLite the pins' cells are made first (LIMIT -1 keeps the planner from folding the
    subquery into the join, which read each cell's rows through the cell index out of
    order: 145-190 s at 1M rows), and CROSS JOIN keeps compile_records the outer loop,
    read in id order, each row finding its pin in an index SQLite builds on the few
    thousand (cell, state) pairs.

    `new_only`: only the rows with :above < id <= :top are wanted (a daily check). On
    PostgreSQL they are read once, by their ids, before the join (OFFSET 0 keeps the
    planner from folding the subquery into it): the statistics of a table that has just
    grown say that range is small, and the planner took its rows again for each of the
    900 pins through a bitmap of the whole range (0.53 s of a 2.1 s daily check at 1M rows;
    read first, tens of milliseconds)."""
    cell = key_join_sql("c", "pk", dialect, STATELESS_KEY)
    if dialect != "postgresql":
        return (f"compile_records r CROSS JOIN (SELECT pk.id AS pin_id, c.id AS cell_id, pk.cache_state AS state"
                f" FROM pins pk JOIN cells c ON {cell} LIMIT -1) pc"
                f" ON pc.cell_id = r.cell_id AND pc.state IS r.cache_state JOIN pins p ON p.id = pc.pin_id")
    rows = ("(SELECT * FROM compile_records WHERE id > :above AND id <= :top OFFSET 0) r" if new_only
            else "compile_records r")
    return (f"{rows} JOIN (SELECT pk.id AS pin_id, c.id AS cell_id FROM pins pk JOIN cells c ON {cell}) pc"
            f" ON pc.cell_id = r.cell_id JOIN pins p ON p.id = pc.pin_id"
            f" AND {same_sql('r.cache_state', 'p.cache_state', dialect)}")


def pin_key(row) -> str:
    """Canonical text of a row's comparability key: what pins.pin_key holds."""
    return key_text(row, COMPARABILITY_KEY)


def key_columns_sql(alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + name for name in COMPARABILITY_KEY)


def same_sql(a: str, b: str, dialect: str) -> str:
    """a equals b, NULL equal to NULL (legacy rows leave key columns NULL)."""
    return f"{a} IS {b}" if dialect == "sqlite" else f"{a} IS NOT DISTINCT FROM {b}"


def same_as_sql(fields, dialect: str) -> str:
    """The row has the given values of `fields` (parameters named as the fields), NULL
    matching NULL: "the same key" or "the same cell" as a row, by the fields named."""
    return " AND ".join(same_sql(f, f":{f}", dialect) for f in fields)


def key_join_sql(a: str, b: str, dialect: str, fields=COMPARABILITY_KEY) -> str:
    """Rows `a` and `b` have the same comparability key (or `fields`), as a join condition.

    On PostgreSQL IS NOT DISTINCT FROM cannot drive a hash join: a million rows
    against a thousand pins became a nested loop of a billion comparisons (90 s). So
    each column also gets an equality of its text with NULL read as '' (a superset:
    NULL and '' meet there), which the planner hashes, and the exact test filters what
    it lets through. SQLite builds an index on the pins for IS by itself."""
    same = " AND ".join(same_sql(f"{a}.{f}", f"{b}.{f}", dialect) for f in fields)
    if dialect != "postgresql":
        return same
    hashable = " AND ".join(f"COALESCE(CAST({a}.{f} AS TEXT), '') = COALESCE(CAST({b}.{f} AS TEXT), '')"
                            for f in fields)
    return f"{hashable} AND {same}"


# -- the loaded-host rule -------------------------------------------------------------
# A host is loaded when its 1-minute load average exceeds the cores the probe could
# use: the CPU affinity where recorded, else the CPU count. XLA compiles on the host
# cores, and load alone has moved one compile 7x. A row with no load or no core count
# (every legacy row) is not called loaded: nothing shows it was. Pins leave such rows
# out, check calls them inconclusive, the report marks them.
def _cores_sql(p: str) -> str:
    return f"COALESCE({p}host_cpu_affinity, {p}host_cpu_count)"


def loaded_sql(alias: str = "") -> str:
    """True (never NULL, so NOT works) for a row measured on a loaded host."""
    p = f"{alias}." if alias else ""
    return (f"({p}host_load_avg_1m IS NOT NULL AND {_cores_sql(p)} IS NOT NULL"
            f" AND {p}host_load_avg_1m > {_cores_sql(p)})")


def loaded_cause_sql(alias: str = "") -> str:
    """Why a loaded row was not judged, as text."""
    p = f"{alias}." if alias else ""
    return (f"'loaded host: 1-minute load ' || CAST({p}host_load_avg_1m AS TEXT)"
            f" || ' > ' || CAST({_cores_sql(p)} AS TEXT) || ' usable cores'")


LOADED_SQL = loaded_sql()
