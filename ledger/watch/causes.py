"""The causes of a cold compile: what differs between a cold row and the last warm row
of its cell and cache dir, component by component of JAX's cache key. `ledger explain`
(explain.py), check's findings (findings.py) and `ledger predict` (ledger/predict/causes.py)
all name causes from here.
"""

from __future__ import annotations

import json

import sqlalchemy as sa

from ledger.record import CACHE_CELL, WARM
from ledger.rows import before_sql, newest_first, ok_sql
from ledger.watch.keys import same_as_sql

COMPUTATION = "computation"
UNKNOWN_CAUSE = "cause unknown"
EMPTY_DIR = "cache dir was empty before the compile"
PRECISION = "precision: jax_enable_x64 changed"
SAME_KEY = "same cache key as the warm row (its entry was removed or never written)"
# The columns that show a component's actual values, where the probe recorded them.
SHOWN_BY = {"XLA flags": "xla_flags", "jax_lib version": "jaxlib_version"}


def _components(row) -> dict | None:
    text = row.get("cache_key_components")
    if not text:
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) and parsed else None


def _computation(cold, warm) -> str:
    before, after = warm.get("program_fingerprint"), cold.get("program_fingerprint")
    if not before or not after:
        return COMPUTATION
    return f"{COMPUTATION} (program changed)" if before != after else f"{COMPUTATION} (same program, different hash)"


def _precision(cold, warm) -> list[str]:
    """x64 on one side and off on the other: float64 traced as float32 (or the reverse)
    is another program, whatever else differs; unknown on either side says nothing."""
    before, after = warm.get("x64"), cold.get("x64")
    if before is None or after is None or bool(before) == bool(after):
        return []
    return [f"{PRECISION} ({_on(before)} in the warm row, {_on(after)} now)"]


def _on(value) -> str:
    return "on" if value else "off"


def diagnose(cold: dict, warm: dict) -> list[str]:
    """The causes, from the evidence on both rows; never empty."""
    causes = _precision(cold, warm)
    if cold.get("cache_files_before") == 0:
        causes.append(EMPTY_DIR)
    a, b = _components(warm), _components(cold)
    if a is None or b is None:
        return causes or [UNKNOWN_CAUSE]
    for name in sorted(a.keys() | b.keys()):
        if a.get(name) != b.get(name):
            causes.append(_computation(cold, warm) if name == COMPUTATION else name)
    return causes or [SAME_KEY]


def cause_text(causes: list[str]) -> str:
    return "; ".join(causes)


def fetch_rows(conn, ids) -> dict[int, dict]:
    ids = sorted(set(ids))
    out = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        rows = conn.execute(sa.text("SELECT * FROM compile_records WHERE id IN :ids")
                            .bindparams(sa.bindparam("ids", expanding=True)), {"ids": chunk}).mappings()
        out.update((r["id"], dict(r)) for r in rows)
    return out


def last_warm_before(conn, row: dict) -> dict | None:
    """The newest warm ok row of the row's cell and cache dir that is older than it."""
    same = same_as_sql(CACHE_CELL, conn.dialect.name)
    older = before_sql("", ":ts", ":id")
    sql = (f"SELECT * FROM compile_records WHERE cache_state = '{WARM}' AND {ok_sql()} AND {same} AND {older}"
           f" ORDER BY {newest_first()} LIMIT 1")
    params = {f: row[f] for f in CACHE_CELL} | {"ts": row["timestamp"] or "", "id": row["id"]}
    found = conn.execute(sa.text(sql), params).mappings().first()
    return dict(found) if found else None
