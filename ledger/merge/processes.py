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

from ledger.merge import values as value
from ledger.merge.keyed import KeyedMerge, copy_keyed
from ledger.merge.rows import shown
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
ProcessMerge = KeyedMerge


def copy_processes(src, dest, display: str) -> ProcessMerge:
    return copy_keyed(src, dest, display, recorded_processes, _CHECK, PROCESS_IDENTITY, "recorded process")
