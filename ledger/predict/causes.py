"""Why a predicted compile will be cold, and what it will cost, from the ledger.

The nearest evidence is the cell's last warm row on this host, jax and cache dir (or,
before any warm row, its last cold row whose entry is still in the dir): the
cache-key components that differ from it are named as `ledger explain` names them
(ledger/watch/causes.cold_cause, the one definition). The expected cost is what a warm
compile of the cell would save (ledger/savings.py, the one definition): the median cold
compile_s of the cell on this host key, on a host not loaded, and how many rows it rests on.
"""

from __future__ import annotations

import os

import sqlalchemy as sa

from ledger import savings
from ledger.record import CACHE_CELL, COLD, WARM
from ledger.rows import newest_first, ok_sql
from ledger.watch.causes import C_COMPONENTS, C_PRUNED, C_SAME_KEY, SHOWN_BY, Cause, cold_cause, prunes_of
from ledger.watch.keys import same_as_sql

NO_WARM_ROW = "no entry, and no warm row for this cell"
EMPTY_DIR = "cache dir empty"


def last_row(conn, pred: dict, state: str) -> dict | None:
    """The newest ok row of ``state`` in the prediction's cache cell (host key, cell,
    cache dir)."""
    sql = (f"SELECT * FROM compile_records WHERE cache_state = :state AND {ok_sql()}"
           f" AND {same_as_sql(CACHE_CELL, conn.dialect.name)}"
           f" ORDER BY {newest_first()} LIMIT 1")
    params = {f: pred.get(f) for f in CACHE_CELL} | {"state": state}
    found = conn.execute(sa.text(sql), params).mappings().first()
    return dict(found) if found else None


def _entry_of(row: dict, pred: dict) -> str | None:
    """The path of ``row``'s entry in the prediction's cache dir, named as this JAX names
    entries (the predicted entry is its key plus JAX's suffix)."""
    key, suffix = row.get("cache_key"), pred["entry"][len(pred["cache_key"]):]
    return os.path.join(pred["cache_dir"], f"{key}{suffix}") if key else None


def nearest_row(conn, pred: dict) -> dict | None:
    """The cell's last warm row; without one, its last cold row whose entry is still in
    the dir (the compile that wrote what a warm run would have read)."""
    warm = last_row(conn, pred, WARM)
    if warm is not None:
        return warm
    cold = last_row(conn, pred, COLD)
    path = cold and _entry_of(cold, pred)
    return cold if path and os.path.isfile(path) else None


def expected_cost(conn, pred: dict) -> tuple[float | None, int]:
    """(median cold compile_s, n) of the cell on this host key, any cache dir, on hosts
    not loaded: the cold cost ledger/savings.py holds a warm compile against."""
    cell = savings.cell_of({f: pred.get(f) for f in savings.CELL})
    cost = savings.cold_costs(conn, {cell}).get(cell)
    return (cost.median, cost.n) if cost is not None else (None, 0)


def causes(conn, pred: dict) -> tuple[list[str], dict | None, Cause | None]:
    """The causes of a cold prediction (words, never empty), the warm row they rest on,
    and the cause against it (facts), as `ledger explain` names it."""
    warm = nearest_row(conn, pred)
    empty = pred.get("cache_entries") == 0
    found = [EMPTY_DIR] if empty else []
    if warm is None:
        return found or [NO_WARM_ROW], None, None
    # cache_files_before is left out: the dir's state is said above, in this command's words
    mine = {k: v for k, v in pred.items() if k != "cache_files_before"}
    cause = cold_cause(mine, warm, prunes_of(conn, [warm.get("cache_key")]).get(warm.get("cache_key"), []))
    if cause.code == C_PRUNED:
        return [cause.words()], warm, cause  # it says why the dir lacks the entry, emptied or not
    if cause.code == C_SAME_KEY and empty:
        return found, warm, cause
    return found + [cause.words()], warm, cause


def details(pred: dict, warm: dict | None, cause: Cause | None) -> list[str]:
    """The values behind a named component, where the rows carry them (XLA flags)."""
    if warm is None or cause is None or cause.code != C_COMPONENTS:
        return []
    out = []
    for name, column in SHOWN_BY.items():
        if name in cause.facts.get("differ", ()) and column in pred and (pred.get(column) or warm.get(column)):
            out.append(f"{column}: {warm.get(column) or '(none)'} -> {pred.get(column) or '(none)'}")
    return out
