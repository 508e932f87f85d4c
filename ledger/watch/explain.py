"""`ledger explain ROW`: why a compile was cold, or had no cache, in check's own words.

The row's lineage is read as check reads it (findings.rows_of_lineage) and judged by the
same functions (ledger/watch/judge.py), as if the row were the newest: the finding check
gives it (or its run's streak) is the explanation, with the warm row it is read against
and the values behind a named component. Where check finds nothing, explain says what
the row is: the first compile into a cache dir, or the first into another dir after warm
ones. A probe records the hash of each component of JAX's cache key, the program's
fingerprint and the entries in the cache dir before the compile; legacy rows carry none of
that, and then the honest answer is "cause unknown".
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.errors import LedgerError
from ledger.record import COLD, NONE
from ledger.rows import describe_key
from ledger.watch.causes import C_COMPONENTS, SHOWN_BY, Cause, fetch_rows
from ledger.watch.findings import rows_of_lineage
from ledger.watch.judge import Evidence, Finding, of_row
from ledger.watch.kinds import CACHE_NOT_REUSED, WENT_COLD

# The largest id either backend stores (SQLite's INTEGER, a 64-bit signed integer).
MAX_ID = 2**63 - 1


@dataclass
class Explanation:
    """One row's explanation: check's finding for it, or a note where there is none, and
    the warm row it is read against (where there is one)."""

    row: dict
    finding: Finding | None
    note: Cause | None = None
    warm: dict | None = None

    @property
    def cause(self) -> str | None:
        """The cause's words, as check stores them (None: nothing to explain)."""
        if self.finding is not None:
            return self.finding.cause.words()
        return self.note.words() if self.note is not None else None

    def lines(self) -> list[str]:
        r = self.row
        out = [f"row {r['id']}: {r['cache_state']}, {_timing(r)}",
               f"cell: {describe_key(r)}, cache dir {r['cache_dir'] or '(none)'}"]
        out += _call_site(r)
        if self.warm is not None:
            other = self.warm["cache_dir"] != r["cache_dir"]  # the dir, where it is another
            out.append(f"last warm row before it: row {self.warm['id']}, {_timing(self.warm)}"
                       + (f", cache dir {self.warm['cache_dir']}" if other else ""))
        f = self.finding
        if f is not None:
            head = "" if f.verdict == WENT_COLD and self.warm is not None else f"{f.verdict}: "
            out.append(f"cause: {head}{f.cause.words()}")
            out += _details(r, self.warm, f.cause)
            if f.verdict == CACHE_NOT_REUSED:
                out.append("this fails the check" if f.fails else "this is reported and does not fail the check")
        elif self.note is not None:
            out += [f"cause: {self.note.words()}", "check reports no finding for it"]
        elif r["cache_state"] == NONE:
            out.append("no cache dir, and no earlier warm row of this cell: the persistent cache was not in play,"
                       " and nothing shows it ever was")
        else:
            out.append("no earlier warm row of this cell and cache dir: nothing to compare with "
                       "(the first compile into a cache dir is cold)")
        return out


def _call_site(row) -> list[str]:
    """What asked for a recorded compile: the program's or a library's line (one line, after the cell)."""
    return [f"call site: {row['call_site']}"] if row.get("call_site") else []


def _timing(row) -> str:
    return f"compile_s {row['compile_s']:.4g}, tag {row['tag']}, {row['timestamp']}"


def _details(cold, warm, cause: Cause) -> list[str]:
    """The values behind a named component, where the rows carry them (XLA flags)."""
    if warm is None or cause.code != C_COMPONENTS:
        return []
    out = []
    for name, column in SHOWN_BY.items():
        if name in cause.facts.get("differ", ()) and (cold.get(column) or warm.get(column)):
            out.append(f"  {column}: {warm.get(column) or '(none)'!s} -> {cold.get(column) or '(none)'!s}")
    return out


def explain_row(engine, row_id: int) -> Explanation:
    """The explanation of one cold row, or one without a cache dir; a missing row, or one
    of another state, is a LedgerError."""
    if not 1 <= row_id <= MAX_ID:  # a driver would raise OverflowError, or compare in numeric
        digits = str(row_id)
        shown = digits if len(digits) <= 24 else f"{digits[:20]}... ({len(digits)} digits)"
        raise LedgerError(f"no compile row with id {shown}: ids run from 1 to {MAX_ID}")
    with engine.connect() as conn:
        row = fetch_rows(conn, [row_id]).get(row_id)
        if row is None:
            raise LedgerError(f"no compile row with id {row_id}")
        if row["cache_state"] not in (COLD, NONE):
            raise LedgerError(f"row {row_id} is {row['cache_state'] or 'without a cache_state'}, not cold or none: "
                              "explain diagnoses cold rows and rows without a cache dir")
        return explain(conn, row)


def explain(conn, row: dict) -> Explanation:
    """What check says of `row` (a whole row), were it the newest of its lineage."""
    ev = Evidence(conn)
    rows = rows_of_lineage(conn, row)
    if not any(r["id"] == row["id"] for r in rows):  # not ok, or not warm/cold/none: nothing to judge
        return Explanation(row, None)
    finding, note = of_row(rows, row["id"], ev)
    versus = finding.versus_id if finding is not None else note.facts["warm_row"] if note is not None else None
    warm = ev.rows(versus)[0] if versus is not None else None
    return Explanation(row, finding, note, warm)
