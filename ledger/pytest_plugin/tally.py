"""Each test's compiles, in the process that runs it, as the recorder spools them.

The recorder (ledger/recorder/hook.py) hands each compile's record to its spool writer
the moment the compile returns, then JAX's own duration as an amend line. This writer
spools them as any recorded process does (when the session records into a ledger) and
keeps a few fields of each for the test that is running, so a budget or a pin is judged
when the test's call ends, without a database.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ledger.recorder import spool

KEPT = ("function", "input_signature", "cache_state", "compile_s", "host_load_avg_1m", "test_id", "test_phase",
        "call_site")


@dataclass
class Compile:
    """One compile as a budget or a pin reads it."""

    function: str | None
    input_signature: str | None
    cache_state: str | None
    compile_s: float | None  # the hook's clock, then JAX's backend duration once it comes
    host_load_avg_1m: float | None
    test_id: str | None
    test_phase: str | None
    call_site: str | None = None  # what asked for it: the line --ledger-check names, as ledger diff does


class TallyWriter(spool.SpoolWriter):
    """A spool writer that also keeps each compile for its test and phase; with no run
    dir (a budget judged in a session not recording into a ledger) it writes no file."""

    def __init__(self, run_dir: str | None):
        super().__init__(run_dir or "")
        self.by_index: dict[int, Compile] = {}
        self.by_test: dict[tuple, list[Compile]] = defaultdict(list)

    def write(self, line: dict) -> None:
        if self.run_dir:
            super().write(line)
        if "_line" not in line:
            seen = Compile(*(line.get(k) for k in KEPT))
            self.by_index[line["compile_index"]] = seen
            self.by_test[(seen.test_id, seen.test_phase)].append(seen)
        elif line["_line"] == spool.AMEND and (seen := self.by_index.get(line.get("index"))) is not None:
            seen.compile_s = line.get("backend_compile_s")

    def note(self, kind: str, **fields) -> None:
        if kind == spool.AMEND or self.run_dir:
            super().note(kind, **fields)

    def of(self, test_id: str, phase: str) -> list[Compile]:
        return self.by_test.get((test_id, phase), [])

    def forget(self) -> None:
        """Drop what was kept (a test is judged at its call's end: nothing before it is read)."""
        self.by_index.clear()
        self.by_test.clear()
