"""open_ledger(): the one way a command opens the ledger.

It resolves the database once (--db, LEDGER_DB, ./ledger.db), checks where it
stands in the revision chain, and refuses what the mode may not touch:

  read     an existing ledger at head; never creates or changes one
  query    an existing database at any revision, ungated (`ledger sql`: ad-hoc
           reads are harmless, and on SQLite need no SQLAlchemy at all)
  write    a ledger at head; a new or empty database is brought to head first
  migrate  any database this ledger's revisions can move (`ledger db`)

Used as a context manager: a write that fails leaves no new, empty database file
behind (unless another writer has opened it by then: then it is that writer's), and
the engine (made on first use, one per command) is disposed. Opening has no other
effect: rows a `ledger record` kept aside are taken in by the commands that do so, as
a step of their own (ledger/command.py), never by an open.
"""

from __future__ import annotations

import sqlite3
import sys
from functools import cached_property
from pathlib import Path

from ledger.errors import LedgerError
from ledger.storage import revisions as rv
from ledger.storage.url import Target, resolve

MODES = ("read", "query", "write", "migrate")


class Ledger:
    def __init__(self, target: Target, mode: str):
        self.target = target
        self.mode = mode
        self._engine = None
        self._created = target.path is not None and not target.path.exists()
        self.revision, self.status = None, None

    # -- what callers use ------------------------------------------------------------
    @property
    def path(self) -> Path | None:
        return self.target.path

    @property
    def display(self) -> str:
        return self.target.display

    @cached_property
    def network_fs(self) -> str | None:
        """The network filesystem a SQLite file sits on, if it does."""
        from ledger.storage.sqlite_file import network_filesystem

        return network_filesystem(self.path) if self.path is not None else None

    @property
    def engine(self):
        if self._engine is None:
            from ledger.storage.engine import make_engine

            # read and query never write, on any backend: the connection refuses to
            self._engine = make_engine(self.target.url, read_only=self.mode in ("read", "query"),
                                       wal=self.mode == "write" and self.network_fs is None)
        return self._engine

    def refresh(self) -> tuple[str | None, str]:
        """Read (revision, status) from the database."""
        if self.path is not None:
            self.revision, self.status = rv.sqlite_status(self.path)
        else:
            self.revision, self.status = rv.engine_status(self.engine, self.display)
        return self.revision, self.status

    def migrate(self, direction: str, revision: str = "head") -> None:
        from ledger.storage.migrate import run

        run(direction, self.engine, revision)
        self.refresh()

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    # -- context -----------------------------------------------------------------------
    def __enter__(self) -> Ledger:  # noqa: PYI034 (Self needs Python 3.11; the floor is 3.10)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is not None and self._created and self.path is not None:
                self._remove_if_empty()
        finally:
            self.close()

    def _remove_if_empty(self) -> None:
        """The file this failed write found missing, removed if it holds no row and no
        other connection has it open. Another process may have opened it since (a SLURM
        array's first writes to a new ledger): removing it under that one lost all its
        rows, its command ending well. A writer's file is in WAL mode, where each open
        connection holds a shared lock: the exclusive lock taken here, without waiting,
        is the proof that none is open, and the removal happens under it."""
        self.close()
        if not self.path.exists():
            return
        try:
            con = sqlite3.connect(self.path, timeout=0, isolation_level=None)
        except sqlite3.DatabaseError:
            return
        try:
            con.execute("PRAGMA locking_mode = EXCLUSIVE")
            con.execute("BEGIN EXCLUSIVE")  # refused at once while another connection is open
            if _rows(con) == 0 and (_in_wal_mode(con) or self.network_fs is None):
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        except sqlite3.DatabaseError:
            pass  # another connection has it: its rows, or soon
        finally:
            con.close()


def _rows(con) -> int:
    """Rows of the two record tables; 0 for a file without them (not even a schema)."""
    try:
        return con.execute(
            "SELECT (SELECT count(*) FROM compile_records) + (SELECT count(*) FROM instrument_records)"
        ).fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def _in_wal_mode(con) -> bool:
    return con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def open_ledger(db: str | None, mode: str, *, create: bool | None = None) -> Ledger:
    """The ledger behind `db`, gated for `mode` (see the module doc). `create`: may a
    missing SQLite file be made (default: only in write mode; `ledger db upgrade`
    passes True)."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not one of {MODES}")
    target = resolve(db)
    if target.value.startswith("sqlite") and target.path is None:
        # every connection would get its own, empty database, gone with the command
        raise LedgerError("an in-memory SQLite database vanishes with the command: give a file path")
    create = mode == "write" if create is None else create
    if target.path is not None and not create and not target.path.exists():
        raise LedgerError(f"no ledger database at {target.path}")
    ledger = Ledger(target, mode)
    if mode == "write" and ledger.network_fs is not None:
        from ledger.storage.sqlite_file import network_warning

        print(network_warning(ledger.path, ledger.network_fs), file=sys.stderr, flush=True)
    if target.path is not None:
        _recover_hot_journal(target.path)
    if mode == "query":
        return ledger  # reads of any database; the read-only connection guards it
    try:
        rev, status = ledger.refresh()
        rv.gate(ledger.display, rev, status, mode)
        if status == rv.EMPTY and mode == "write":
            ledger.migrate("upgrade", "head")
    except BaseException as exc:
        ledger.__exit__(type(exc), exc, exc.__traceback__)
        raise
    return ledger


def _recover_hot_journal(path: Path) -> None:
    """Roll back what a writer that died mid-transaction left (SIGKILL, a full disk).

    Such a writer leaves a hot journal beside the file. SQLite rolls it back on the
    next read by a connection that may write, but refuses a read-only one ("attempt
    to write a readonly database"), and the gate and `ledger sql` open read-only: so
    a read here first, on a connection that may write. It restores the last committed
    state; nothing committed changes. Where the file cannot be written either, the
    read-only open that follows reports it."""
    if not Path(f"{path}-journal").exists():
        return
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True)
        try:
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            con.close()
    except sqlite3.DatabaseError:
        pass

