"""A merge source, read and never changed.

A SQLite source is copied first, through SQLite's backup API on a read-only
connection (a consistent snapshot even while its node is still writing), and a copy
at an older revision is brought to head; the source file itself is only read. A
server source must already be at head: there is no copy to upgrade.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ledger.errors import LedgerError
from ledger.storage import revisions as rv
from ledger.storage.open import Ledger, open_ledger
from ledger.storage.sqlite_file import read_only
from ledger.storage.url import Target, resolve


@dataclass
class Source:
    display: str
    revision: str | None  # as found, before any upgrade of the copy
    ledger: Ledger  # read-only, at head

    @property
    def note(self) -> str:
        return "" if self.revision == rv.HEAD else f" (at {self.revision}: merged from a copy brought to {rv.HEAD})"


def _snapshot(path: Path, copy: Path) -> None:
    if not path.is_file():
        raise LedgerError(f"no ledger database at {path}")
    try:
        with read_only(path) as src, closing(sqlite3.connect(copy)) as dst:
            src.backup(dst)
    except sqlite3.DatabaseError as exc:
        raise LedgerError(f"cannot read {path}: {exc}") from None


@contextmanager
def open_source(value: str, workdir: Path, dest: Target) -> Iterator[Source]:
    target = resolve(value)
    if target.value == dest.value:
        raise LedgerError(f"{target.display} is the destination: a ledger is not merged into itself")
    if target.path is None:
        with open_ledger(value, "read") as ledger:  # gated at head, read-only session
            yield Source(ledger.display, rv.HEAD, ledger)
        return
    copy = workdir / f"source-{len(list(workdir.iterdir()))}.db"
    _snapshot(target.path, copy)
    rev, status = rv.sqlite_status(copy)
    rv.gate(target.display, rev, status, "merge")
    if status == rv.OLDER:
        with open_ledger(str(copy), "migrate") as ledger:
            ledger.migrate("upgrade", "head")
    with open_ledger(str(copy), "read") as ledger:
        yield Source(target.display, rev, ledger)
