"""Why a compile went cold: the evidence of a cold row against its cell's last warm row.

A probe records the hash of each component of JAX's cache key (computation, jaxlib
version, XLA flags, compile options, ...), the program's fingerprint, and the number
of entries in the cache dir before the compile. A cold row after a warm one of the
same cell and cache dir is explained by what differs between the two. Legacy rows
carry none of that, and then the honest answer is "cause unknown".
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.errors import LedgerError
from ledger.record import COLD, NONE
from ledger.rows import describe_key
from ledger.watch import findings
from ledger.watch.causes import SHOWN_BY, cause_text, diagnose_pruned, fetch_rows, last_warm_before

# The largest id either backend stores (SQLite's INTEGER, a 64-bit signed integer).
MAX_ID = 2**63 - 1


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
        if row["cache_state"] == NONE:  # cache-off, when its cell was warm before
            return findings.explain_none(conn, row)
        if row["cache_state"] != COLD:
            raise LedgerError(f"row {row_id} is {row['cache_state'] or 'without a cache_state'}, not cold or none: "
                              "explain diagnoses cold rows and rows without a cache dir")
        warm = last_warm_before(conn, row)
        told = None if warm else findings.explain_first_cold(conn, row)  # jax-changed, cache-not-reused
        return told or Diagnosis(row, warm, diagnose_pruned(conn, row, warm) if warm else [])
