"""A source's recorded processes (`ledger record`'s wall times, revision 0016), carried
into the destination, so that `ledger runs` there says a node's run's time and the share
of it spent compiling, as the node's own does.

A process's identity is its run, host and pid (ledger/record.py: PROCESS_IDENTITY). One
the destination holds already is not added again, so merging the same source twice
adds nothing; the id is not carried. Each is checked before it is written: its text
storable, its pid a count, its seconds finite and not negative, its times ISO 8601, how
its end is known one of PROCESS_ENDS; a refused one stops the merge with one line
naming the source and its id.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from ledger.merge import values as value
from ledger.merge.rows import checked, chunks, shown
from ledger.record import PROCESS_ENDS, PROCESS_FIELDS, PROCESS_IDENTITY
from ledger.record_validation import RecordError
from ledger.storage.models import recorded_processes


def _ended_by(name: str, v):
    if v not in PROCESS_ENDS:
        raise RecordError(f"{name} is not one of {', '.join(PROCESS_ENDS)} ({shown(repr(v), 60)})")
    return v


_CHECK = {"run_id": value.text, "hostname": value.text, "pid": value.count, "started": value.time,
          "ended": value.time, "wall_s": value.seconds, "ended_by": _ended_by}
assert tuple(_CHECK) == tuple(PROCESS_FIELDS)
_REQUIRED = frozenset(c.name for c in recorded_processes.c if not c.nullable and not c.primary_key)
COLUMNS = ("id", *_CHECK)


@dataclass
class ProcessMerge:
    added: int = 0
    present: int = 0


def checked_process(raw: dict) -> dict:
    """The destination's row for a source process (its id aside), or RecordError."""
    row = {}
    for name, check in _CHECK.items():
        if raw[name] is None and name in _REQUIRED:
            raise RecordError(f"{name} is missing")
        row[name] = None if raw[name] is None else check(name, raw[name])
    return row


def copy_processes(src, dest, display: str) -> ProcessMerge:
    out = ProcessMerge()
    held = {tuple(r) for r in dest.execute(sa.text(f"SELECT {', '.join(PROCESS_IDENTITY)} FROM recorded_processes"))}
    for raws in chunks(src, display, "recorded_processes", COLUMNS):
        new = []
        for row in checked(raws, checked_process, display, "recorded process"):
            identity = tuple(row[name] for name in PROCESS_IDENTITY)
            if identity in held:
                out.present += 1
                continue
            held.add(identity)
            new.append(row)
        if new:
            dest.execute(recorded_processes.insert(), new)
        out.added += len(new)
    return out
