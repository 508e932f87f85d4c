"""Why a compile went cold: the evidence of a cold row against its cell's last warm row.

A probe records the hash of each component of JAX's cache key (computation, jaxlib
version, XLA flags, compile options, ...), the program's fingerprint, and the number
of entries in the cache dir before the compile. A cold row after a warm one of the
same cell and cache dir is explained by what differs between the two. Legacy rows
carry none of that, and then the honest answer is "cause unknown".
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import sqlalchemy as sa

from ledger.errors import LedgerError
from ledger.record import CACHE_CELL, COLD, NONE, WARM
from ledger.watch.keys import same_sql
from ledger.watch.pins import NEWEST_FIRST, describe_key, ok_sql

# The largest id either backend stores (SQLite's INTEGER, a 64-bit signed integer).
MAX_ID = 2**63 - 1

# A cache cell: the comparability key without cache_state, plus the cache dir. A
# warm row and a cold row compare only within one of these.

COMPUTATION = "computation"
UNKNOWN_CAUSE = "cause unknown"
EMPTY_DIR = "cache dir was empty before the compile"
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


def diagnose(cold: dict, warm: dict) -> list[str]:
    """The causes, from the evidence on both rows; never empty."""
    causes = []
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
    same = " AND ".join(same_sql(f, f":{f}", conn.dialect.name) for f in CACHE_CELL)
    older = "(COALESCE(timestamp, '') < :ts OR (COALESCE(timestamp, '') = :ts AND id < :id))"
    sql = (f"SELECT * FROM compile_records WHERE cache_state = '{WARM}' AND {ok_sql()} AND {same} AND {older}"
           f" ORDER BY {NEWEST_FIRST.format(p='')} LIMIT 1")
    params = {f: row[f] for f in CACHE_CELL} | {"ts": row["timestamp"] or "", "id": row["id"]}
    found = conn.execute(sa.text(sql), params).mappings().first()
    return dict(found) if found else None


@dataclass
class Diagnosis:
    cold: dict
    warm: dict | None
    causes: list[str]

    @property
    def cause(self) -> str:
        return cause_text(self.causes)

    def lines(self) -> list[str]:
        c = self.cold
        out = [f"row {c['id']}: cold, {_timing(c)}",
               f"cell: {describe_key(c)}, cache dir {c['cache_dir'] or '(none)'}"]
        if self.warm is None:
            out.append("no earlier warm row of this cell and cache dir: nothing to compare with "
                       "(the first compile into a cache dir is cold)")
            return out
        out.append(f"last warm row before it: row {self.warm['id']}, {_timing(self.warm)}")
        out.append(f"cause: {self.cause}")
        out.extend(_details(self.cold, self.warm, self.causes))
        return out


def _timing(row) -> str:
    return f"compile_s {row['compile_s']:.4g}, tag {row['tag']}, {row['timestamp']}"


def _details(cold, warm, causes) -> list[str]:
    out = []
    for name, column in SHOWN_BY.items():
        if name in causes and (cold.get(column) or warm.get(column)):
            out.append(f"  {column}: {warm.get(column) or '(none)'!s} -> {cold.get(column) or '(none)'!s}")
    return out


def explain_row(engine, row_id: int) -> Diagnosis:
    """The diagnosis of one cold row; a missing or non-cold row is a LedgerError."""
    if not 1 <= row_id <= MAX_ID:  # a driver would raise OverflowError, or compare in numeric
        digits = str(row_id)
        shown = digits if len(digits) <= 24 else f"{digits[:20]}... ({len(digits)} digits)"
        raise LedgerError(f"no compile row with id {shown}: ids run from 1 to {MAX_ID}")
    with engine.connect() as conn:
        row = fetch_rows(conn, [row_id]).get(row_id)
        if row is None:
            raise LedgerError(f"no compile row with id {row_id}")
        from ledger.watch import findings  # it builds on this module

        if row["cache_state"] == NONE:  # cache-off, when its cell was warm before
            return findings.explain_none(conn, row)
        if row["cache_state"] != COLD:
            raise LedgerError(f"row {row_id} is {row['cache_state'] or 'without a cache_state'}, not cold or none: "
                              "explain diagnoses cold rows and rows without a cache dir")
        warm = last_warm_before(conn, row)
        told = None if warm else findings.explain_first_cold(conn, row)  # jax-changed, cache-not-reused
    return told or Diagnosis(row, warm, diagnose(row, warm) if warm else [])
