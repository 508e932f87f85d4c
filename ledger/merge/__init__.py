"""`ledger merge SRC... --db DEST`: per-node ledgers gathered into one.

Rows keep their identity (record_key), so merging the same source twice adds
nothing; sources are read, never changed (sources.py); pins follow their sticky
rule (pins.py); everything goes into the destination in one transaction, so a merge
that fails half-way leaves the destination as it was.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ledger.merge.pins import PinMerge, merge_pins
from ledger.merge.rows import copy_compile_rows, copy_instrument_rows
from ledger.merge.sources import Source, open_source
from ledger.storage.bulk import fill_missing_keys
from ledger.storage.open import open_ledger


@dataclass
class SourceSummary:
    display: str
    note: str
    added: int = 0
    present: int = 0
    added_instrument: int = 0
    present_instrument: int = 0
    pins: PinMerge = field(default_factory=PinMerge)
    conflicts: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"{self.display}{self.note}: {self.added} compile rows added, {self.present} already here;"
                f" {self.added_instrument} instrument records added, {self.present_instrument} already here;"
                f" pins: {self.pins.adopted} taken, {self.pins.same} the same, {len(self.pins.conflicts)} differ")


def _merge_one(source: Source, dest) -> SourceSummary:
    out = SourceSummary(source.display, source.note)
    with source.ledger.engine.connect() as src:
        out.added, out.present, out.conflicts = copy_compile_rows(src, dest)
        out.added_instrument, out.present_instrument = copy_instrument_rows(src, dest)
        out.pins = merge_pins(src, dest)
    return out


def merge(sources: list[str], db: str | None) -> tuple[str, list[SourceSummary]]:
    """Merge every source into the ledger at `db`; (its display, one summary per source)."""
    with open_ledger(db, "write") as ledger, tempfile.TemporaryDirectory(prefix="ledger-merge-") as tmp:
        summaries = []
        with ledger.engine.begin() as dest:
            fill_missing_keys(dest)  # keyless rows here must match their twins there
            for value in sources:
                with open_source(value, Path(tmp), ledger.target) as source:
                    summaries.append(_merge_one(source, dest))
        return ledger.display, summaries
