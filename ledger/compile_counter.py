"""Which compile of which process a recorded row is: (pid, compile_index).

compile_records.pid and compile_index (revision 0012) are part of a recorded row's
identity (ledger/record.py: RECORDED_KEY_FIELDS): two multiprocessing workers of one
program (both process_index 0) that compile the same function at the same signature
in the same second are two rows, not one. A recording holds one counter and asks it at
each compile; a process forked from a recording one (multiprocessing's default on
Linux before Python 3.14) inherits the counter and counts its own compiles from 0.

Dependency-free (stdlib only), so the recorder may import it in the recorded process.
"""

from __future__ import annotations

import itertools
import os


class CompileCounter:
    """``next()`` -> (pid, compile_index): this process's id and its nth compile of the
    recording, from 0. Safe from several threads at once: one count per pid, created
    with dict.setdefault and advanced with next(), each atomic in CPython, so no lock
    that a fork could copy while held."""

    def __init__(self) -> None:
        self._counts: dict[int, itertools.count] = {}

    def next(self) -> tuple[int, int]:
        pid = os.getpid()
        count = self._counts.get(pid)
        if count is None:  # this process's first compile (a forked child's, too)
            count = self._counts.setdefault(pid, itertools.count())
        return pid, next(count)
