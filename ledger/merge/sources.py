"""A merge source, read and never changed.

A SQLite source is copied first, through SQLite's backup API on a read-only
connection inside one read transaction (a consistent snapshot even while its node is
still writing), and a copy at an older revision is brought to head; the source file
itself is only read. The copies are made before the destination's write lock is
taken, and a source whose lock another process holds is waited for no longer than
LEDGER_BUSY_TIMEOUT. A server source must already be at head: there is no copy to
upgrade. A source that is the destination, however it is spelled (a path, a
sqlite:/// URL, a symbolic or hard link), is refused.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from ledger.errors import LedgerError
from ledger.storage import revisions as rv
from ledger.storage.open import Ledger, open_ledger
from ledger.storage.sqlite_file import BUSY_TIMEOUT_ENV, busy_timeout_s, is_locked, read_only
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
            _hold_read_lock(src, path)
            src.backup(dst)
    except sqlite3.DatabaseError as exc:
        raise LedgerError(f"cannot read {path}: {exc}") from None


def _hold_read_lock(con: sqlite3.Connection, path: Path) -> None:
    """Open a read transaction before the backup, waiting for a writer's lock no longer
    than LEDGER_BUSY_TIMEOUT (read_only() sets it). The backup must not meet the lock
    itself: Python's backup retries a busy source for ever, whatever the timeout."""
    try:
        con.execute("BEGIN")
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as exc:
        if not is_locked(exc):
            raise
        raise LedgerError(f"cannot read {path}: another process holds its lock; gave up after"
                          f" {busy_timeout_s():g} s ({BUSY_TIMEOUT_ENV})") from None


def same_database(a: Target, b: Target) -> bool:
    """The same database however it is spelled: a path, a sqlite:/// URL, a symbolic
    or hard link to the same file (compared by device and inode)."""
    if a.value == b.value:
        return True
    if a.path is None or b.path is None:
        return False
    try:
        sa, sb = os.stat(a.path), os.stat(b.path)
    except OSError:  # a file that is not there is no other file
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


@contextmanager
def open_source(value: str, copy: Path, dest: Target) -> Iterator[Source]:
    """The source `value`, read-only; a SQLite source as its snapshot at `copy`."""
    target = resolve(value)
    if same_database(target, dest):
        raise LedgerError(f"{target.display} is the destination: a ledger is not merged into itself")
    if target.path is None:
        with open_ledger(value, "read") as ledger:  # gated at head, read-only session
            yield Source(ledger.display, rv.HEAD, ledger)
        return
    _snapshot(target.path, copy)
    rev, status = rv.sqlite_status(copy)
    rv.gate(target.display, rev, status, "merge")
    if status == rv.OLDER:
        with open_ledger(str(copy), "migrate") as ledger:
            ledger.migrate("upgrade", "head")
    with open_ledger(str(copy), "read") as ledger:
        yield Source(target.display, rev, ledger)
