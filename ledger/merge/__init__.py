"""`ledger merge SRC... --db DEST`: per-node ledgers gathered into one.

Rows keep their identity (record_key), so merging the same source twice adds
nothing; sources are read, never changed, and every SQLite source is copied before
the destination's write lock is taken, so a source held locked by another process
(for LEDGER_BUSY_TIMEOUT at most) never holds the destination with it (sources.py).
Every row is checked by the record contract's validator, as `ledger import` checks
it (rows.py); pins follow their sticky rule (pins.py); predictions keep their own
identity and are scored here by the rows that scored them there (predictions.py);
cache prunes keep theirs, so explain here names a prune done there (prunes.py);
recorded processes keep theirs, so a run's time reads here as there (processes.py);
everything goes into the destination in one transaction, so a merge that fails
half-way, or is stopped by a signal (scratch.py), leaves the destination as it was.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field

from ledger.merge.pins import PinMerge, merge_pins, source_pins
from ledger.merge.predictions import PredictionMerge, copy_predictions, scoring_rows
from ledger.merge.processes import ProcessMerge, copy_processes
from ledger.merge.prunes import PruneMerge, copy_prunes
from ledger.merge.rows import copy_compile_rows, copy_instrument_rows
from ledger.merge.scratch import scratch_dir
from ledger.merge.sources import Source, open_source
from ledger.storage.bulk import fill_missing_keys
from ledger.storage.engine import one_writer_at_a_time
from ledger.storage.open import open_ledger


@dataclass
class SourceSummary:
    display: str
    note: str
    added: int = 0
    present: int = 0
    added_instrument: int = 0
    present_instrument: int = 0
    predictions: PredictionMerge = field(default_factory=PredictionMerge)
    prunes: PruneMerge = field(default_factory=PruneMerge)
    processes: ProcessMerge = field(default_factory=ProcessMerge)
    pins: PinMerge = field(default_factory=PinMerge)
    conflicts: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"{self.display}{self.note}: {self.added} compile rows added, {self.present} already here;"
                f" {self.added_instrument} instrument records added, {self.present_instrument} already here;"
                f" {self.predictions.added} predictions added, {self.predictions.present} already here;"
                f" {self.prunes.added} cache prunes added, {self.prunes.present} already here;"
                f" {self.processes.added} recorded processes added, {self.processes.present} already here;"
                f" pins: {self.pins.adopted} taken, {self.pins.same} the same, {len(self.pins.conflicts)} differ")


def _text(data: bytes) -> str:
    # Text that is not UTF-8 (a hand edit) arrives as lone surrogates, which the
    # validator refuses as not storable, instead of sqlite3's own error on the fetch.
    return data.decode("utf-8", "surrogateescape")


def _merge_one(source: Source, dest) -> SourceSummary:
    out = SourceSummary(source.display, source.note)
    with source.ledger.engine.connect() as src:
        if src.dialect.name == "sqlite":
            src.connection.dbapi_connection.text_factory = _text
        else:  # a server source is read as one snapshot: no pin can outrun its row
            src = src.execution_options(isolation_level="REPEATABLE READ")
        theirs, scored_by = source_pins(src), scoring_rows(src, source.display)
        wanted = {row_id for row_id, _ in theirs} | set(scored_by.values())
        out.added, out.present, out.conflicts, keys = copy_compile_rows(src, dest, source.display, wanted)
        out.added_instrument, out.present_instrument = copy_instrument_rows(src, dest, source.display)
        out.predictions = copy_predictions(src, dest, source.display, scored_by, keys)
        out.conflicts += out.predictions.conflicts
        out.prunes = copy_prunes(src, dest, source.display)
        out.processes = copy_processes(src, dest, source.display)
        out.pins = merge_pins(theirs, keys, dest)
    return out


def merge(sources: list[str], db: str | None) -> tuple[str, list[SourceSummary]]:
    """Merge every source into the ledger at `db`; (its display, one summary per source)."""
    with open_ledger(db, "write") as ledger, scratch_dir() as tmp, ExitStack() as stack:
        # every source read (a snapshot of each file) before the destination is locked
        opened = [stack.enter_context(open_source(value, tmp / f"source-{i}.db", ledger.target))
                  for i, value in enumerate(sources)]
        summaries = []
        with ledger.engine.begin() as dest:
            # one merge at a time on PostgreSQL: each takes a source's rows, then its pins, then
            # the next source's rows, so two merging the same sources deadlocked (3 rounds of 4),
            # each waiting on rows the other inserted; and a merge's pins lock comes after this
            one_writer_at_a_time(dest, "compile_records")
            fill_missing_keys(dest)  # keyless rows here must match their twins there
            for source in opened:
                summaries.append(_merge_one(source, dest))
        return ledger.display, summaries
