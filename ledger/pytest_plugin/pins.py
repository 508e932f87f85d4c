"""Test pins: the compile counts `pytest --ledger-check` holds each test's call to.

One row of test_pins per test and function (revision 0017), taken from a session's rows
by `pytest --ledger-pin`: the test's call only (its fixtures' compiles are theirs, and
shared), and only from tests whose call passed. Like the warm-compile pins of
ledger/watch/pins.py they are sticky: a test with pins keeps them until
`--ledger-repin` moves them, so a check that found a recompile finds it again next
time instead of absorbing it. A test pinned compiling nothing keeps one row with the
function '' (NO_FUNCTION), so that its first compile is a change too.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from ledger.record import PHASE_CALL
from ledger.rows import ok_sql, utc_now
from ledger.storage.engine import one_writer_at_a_time
from ledger.storage.models import test_pins

NO_FUNCTION = ""


def read_pins(engine) -> dict[str, dict[str, int]]:
    """Every test's pins: {test_id: {function: compiles}} (a test pinned compiling
    nothing: an empty dict)."""
    out: dict[str, dict[str, int]] = {}
    with engine.connect() as conn:
        for test_id, function, n in conn.execute(sa.select(test_pins.c.test_id, test_pins.c.function,
                                                           test_pins.c.compiles)):
            counts = out.setdefault(test_id, {})
            if function != NO_FUNCTION:
                counts[function] = int(n)
    return out


@dataclass
class Pinned:
    new: int = 0  # tests pinned for the first time
    repinned: int = 0
    kept: int = 0  # tests that had pins and kept them (no --ledger-repin)

    def line(self, run_id: str) -> str:
        text = f"ledger: pinned the compile counts of {self.new} tests from session {run_id[:12]}"
        if self.repinned:
            text += f", repinned {self.repinned}"
        if self.kept:
            text += f"; {self.kept} kept their pins (--ledger-repin moves them)"
        return text


def _call_counts(conn, run_id: str, tests: set[str]) -> dict[str, dict[str, int]]:
    sql = (f"SELECT test_id, COALESCE(function, transform) AS function, COUNT(*) AS n FROM compile_records"
           f" WHERE run_id = :run AND test_phase = '{PHASE_CALL}' AND {ok_sql()} GROUP BY test_id,"
           " COALESCE(function, transform)")
    out: dict[str, dict[str, int]] = {t: {} for t in tests}
    for test_id, function, n in conn.execute(sa.text(sql), {"run": run_id}):
        if test_id in out:
            out[test_id][function] = int(n)
    return out


def pin_session(engine, run_id: str, passed: set[str], git_commit: str | None, repin: bool) -> Pinned:
    """Pin each passed test's call counts of session ``run_id`` where it has no pin (every
    one of them, with ``repin``); one transaction."""
    result, now = Pinned(), utc_now()
    with engine.begin() as conn:
        one_writer_at_a_time(conn, "test_pins")  # another session's pins are read once it is done
        had = {t for (t,) in conn.execute(sa.select(test_pins.c.test_id).distinct())}
        rows = []
        for test_id, counts in sorted(_call_counts(conn, run_id, passed).items()):
            if test_id in had and not repin:
                result.kept += 1
                continue
            if test_id in had:
                conn.execute(test_pins.delete().where(test_pins.c.test_id == test_id))
                result.repinned += 1
            else:
                result.new += 1
            for function, n in (counts or {NO_FUNCTION: 0}).items():
                rows.append({"test_id": test_id, "function": function, "compiles": n, "run_id": run_id,
                             "git_commit": git_commit, "pinned_at": now})
        if rows:
            conn.execute(test_pins.insert(), rows)
    return result
